"""Keeping the LanceDB store the fold of the ledger (the checkpoint `.anchorfs/applied`, the
catch-up), and each memory's last known drift in `.anchorfs/drift.json`, mirrored into the store's
column lazily (`pending`) so a git hook never imports LanceDB. Both are caches: a checkpoint left
behind costs a replay, never a wrong answer, and a failure never fails a read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import AnchorfsError
from ..core.model import Memory
from ..core.statedir import _replace_atomic
from ..core.statefs import read_state
from ..drift import DriftReport, MemoryDrift
from ..ledger import catchup
from ..ledger.log import Entry, Ledger, fold

if TYPE_CHECKING:
    from ..store.table import Store
    from .workspace import Workspace


__all__ = ["open_store", "checkpoint", "applied", "set_applied", "catch_up", "rebuild", "DRIFTS",
           "UNANCHORED", "read", "write_back", "flush_pending"]


def open_store(ws: "Workspace") -> "Store":
    """The store, opened and caught up with the ledger; after any failure the next use catches up again."""
    opened = ws._store is None
    if opened:
        from ..store.table import Store

        store = Store(ws.state, ws.embedder, compact_fragments=int(ws.config["store.compact_fragments"]),
                      index_rows=0 if ws.read_only else int(ws.config["store.index_rows"]))
        seen = checkpoint(ws.state) if store.exists() else None  # a store created now has taken in nothing
        if store.exists():
            store.table()
        else:
            with ws.ledger.lock():  # first writers racing to create it would conflict
                store.table()
        ws._store = store
        ws._store_opened = True
    else:
        seen = checkpoint(ws.state)  # another process may have moved store and checkpoint on
    if catchup.settled(ws.ledger, seen):
        ws._applied_at = seen
    else:
        try:
            with ws.ledger.lock():
                catch_up(ws, from_start=seen is None)
        except BaseException:
            ws._store = None  # never serve a store that lags: the next use catches up again
            ws._applied_at = None
            raise
    assert ws._store is not None
    if opened:  # drift found by store-less checks (hooks, cron), into the store's column
        flush_pending(ws.state, ws._store, read_only=ws.read_only)
    return ws._store


def checkpoint(state: Path) -> "catchup.Prefix | None":
    """The ledger prefix the store has taken in (`.anchorfs/applied`); None when unknown."""
    return catchup.load(state / "applied")


def applied(state: Path) -> int:
    """Ledger bytes the store has taken in; -1 when unknown (no store or no checkpoint)."""
    seen = checkpoint(state)
    return seen.offset if seen is not None and (state / "memories.lance").exists() else -1


def set_applied(ws: "Workspace", offset: int, prefix: "catchup.Prefix | None" = None) -> None:
    """Advance the checkpoint to `offset` (caller holds the lock); never fails a write."""
    with contextlib.suppress(OSError):
        if prefix is None:
            prefix = catchup.extend(ws.ledger, ws._applied_at, offset)
        ws._applied_at = prefix
        if ws.read_only:  # known in this process; a read-only workspace writes nothing
            return
        _replace_atomic(ws.state / "applied", prefix.to_bytes(), "applied-write")
        catchup.stamp(ws.state / "applied", prefix)


def catch_up(ws: "Workspace", *, from_start: bool = False) -> None:
    """Bring the store to the ledger now (caller holds the lock), by its new lines or a reconcile."""
    assert ws._store is not None
    seen: catchup.Prefix | None = None
    if not from_start:
        seen = ws._applied_at if catchup.settled(ws.ledger, ws._applied_at) else checkpoint(ws.state)
        if catchup.settled(ws.ledger, seen):
            ws._applied_at = seen
            return
    follow, state, inserted, written = _follow_into(ws._store, ws.ledger, seen)
    redacted = {m.id for e in follow.entries if e.op == "redact" for m in e.memories}
    if redacted & written:  # a text this store held is redacted now: its older versions and index still hold it
        _rebuild(ws)
        return
    if inserted:  # back from another branch: its last known drift, as `reindex` gives it
        known = ws.last_drift()
        ws._store.set_drift({i: known[i] for i in inserted if known.get(i, "fresh") != "fresh"})
    if state is not None and follow.prefix.stat is not None:
        ws._fold = catchup.Folded(follow.prefix, state)
    if seen is None or follow.prefix.to_bytes() != seen.to_bytes():
        set_applied(ws, follow.prefix.offset, follow.prefix)
        return
    ws._applied_at = follow.prefix
    if catchup.settled(ws.ledger, follow.prefix) and not ws.read_only:  # verified whole again: later readers may trust the stat
        with contextlib.suppress(OSError):
            catchup.stamp(ws.state / "applied", follow.prefix)


def rebuild(ws: "Workspace", *, embedder: str | None = None,
            progress: Callable[[int, int], None] | None = None) -> int:
    """`Workspace.reindex`: the store rebuilt from the ledger alone, under the lock; the memories' count."""
    from ..store.embedders import get_embedder

    if embedder is not None:
        ws._embedder_name = embedder
        ws._embedder = get_embedder(embedder)
    with ws.ledger.lock():
        return _rebuild(ws, progress)


def _rebuild(ws: "Workspace", progress: Callable[[int, int], None] | None = None) -> int:
    """`rebuild` with the lock held."""
    from datetime import timedelta

    from ..store.table import Store, indexer_excluded

    with indexer_excluded(ws.state):  # no indexer writes into the folder dropped here
        # the fold and the checkpoint's checksum from the same bytes, never into a torn tail
        follow = catchup.follow(ws.ledger, None)
        state = fold(follow.entries)
        mems = list(state.values())
        with contextlib.suppress(OSError):  # a rebuild cut short must be redone from the start
            (ws.state / "applied").unlink(missing_ok=True)
        ws._applied_at = None
        if ws._store is not None:
            ws._store.drop()
        else:
            Store(ws.state, ws.embedder).drop()
        ws._store = None
        store = Store(ws.state, ws.embedder, compact_fragments=int(ws.config["store.compact_fragments"]),
                      index_rows=0)  # no background build halfway: the index comes once all rows are in
        store.settle_writes = False  # nor an index refresh per batch: one `optimize` at the end
        store.table()
        known = ws.last_drift()
        step = 5000 if progress is None else 256
        for start in range(0, len(mems), step):
            store.add(mems[start:start + step])
            if progress is not None:
                progress(min(start + step, len(mems)), len(mems))
        ids = {m.id for m in mems}
        store.set_drift({mid: d for mid, d in known.items() if mid in ids})
        store.index_rows = int(ws.config["store.index_rows"])
        store.maybe_index(background=False)  # past `store.index_rows`: the vector index, now
        store.maybe_compact(force=True, keep=timedelta(0))  # under the lock: no version is needed any more
        store.settle_writes = True
        ws._store = store
        if follow.prefix.stat is not None:
            ws._fold = catchup.Folded(follow.prefix, state)
        set_applied(ws, follow.prefix.offset, follow.prefix)
    return len(mems)


def _doc(memory: Memory) -> str:
    """A memory as the store's `doc` column holds it (`Store._rows`)."""
    import orjson

    return orjson.dumps(memory.to_dict()).decode()


def reconcile(store: "Store", state: Mapping[str, Memory]) -> tuple[list[str], set[str]]:
    """Make the store's rows exactly `state`: (the ids inserted anew, their drift unknown here; every id written)."""
    docs = store.docs()
    gone = [i for i, d in docs.items() if i not in state or d is None]
    store.delete(gone)
    todo = [m for i, m in state.items() if docs.get(i) is None or docs[i] != _doc(m)]
    inserted = [m.id for m in todo if docs.get(m.id) is None]
    for start in range(0, len(todo), catchup.BATCH):
        batch = todo[start:start + catchup.BATCH]
        if not docs:
            store.add(batch)  # an empty store: plain appends, no merge
        else:
            store.upsert(batch)
    return inserted, {m.id for m in todo}


def _follow_into(store: "Store", ledger: Ledger,
                 seen: catchup.Prefix | None) -> tuple[catchup.Follow, dict[str, Memory] | None, list[str], set[str]]:
    """Bring `store` from `seen` to the ledger: (the follow, the fold when rebuilt, the ids inserted
    anew, every id written)."""
    f = catchup.follow(ledger, seen)
    if f.kind == "grown":
        mems = list(_grown(ledger, seen, f.entries))
        for start in range(0, len(mems), catchup.BATCH):
            store.upsert(mems[start:start + catchup.BATCH])
        return f, None, [], {m.id for m in mems}
    if f.kind == "rewritten":
        state = fold(f.entries)
        return f, state, *reconcile(store, state)
    return f, None, [], set()


def _grown(ledger: Ledger, seen: catchup.Prefix | None, entries: list[Entry]) -> list[Memory]:
    """The fold's snapshots of the memories `entries` touch, those they revise folded with the prefix's lines."""
    ids = {m.id for e in entries if e.seq is not None for m in e.memories if e.deps_of(m.id) or e.op != "record"}
    new = fold(entries)
    if not ids or seen is None:
        return list(new.values())
    known = fold(ledger.touching(ids, seen.offset) + entries)
    return [known.get(i, m) for i, m in new.items()]


# -- Drift write-back: each memory's last known drift, kept in `.anchorfs/drift.json`.

DRIFTS = ("fresh", "stale", "unknown")  # a tuple, so `[1] in DRIFTS` is False, not a TypeError
UNANCHORED = "unanchored"
"""The drift `list` shows for a memory with no anchors (DESIGN.md): nothing to check."""


def read(state: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, str], bool]:
    """(last known drift, drift not yet in the store, damaged) from `state/drift.json`; damage is a cold cache."""
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
    """Persist drift that changed (into the store's column now, or `pending` without `store`); the count."""
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
        with contextlib.suppress(AnchorfsError):
            store.set_drift(pending)
            pending = {}
    try:
        _save(state, merged, pending)
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
    try:
        store.set_drift(pending)
        _save(state, known, {})
    except (AnchorfsError, OSError):
        pass


def _save(state: str | os.PathLike[str], known: dict[str, str], pending: dict[str, str]) -> None:
    from orjson import dumps

    record = {"v": _VERSION, "owner": _owner(state), "drift": known, "pending": pending}
    _replace_atomic(os.path.join(state, "drift.json"), dumps(record), "drift-write")
