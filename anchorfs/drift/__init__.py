"""drift: is the ground under a memory still there? Deterministic, no model calls.

The hash cache (`hashcache`, its file `manifest`, the C stat loop `_statmatch` with a Python
fallback) says which anchored files changed; the checker (`check`, standing on `moves`: where
moved content went, and `probe`: the pass's files, located, hashed and read once) gives each
anchor its verdict and each memory its drift (`report`); `envelopes` writes the freshness line.
Imports `core` and `anchor` only.
"""

from __future__ import annotations

from .check import DriftChecker
from .hashcache import HashCache
from .report import WEAK_MARK, DriftReport, MemoryDrift, envelope, expired, weak_envelope

__all__ = ["DriftChecker", "DriftReport", "HashCache", "MemoryDrift", "WEAK_MARK", "envelope", "expired",
           "weak_envelope"]
