"""``python -m simindex``: the same as the ``simindex`` command."""

from __future__ import annotations

import sys

from simindex.cli import main

sys.exit(main())
