"""The ledger: `.anchorfs/ledger.jsonl`, the append-only record every write lands in first.

Each line is one mutation with full snapshots of the memories it touched, so the LanceDB store
(the searchable index) can always be rebuilt from it, and the past can be replayed to any moment.
Appends are flushed and fsynced before the store is touched; a write whose append fails does
not happen. A torn last line (a crash mid-append) is skipped with a warning when read and cut
off before the next append, so it can never glue onto a real record; where it cannot be cut (an
append-only file, `chattr +a`), reads still skip it and every append is refused in one line.
The ledger and the lock are opened through `anchorfs.statefs`: a link there is refused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from .errors import InputError, LedgerError
from .model import Memory, SnapshotError, check_snapshot, from_iso, new_id, to_iso, utcnow
from .statefs import open_state, refuse_link

__all__ = ["Entry", "Ledger", "LEDGER_VERSION", "OPS", "fold", "current_actor"]

LEDGER_VERSION = 1
OPS = ("record", "supersede", "retract", "revert", "reanchor", "mark")
FAULT_ENV = "ANCHORFS_TEST_FAULT"
"""Test-only fault injection: a comma-separated list of points (see `fault`)."""


def armed(point: str) -> bool:
    """Whether tests asked for a fault at `point` (for faults that must act before `fault`)."""
    spec = os.environ.get(FAULT_ENV)
    return spec is not None and point in spec.split(",")


def fault(point: str) -> None:
    """Crash or fail at a named point when tests ask for it through the environment.

    Points: ledger-append, ledger-partial (half the record written, then ENOSPC), ledger-cut
    (a torn tail cannot be cut: EPERM, as on an append-only file),
    kill-after-ledger, kill-after-store, store-write, applied-write, drift-write,
    manifest-write (the last three write half of their temp file first).
    """
    if not armed(point):
        return
    if point.startswith("kill"):
        os._exit(137)
    if point == "ledger-cut":
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    raise OSError(errno.ENOSPC, f"injected fault at {point}")


def current_actor() -> str:
    actor = os.environ.get("ANCHORFS_ACTOR")
    if actor:
        return actor
    try:
        import getpass

        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return os.environ.get("USER") or "unknown"


_SNAPSHOT_STRS = ("kind", "author", "valid_from", "valid_until", "status", "supersedes", "superseded_by",
                  "reason", "verified_at")
_ANCHOR_STRS = ("sha256", "symbol", "content_hash", "commit")


def _check_snapshot(d: Any) -> None:
    """Raise ValueError unless `d` has the types `Memory.from_dict` and its readers rely on:
    `model.check_snapshot`, the same rules every SDK write passes before it is acknowledged."""
    try:
        check_snapshot(d)
    except SnapshotError as exc:
        raise ValueError(f"bad ledger line: {exc}") from None


@dataclass(frozen=True, slots=True)
class Entry:
    tx: str
    op: str
    at: datetime
    actor: str
    reason: str | None
    memories: tuple[Memory, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": LEDGER_VERSION,
            "tx": self.tx,
            "op": self.op,
            "at": to_iso(self.at),
            "actor": self.actor,
            "reason": self.reason,
            "memories": [m.to_dict() for m in self.memories],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Entry":
        if not isinstance(d, dict) or d.get("v") != LEDGER_VERSION:
            raise ValueError(f"unsupported ledger line version {d.get('v') if isinstance(d, dict) else d!r}")
        at = from_iso(d["at"])
        if at is None or d["op"] not in OPS:
            raise ValueError("bad ledger line")
        if not isinstance(d["memories"], list) or not isinstance(d.get("reason"), (str, type(None))):
            raise ValueError("bad ledger line: memories must be a list, reason a string")
        for m in d["memories"]:
            _check_snapshot(m)
        # `from_iso` refuses a time with no UTC form (year 1 at +01:00), which would crash every later read
        return cls(str(d["tx"]), d["op"], at, str(d.get("actor") or ""), d.get("reason"),
                   tuple([Memory.from_dict(m) for m in d["memories"]]))

    @classmethod
    def new(cls, op: str, memories: list[Memory], *, at: datetime | None = None,
            reason: str | None = None, actor: str | None = None) -> "Entry":
        return cls(new_id(), op, at or utcnow(), actor or current_actor(), reason, tuple(memories))


class Ledger:
    """Append-only JSON lines; writers serialize on `lock` (which also guards the store)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "ledger.jsonl"
        self.lock_path = state_dir / "lock"

    @contextmanager
    def lock(self) -> Iterator[None]:
        """The workspace's writer lock: ledger append + store write + checkpoint, as one."""
        try:
            fd = open_state(self.lock_path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise LedgerError(f"cannot take the write lock {self.lock_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def size(self) -> int:
        """The ledger's size in bytes (`lstat`: a link is refused, never measured through)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.path}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            refuse_link(self.path)
        return st.st_size

    def append(self, entries: list[Entry]) -> int:
        """Append and fsync (caller holds the lock); returns the ledger's new size."""
        if not entries:
            return self.size()
        try:
            payload = b"".join(orjson.dumps(e.to_dict()) + b"\n" for e in entries)
        except TypeError as exc:  # a lone surrogate (undecodable argv bytes, MCP JSON): not UTF-8 text
            if "surrogates" not in str(exc):
                raise
            raise InputError("a memory's text, tags, author or reason is not valid UTF-8; nothing was written") from None
        try:
            fault("ledger-append")
            fd = open_state(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except OSError as exc:
            raise LedgerError(f"cannot append to the ledger {self.path}: {exc.strerror}; nothing was written") from None
        try:
            try:
                self._cut_torn_tail(fd)
            except OSError as exc:  # EPERM on an append-only file: gluing onto the torn line would corrupt a record
                raise LedgerError(f"cannot append to the ledger {self.path}: its last line is torn and cannot be cut "
                                  f"({exc.strerror}; an append-only file?); nothing was written") from None
            start = os.lseek(fd, 0, os.SEEK_END)
            try:
                view = memoryview(payload)
                if armed("ledger-partial"):  # a full disk mid-record: half of it lands, then ENOSPC
                    os.write(fd, view[: len(view) // 2])
                    fault("ledger-partial")
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            except OSError as exc:
                try:
                    os.ftruncate(fd, start)  # never leave half a record behind
                except OSError:  # append-only: what landed stays a torn line, skipped by every read
                    raise LedgerError(f"cannot append to the ledger {self.path}: {exc.strerror}; a partial line "
                                      "was left at its end (skipped when read); nothing was recorded") from None
                raise LedgerError(f"cannot append to the ledger {self.path}: {exc.strerror}; nothing was written") from None
            return start + len(payload)
        finally:
            os.close(fd)

    def complete_size(self) -> int:
        """Bytes up to the end of the last whole line: a checkpoint must never point into a torn
        tail, or the next append (which cuts it off) would leave it pointing mid-record."""
        try:
            fd = open_state(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.path}: {exc.strerror}") from None
        try:
            return self._records_end(fd)
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.path}: {exc.strerror}") from None
        finally:
            os.close(fd)

    @staticmethod
    def _records_end(fd: int) -> int:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
            return end
        pos, chunk = end, 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            block = os.pread(fd, pos - start, start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            pos = start
        return 0

    @classmethod
    def _cut_torn_tail(cls, fd: int) -> None:
        keep = cls._records_end(fd)
        if keep != os.lseek(fd, 0, os.SEEK_END):
            fault("ledger-cut")
            os.ftruncate(fd, keep)

    def _in_flight(self, at: int) -> bool:
        """Whether the unfinished line at byte `at` is another process's append under way (it
        has finished since, or a writer holds the lock), not a torn line to warn about. Readers
        take no lock, so they can see an append half-copied into the file."""
        try:
            with os.fdopen(open_state(self.path, os.O_RDONLY), "rb") as fh:
                fh.seek(at)
                if b"\n" in fh.read():
                    return True
            fd = open_state(self.lock_path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # a writer holds the lock
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def read(self, start: int = 0, *, until: datetime | None = None, end: int | None = None) -> Iterator[Entry]:
        """Entries from byte offset `start` (to `end`); a bad line is skipped with a warning, never a crash."""
        try:
            fh = os.fdopen(open_state(self.path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.path}: {exc.strerror}") from None
        with fh:
            fh.seek(start)
            offset = start
            for raw in fh:
                if end is not None and offset >= end:
                    break
                offset += len(raw)
                if not raw.endswith(b"\n"):
                    if not self._in_flight(offset - len(raw)):
                        warnings.warn(f"{self.path}: skipping a torn last line at byte {offset - len(raw)}", stacklevel=2)
                    break
                try:
                    entry = Entry.from_dict(orjson.loads(raw))
                except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
                    warnings.warn(f"{self.path}: skipping a bad line at byte {offset - len(raw)}: {exc}", stacklevel=2)
                    continue
                if until is not None and entry.at > until:
                    continue  # not `break`: writers stamp `at` before the lock, so times interleave
                yield entry


def fold(entries: Iterator[Entry] | list[Entry]) -> dict[str, Memory]:
    """The latest snapshot of every memory, in first-recorded order."""
    state: dict[str, Memory] = {}
    for entry in entries:
        for memory in entry.memories:
            state[memory.id] = memory
    return state


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("anchorfs needs a POSIX system (fcntl locks)")
