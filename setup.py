"""What the wheel holds: simindex's packages, found, and ``migrations/`` (beside ``simindex/``, as
Alembic projects keep it) shipped inside them as ``simindex.migrations``: the one mapping.

Everything else is declared in pyproject.toml; setuptools' ``[tool.setuptools.packages.find]``
cannot find a directory under another package's name, hence this file.
"""

from setuptools import find_packages, setup

MIGRATIONS = "migrations"

setup(
    packages=[
        *find_packages(include=["simindex", "simindex.*"]),
        *(f"simindex.{name}" for name in find_packages(include=[MIGRATIONS, f"{MIGRATIONS}.*"])),
    ],
    package_dir={f"simindex.{MIGRATIONS}": MIGRATIONS},
)
