"""Watch mode: re-check memories the moment the files under them change.

`watch` follows the workspace with watchfiles and, for each batch of changes to anchored
files, re-checks only the memories resting there. A drift transition (fresh -> stale, ...) is
reported once, to a callback and as one JSON line in `.anchorfs/events.jsonl` (which the hooks
append to as well): it is judged against the persisted last drift, under a lock on that file.

The hash cache is kept warm: a file hashed right after an edit is "racy" (not trusted from the
cache), so it is hashed again once the timestamp granularity has passed, and every anchored file
is refreshed before the cache TTL ends.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..anchor.anchors import STATE_DIR
from ..core.errors import AnchorfsError, WorkspaceError
from ..drift.hashcache import DEFAULT_GRANULARITY_NS
from ..core.model import Drift, Value, Verdict, to_iso, utcnow
from ..core.statefs import open_state

if TYPE_CHECKING:
    from ..core.model import AnchorRef
    from ..drift import MemoryDrift
    from ..sdk.workspace import Workspace

__all__ = ["DriftEvent", "EVENTS_FILE", "IGNORE_DIRS", "record_transitions", "watch"]

EVENTS_FILE = "events.jsonl"
IGNORE_DIRS: tuple[str, ...] = (
    STATE_DIR, ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".idea", ".vscode",
)
"""Folders whose changes are never looked at (anchors into them are not followed live)."""

_STALE = (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)
_UNKNOWN = (Verdict.UNREADABLE, Verdict.UNSAFE)


class DriftEvent(Value):
    """One memory's drift changed: `before` -> `after`, seen by `source` ("watch" or "hook")."""

    __slots__ = ("at", "id", "before", "after", "source", "detail", "content")
    at: datetime
    id: str
    before: str
    after: str
    source: str
    detail: str
    content: str

    def __init__(self, at: datetime, id: str, before: str, after: str, source: str, detail: str,  # noqa: A002
                 content: str) -> None:
        for name, value in zip(self.__slots__, (at, id, before, after, source, detail, content)):
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return {"at": to_iso(self.at), "id": self.id, "from": self.before, "to": self.after, "source": self.source,
                "detail": self.detail, "content": self.content}


def _detail(md: "MemoryDrift", bodies: "Callable[[AnchorRef], list[str]]" = lambda a: []) -> str:
    """What a person needs to act: the anchors behind the new drift; for a symbol no longer found, where
    the same body is now (`bodies`: what `reanchor` offers), so the agent re-anchors in one call."""
    if md.drift is Drift.STALE:
        bad = [c.detail + (f"; the same body is at {', '.join(found)}: reanchor to it if the memory still holds"
                           if c.verdict is Verdict.SYMBOL_MISSING and (found := bodies(c.anchor)) else "")
               for c in md.checks if c.verdict in _STALE]
    elif md.drift is Drift.UNKNOWN:
        bad = [c.detail for c in md.checks if c.verdict in _UNKNOWN]
    else:
        bad = [c.detail for c in md.checks if c.verdict is Verdict.MOVED] or ["anchors match again"]
    return "; ".join(bad)


@contextmanager
def _events_fd(state: str | os.PathLike[str]) -> Iterator[int]:
    """The events file, opened for appending and locked: transitions are judged under it.
    A link there is refused (`WorkspaceError`), never appended through."""
    try:
        fd = open_state(os.path.join(state, EVENTS_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError as exc:
        raise WorkspaceError(f"cannot open {os.path.join(state, EVENTS_FILE)}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def record_transitions(ws: "Workspace", paths: Iterable[str] | None = None, *, source: str) -> list[DriftEvent]:
    """Re-check the memories anchored to `paths` (all when None); log and return each transition."""
    from ..drift import DriftChecker

    with _events_fd(ws.state_dir) as fd:
        bodies = DriftChecker(ws.root_real, ws.cache).body_candidates
        return log_transitions(fd, ws.recheck(paths), source=source, bodies=bodies)


def log_transitions(fd: int, changed: Iterable[tuple[str, MemoryDrift]], *, source: str,
                    bodies: "Callable[[AnchorRef], list[str]]" = lambda a: []) -> list[DriftEvent]:
    """One event per (drift before, drift now) transition, appended to the events log locked at `fd`."""
    now = utcnow()
    events = [DriftEvent(now, md.memory.id, before, md.drift.value, source, _detail(md, bodies), md.memory.content)
              for before, md in changed]
    if events:
        # One write with O_APPEND: lines from the watcher and the hook never interleave.
        from orjson import dumps

        os.write(fd, b"".join(dumps(e.to_dict()) + b"\n" for e in events))
    return events


class _Index:
    """Which workspace paths matter: anchored files and the folders holding them, rebuilt when
    the ledger grows. Anchor paths are stored resolved, as the file system reports changes."""

    def __init__(self, ws: "Workspace") -> None:
        self.ws = ws
        self.size = -1
        self.files: set[str] = set()
        self.folders: set[str] = set()

    def refresh(self) -> None:
        size = self.ws.ledger.size()
        if size == self.size:
            return
        self.size = size
        files = set(self.ws.anchored_paths())
        self.files = files
        self.folders = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}

    def anchored(self, changed: Iterable[str]) -> set[str]:
        """The anchored paths behind a batch of changed workspace paths."""
        out: set[str] = set()
        for rel in changed:
            if rel in self.files:
                out.add(rel)
            elif rel in self.folders:  # a folder deleted or renamed as a whole
                prefix = rel + "/"
                out.update(path for path in self.files if path.startswith(prefix))
        return out


def _wanted(root_real: str, ignored: frozenset[str], index: _Index, path: str) -> bool:
    """The watch filter: anchored files and their folders, outside the ignored folders."""
    rel = _relative(root_real, path)
    if rel is None or any(part in ignored for part in rel.split("/")):
        return False
    index.refresh()  # one stat of the ledger: a memory recorded a moment ago is followed already
    return rel in index.files or rel in index.folders


def _relative(root_real: str, path: str) -> str | None:
    rel = os.path.relpath(path, root_real)
    if rel == "." or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return rel.replace(os.sep, "/")


def watch(ws: "Workspace", *, on_event: Callable[[DriftEvent], None] | None = None,
          on_ready: Callable[[int, int], None] | None = None, stop_event: threading.Event | Any | None = None,
          ignore_dirs: Sequence[str] = IGNORE_DIRS, debounce_ms: int = 400, tick_ms: int = 1000,
          rewarm_after: float | None = None, refresh_every: float | None = None,
          force_polling: bool | None = None) -> None:
    """Follow the workspace until `stop_event` is set (or Ctrl-C), reporting drift transitions.

    A first pass reports what changed while nobody was watching; `on_ready(memories, files)` is
    called once the watcher is live. `rewarm_after` (seconds, default: the timestamp granularity
    plus a margin): when a file is hashed again after an edit; `refresh_every` (default: 80% of
    the cache TTL; 0: off) re-hashes every anchored file, which also catches any event missed.
    """
    import watchfiles

    root = ws.root_real
    ignored = frozenset(ignore_dirs)
    index = _Index(ws)
    rewarm = rewarm_after if rewarm_after is not None else DEFAULT_GRANULARITY_NS / 1e9 + 0.5
    ttl = float(ws.config["drift.cache_ttl"])
    refresh = refresh_every if refresh_every is not None else ttl * 0.8
    emit = on_event or (lambda event: None)

    def keep(change: Any, path: str) -> bool:
        return _wanted(root, ignored, index, path)

    def report(paths: Iterable[str] | None) -> None:
        try:
            events = record_transitions(ws, paths, source="watch")
        except AnchorfsError as exc:  # a long-lived watcher outlives one bad turn; the next retries
            warnings.warn(f"re-check failed: {exc}", stacklevel=2)
            return
        for event in events:
            emit(event)

    try:
        index.refresh()
        report(None)
        last_refresh = time.monotonic()
        pending: dict[str, float] = {}  # anchored path -> when it last changed (racy in the cache)
        ready = False
        for changes in watchfiles.watch(
            root, watch_filter=keep, stop_event=stop_event, debounce=debounce_ms, step=50,
            rust_timeout=tick_ms, yield_on_timeout=True, raise_interrupt=False, force_polling=force_polling,
        ):
            if not ready:
                ready = True
                if on_ready is not None:
                    on_ready(len({i for ids in ws.anchored_paths().values() for i in ids}), len(index.files))
            index.refresh()
            now = time.monotonic()
            if changes:
                anchored = index.anchored(r for r in (_relative(root, p) for _, p in changes) if r is not None)
                if anchored:
                    report(anchored)
                    for path in anchored:
                        pending[path] = now
            due = [p for p, at in pending.items() if now - at >= rewarm]
            if due:
                for path in due:
                    del pending[path]
                report(due)  # the racy entries are hashed again, now trustworthy
            if refresh > 0 and now - last_refresh >= refresh:
                last_refresh = now
                for path in index.files:
                    ws.cache.forget(path)
                report(None)
    finally:
        ws.cache.save()
