"""What every benchmark records about the machine it ran on."""

from __future__ import annotations

import contextlib
from importlib import metadata
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or "unknown"."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def package_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``packages`` ("unknown" for one that is not installed)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions
