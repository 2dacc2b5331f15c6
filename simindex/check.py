"""Check and repair, at their documented import path (the code: :mod:`simindex.ops.check`)."""

from __future__ import annotations

from simindex.ops.check import CheckReport, check, repair

__all__ = ["CheckReport", "check", "repair"]
