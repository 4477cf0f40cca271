"""Drift write-back: each memory's last known drift, kept in `.anchorfs/drift.json`.

Apart from the `Workspace` because it is its own cache with its own rules: `list --drift` and
the hooks answer from it without re-checking, a read that changed nothing writes nothing, and
the store's drift column is mirrored from it lazily (`pending`), so a git hook or cron `drift`
never pays for importing LanceDB. Both files are caches: a failure here never fails a read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING


from ..drift import DriftReport, MemoryDrift
from ..core.errors import AnchorfsError
from ..core.model import Drift, Memory
from ..core.statefs import read_state

if TYPE_CHECKING:
    from ..store.table import Store

__all__ = ["DRIFTS", "UNANCHORED", "read", "write_back", "flush_pending"]

DRIFTS = ("fresh", "stale", "unknown")  # a tuple, so `[1] in DRIFTS` is False, not a TypeError
UNANCHORED = "unanchored"
"""The drift `list` shows for a memory with no anchors (DESIGN.md): nothing to check."""


def read(state: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, str], bool]:
    """(last known drift, drift not yet mirrored into the store, damaged) from `state/drift.json`.

    A damaged, foreign or future-version file reads as a cold cache (damaged: true, so the
    next check rewrites it).
    """
    from orjson import loads

    try:
        raw = read_state(os.path.join(state, "drift.json"))
        if raw is None:
            return {}, {}, False
        data = loads(raw)
    except (OSError, ValueError):  # UnicodeError and a nesting too deep are ValueErrors too
        return {}, {}, True
    try:
        if data.get("v") != _VERSION or data.get("owner") != _owner(state):
            raise ValueError("another version, or a copy from another clone")
        # Only known drift values: a hand-edited `[1]` would reach the store's update as a key.
        raw_known, raw_pending = dict(data["drift"]), dict(data.get("pending") or {})
        for key in (*raw_known, *raw_pending):
            key.encode("utf-8")  # a lone surrogate (an escape json takes, orjson refuses) is damage
        known = {k: v for k, v in raw_known.items() if isinstance(v, str) and v in DRIFTS}
        pending = {k: v for k, v in raw_pending.items() if isinstance(v, str) and v in DRIFTS}
        return known, pending, len(known) != len(raw_known) or len(pending) != len(raw_pending)
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}, {}, True


_VERSION = 2
"""2: the record names its owner (the anchorfs version, the state folder's device and inode)."""


def _owner(state: str | os.PathLike[str]) -> list[object] | None:
    """Whose record this is: a copy from another clone, or of another anchorfs, is a cold one."""
    from ..core import __version__

    try:
        st = os.lstat(state)
    except OSError:
        return None
    return [__version__, st.st_dev, st.st_ino]



def write_back(state: str | os.PathLike[str], results: Iterable[MemoryDrift] | DriftReport, *, store: "Store | None",
               read_only: bool) -> int:
    """Persist drift that changed since the last check; a read that changed nothing writes nothing.

    `drift.json` answers `list --drift` at once. The store's drift column is written in one
    batch when the store is open in this process (`store`); otherwise the change waits in
    `pending` and lands when the store is next opened (`flush_pending`).
    """
    if read_only:
        return 0
    known, pending, damaged = read(state)
    # A memory is fresh when recorded (its anchors were just hashed): no entry means fresh.
    if isinstance(results, DriftReport):  # a whole pass: build no result for a fresh memory
        flagged = results.flagged
        changes = {r.memory.id: r.drift.value for r in flagged if known.get(r.memory.id, "fresh") != r.drift.value}
        was_flagged = {k for k, v in known.items() if v != "fresh"}
        if was_flagged:
            now_flagged = {r.memory.id for r in flagged}
            checked = results.checked  # a pass from the fold snapshot's view names its memories unbuilt
            for mid in getattr(checked, "ids", None) or [m.id for m in checked]:
                if mid in was_flagged and mid not in now_flagged:
                    changes[mid] = "fresh"
    else:
        changes = {r.memory.id: r.drift.value for r in results if known.get(r.memory.id, "fresh") != r.drift.value}
    if not changes and not damaged:
        return 0
    merged = {**known, **changes}
    pending = {**pending, **changes}
    # Both are caches: a read never fails for them, and the next read retries what failed.
    if store is not None:
        try:
            store.set_drift(pending)
            pending = {}
        except AnchorfsError:
            pass
    try:
        from orjson import dumps
        from ..core.statedir import _replace_atomic  # lazily: init and .gitignore are no part of a hook's drift write

        _replace_atomic(os.path.join(state, "drift.json"), dumps({"v": _VERSION, "owner": _owner(state), "drift": merged, "pending": pending}),
                        "drift-write")
    except OSError:
        return 0
    return len(changes)


def flush_pending(state: str | os.PathLike[str], store: "Store", *, read_only: bool) -> None:
    """Mirror drift found by store-less checks (hooks, cron) into the store's column."""
    if read_only:
        return
    known, pending, _ = read(state)
    if not pending:
        return
    from orjson import dumps
    from ..core.statedir import _replace_atomic

    try:
        store.set_drift(pending)
        _replace_atomic(os.path.join(state, "drift.json"), dumps({"v": _VERSION, "owner": _owner(state), "drift": known, "pending": {}}),
                        "drift-write")
    except (AnchorfsError, OSError):
        pass
