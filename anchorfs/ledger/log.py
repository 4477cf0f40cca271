"""The ledger: `.anchorfs/ledger.jsonl`, the append-only record every write lands in first.

Each line is one mutation with full snapshots of the memories it touched, fsynced before the
store is touched. A torn last line is skipped with a warning when read and cut off before the
next append (where it cannot be cut, every append is refused).

The fold does not depend on line order (a git merge interleaves clones' lines): an entry
carries `seq`, a Lamport counter, and `deps`, per memory the entries it replaced. A memory's
snapshot is its newest *head*'s (an entry no other names in its deps), by (seq, at, tx). Two
heads of one memory are a fork (`FoldState.forks`), never resolved by a guess. Lines without
these fields (earlier ledgers) fold in line order, before every new one.
"""

from __future__ import annotations

import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import AnchorfsError, InputError, LedgerError
from ..core.model import Memory, SnapshotError, Value, check_snapshot, from_iso, new_id, to_iso, utcnow
from ..core.statefs import armed, fault, open_state, refuse_link

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = ["REDACTED", "redacted_as", "redact_lines", "Entry", "Ledger", "LEDGER_VERSION", "OPS", "fold", "refold", "current_actor", "FoldState",
           "Fork", "Side", "Head", "rank", "stamped"]


LEDGER_VERSION = 1
OPS = ("record", "supersede", "retract", "revert", "reanchor", "mark", "accept", "reject", "tidy", "redact")


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
    """Raise ValueError unless `d` passes `model.check_snapshot` (as every SDK write does)."""
    try:
        check_snapshot(d)
    except SnapshotError as exc:
        raise ValueError(f"bad ledger line: {exc}") from None


def _check_deps(d: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(d, dict) or not all(isinstance(k, str) and isinstance(v, list)
                                          and all(isinstance(t, str) for t in v) for k, v in d.items()):
        raise ValueError("bad ledger line: deps must map memory ids to lists of entry ids")
    return tuple((k, tuple(v)) for k, v in d.items())


class Entry(Value):
    """One ledger line; `allow_secret` says why a shared workspace took text its secret check flagged;
    `conflicts`, the active memories its first memory was found to contradict when written (`anchorfs.sdk.tidy`)."""

    __slots__ = ("tx", "op", "at", "actor", "reason", "memories", "seq", "deps", "allow_secret", "conflicts")
    tx: str
    op: str
    at: datetime
    actor: str
    reason: str | None
    memories: tuple[Memory, ...]
    seq: int | None
    deps: tuple[tuple[str, tuple[str, ...]], ...] | None
    allow_secret: str | None
    conflicts: tuple[str, ...]

    def __init__(self, tx: str, op: str, at: datetime, actor: str, reason: str | None, memories: tuple[Memory, ...],
                 seq: int | None = None, deps: tuple[tuple[str, tuple[str, ...]], ...] | None = None,
                 allow_secret: str | None = None, conflicts: tuple[str, ...] = ()) -> None:
        cls = self.__class__
        object.__setattr__(self, "__class__", cls._Open)  # see `Value._Open`
        self.tx = tx
        self.op = op
        self.at = at
        self.actor = actor
        self.reason = reason
        self.memories = memories
        self.seq = seq
        self.deps = deps
        self.allow_secret = allow_secret
        self.conflicts = conflicts
        self.__class__ = cls

    def deps_of(self, memory_id: str) -> tuple[str, ...]:
        """The entries whose snapshots of `memory_id` this one replaced."""
        for mid, txs in self.deps or ():
            if mid == memory_id:
                return txs
        return ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"v": LEDGER_VERSION, "tx": self.tx, "op": self.op, "at": to_iso(self.at),
                             "actor": self.actor, "reason": self.reason,
                             "memories": [m.to_dict() for m in self.memories]}
        if self.seq is not None:
            d["seq"] = self.seq
            d["deps"] = {mid: list(txs) for mid, txs in self.deps or ()}
        if self.allow_secret is not None:
            d["allow_secret"] = self.allow_secret
        if self.conflicts:
            d["conflicts"] = list(self.conflicts)
        return d

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
        seq, deps = d.get("seq"), None
        if seq is not None:
            if type(seq) is not int or seq < 1:
                raise ValueError("bad ledger line: seq must be a positive integer")
            deps = _check_deps(d.get("deps", {}))
        secret, conflicts = d.get("allow_secret"), d.get("conflicts") or []
        if not isinstance(secret, (str, type(None))):
            raise ValueError("bad ledger line: allow_secret must be a string")
        if type(conflicts) is not list or any(type(c) is not str for c in conflicts):
            raise ValueError("bad ledger line: conflicts must be a list of memory ids")
        # `from_iso` refuses a time with no UTC form (year 1 at +01:00), which would crash every later read
        return cls(str(d["tx"]), d["op"], at, str(d.get("actor") or ""), d.get("reason"),
                   tuple([Memory.from_dict(m) for m in d["memories"]]), seq, deps, secret, tuple(conflicts))

    @classmethod
    def new(cls, op: str, memories: list[Memory], *, at: datetime | None = None,
            reason: str | None = None, actor: str | None = None) -> "Entry":
        return cls(new_id(), op, at or utcnow(), actor or current_actor(), reason, tuple(memories))


class _WriteLock:
    """`Ledger.lock()`: an exclusive `flock` on the state folder's lock file while held."""

    __slots__ = ("_path", "_fd")

    def __init__(self, path: str) -> None:
        self._path, self._fd = path, -1

    def __enter__(self) -> None:
        import fcntl

        try:
            fd = open_state(self._path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise LedgerError(f"cannot take the write lock {self._path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fd, self._fd = self._fd, -1
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class Ledger:
    """Append-only JSON lines; writers serialize on `lock` (which also guards the store)."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = os.fspath(state_dir)
        self.file = os.path.join(self.dir, "ledger.jsonl")
        self.lock_file = os.path.join(self.dir, "lock")

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.file)

    def lock(self) -> _WriteLock:
        """The workspace's writer lock: ledger append + store write + checkpoint, as one."""
        return _WriteLock(self.lock_file)

    def size(self) -> int:
        """The ledger's size in bytes (`lstat`: a link is refused, never measured through)."""
        try:
            st = os.lstat(self.file)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.file}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            refuse_link(self.file)
        return st.st_size

    def rewrite(self, transform: "Callable[[list[bytes]], list[bytes]]") -> None:
        """The one change to lines already written (`redact`): the whole lines through `transform`,
        then the file replaced atomically and durably (caller holds the lock)."""
        from ..core.statefs import fsync_dir, read_state, replace_state

        data = read_state(self.file, limit=1 << 40) or b""
        lines = transform(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"))
        try:
            mode = stat.S_IMODE(os.lstat(self.file).st_mode)
            replace_state(self.file, b"".join(line + b"\n" for line in lines), fsync=True, mode=mode)
            fsync_dir(self.dir)
        except OSError as exc:
            raise LedgerError(f"cannot rewrite the ledger {self.file}: {exc.strerror}") from None

    def append(self, entries: list[Entry]) -> int:
        """Append and fsync (caller holds the lock); returns the ledger's new size."""
        if not entries:
            return self.size()
        try:
            import orjson  # at use: a hook reading the fold snapshot never imports it

            payload = b"".join(orjson.dumps(e.to_dict()) + b"\n" for e in entries)
        except TypeError as exc:  # a lone surrogate (undecodable argv bytes, MCP JSON): not UTF-8 text
            if "surrogates" not in str(exc):
                raise
            raise InputError("a memory's text, tags, author or reason is not valid UTF-8; nothing was written") from None
        try:
            fault("ledger-append")
            fd = open_state(self.file, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except OSError as exc:
            raise LedgerError(f"cannot append to the ledger {self.file}: {exc.strerror}; nothing was written") from None
        try:
            try:
                self._cut_torn_tail(fd)
            except OSError as exc:  # EPERM on an append-only file: gluing onto the torn line would corrupt a record
                raise LedgerError(f"cannot append to the ledger {self.file}: its last line is torn and cannot be cut "
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
                    raise LedgerError(f"cannot append to the ledger {self.file}: {exc.strerror}; a partial line "
                                      "was left at its end (skipped when read); nothing was recorded") from None
                raise LedgerError(f"cannot append to the ledger {self.file}: {exc.strerror}; nothing was written") from None
            return start + len(payload)
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
        """Whether the unfinished line at byte `at` is another process's append under way, not torn."""
        try:
            with os.fdopen(open_state(self.file, os.O_RDONLY), "rb") as fh:
                fh.seek(at)
                if b"\n" in fh.read():
                    return True
            fd = open_state(self.lock_file, os.O_RDONLY)
        except OSError:
            return False
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # a writer holds the lock
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def mentions(self, rels: Sequence[str]) -> list[str]:
        """The paths of `rels` whose JSON string appears in the ledger (a path left out was never
        anchored); anything unusual (an odd name, an unreadable ledger) keeps the path."""
        import mmap

        import orjson

        odd = [r for r in rels if any(c in r for c in '"\\') or not r.isprintable()]
        try:
            fd = open_state(self.file, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return odd
        except (OSError, AnchorfsError):
            return list(rels)
        try:
            if os.fstat(fd).st_size == 0:
                return odd
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
                return [r for r in rels if r in odd or data.find(orjson.dumps(r)) >= 0]
        except (OSError, ValueError):
            return list(rels)
        finally:
            os.close(fd)

    def fold_on(self, paths: Sequence[str]) -> dict[str, Memory]:
        """The memories whose history names any of `paths` (or a folder above one), as the fold has them."""
        import orjson

        needles = [n for p in paths for n in (orjson.dumps(p), orjson.dumps(p)[:-1] + b"/")]
        data = self._head()
        ids = {m.id for e in _entries_naming(data, needles) for m in e.memories}
        if not ids:
            return {}
        state = fold(_entries_naming(data, [i.encode() for i in sorted(ids)]))
        return {mid: m for mid, m in state.items() if mid in ids}

    def touching(self, ids: Iterable[str], end: int) -> list[Entry]:
        """The entries in the first `end` bytes whose line names any of `ids`, in line order."""
        if end <= 0:
            return []
        data = self._head(end)
        return _entries_naming(data, [i.encode() for i in ids]) if data else []

    def _head(self, end: int | None = None) -> bytes:
        """The ledger's first `end` bytes (all of it when None); b"" when there is none."""
        try:
            fd = open_state(self.file, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.file}: {exc.strerror}") from None
        try:
            return os.pread(fd, os.fstat(fd).st_size if end is None else end, 0)
        finally:
            os.close(fd)

    def read(self, start: int = 0, *, until: datetime | None = None, end: int | None = None) -> Iterator[Entry]:
        """Entries from byte offset `start` (to `end`); a bad line is skipped with a warning, never a crash."""
        try:
            fh = os.fdopen(open_state(self.file, os.O_RDONLY), "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LedgerError(f"cannot read the ledger {self.file}: {exc.strerror}") from None
        import orjson

        with fh:
            fh.seek(start)
            offset = start
            for raw in fh:
                if end is not None and offset >= end:
                    break
                offset += len(raw)
                if not raw.endswith(b"\n"):
                    if not self._in_flight(offset - len(raw)):
                        warnings.warn(f"{self.file}: skipping a torn last line at byte {offset - len(raw)}", stacklevel=2)
                    break
                try:
                    entry = Entry.from_dict(orjson.loads(raw))
                except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSONDecodeError included
                    warnings.warn(f"{self.file}: skipping a bad line at byte {offset - len(raw)}: {exc}", stacklevel=2)
                    continue
                if until is not None and entry.at > until:
                    continue  # not `break`: writers stamp `at` before the lock, so times interleave
                yield entry


Rank = tuple[Any, ...]


def rank(entry: Entry, line: int = 0) -> Rank:
    """Where an entry stands in the fold: by `seq`, time and id; without `seq`, first, by its `line`."""
    if entry.seq is None:
        return (0, line)
    return (entry.seq, entry.at, entry.tx)


class Head(NamedTuple):
    """A snapshot of one memory that no later entry replaced (a fork has several)."""

    rank: Rank
    tx: str
    op: str
    actor: str
    at: datetime
    memory: Memory


class FoldState(dict[str, Memory]):
    """The fold: memory id -> its snapshot, plus every memory's heads, the ids replaced, the top `seq`."""

    def __init__(self) -> None:
        super().__init__()
        self.top = 0
        self.lines = 0
        self.heads: dict[str, dict[str, Head]] = {}
        self.named: dict[str, set[str]] = {}
        self.conflicting: dict[str, frozenset[str]] = {}
        self.redacted: dict[str, bool] = {}
        """Memory id -> whether its redaction kept its anchors: every snapshot of it is read redacted."""
        """Memory id -> the memories it was found to contradict when written (the entries' `conflicts`)."""
        self._forks: list[Fork] | None = None
        self._owned: set[str] | None = None  # after `copy`: the ids whose heads are this copy's own

    def copy(self) -> "FoldState":  # type: ignore[override]
        """A copy that shares each memory's heads with this one until it changes them."""
        out = FoldState()
        out.update(self)
        out.top, out.lines = self.top, self.lines
        out.heads, out.named, out.conflicting = dict(self.heads), dict(self.named), dict(self.conflicting)
        out.redacted = dict(self.redacted)
        out._owned = set()
        return out

    def apply(self, entry: Entry) -> None:
        """Take in one entry (a line seen twice, as a union merge can leave it, counts once)."""
        self.lines += 1
        tx, heads_all, named_all = entry.tx, self.heads, self.named
        if entry.memories:
            first = entry.memories[0].id
            if tx in heads_all.get(first, ()) or tx in named_all.get(first, ()):
                return
        self._forks = None
        if entry.conflicts:
            first = entry.memories[0].id
            self.conflicting[first] = self.conflicting.get(first, frozenset()) | frozenset(entry.conflicts)
        if entry.op == "redact" or (self.redacted and any(m.id in self.redacted for m in entry.memories)):
            entry = self._redacting(entry)
        seq = entry.seq
        r = rank(entry, self.lines)
        if seq is not None and seq > self.top:
            self.top = seq
        owned = self._owned
        for m in entry.memories:
            mid = m.id
            heads = heads_all.get(mid)
            if heads is None:  # the common case: a memory seen first
                if seq is None or not entry.deps_of(mid):
                    heads_all[mid] = {tx: Head(r, tx, entry.op, entry.actor, entry.at, m)}
                    self[mid] = m
                    continue
                heads = heads_all[mid] = {}
            elif owned is not None and mid not in owned:
                owned.add(mid)
                heads = heads_all[mid] = dict(heads)
                if mid in named_all:
                    named_all[mid] = set(named_all[mid])
            named = named_all.get(mid)
            if named is None:
                named = named_all[mid] = set()
            if seq is None:  # an earlier version's line: it replaced whatever stood
                named.update(heads)
                heads.clear()
            else:
                for dep in entry.deps_of(mid):
                    named.add(dep)
                    heads.pop(dep, None)
            if tx not in named:
                heads[tx] = Head(r, tx, entry.op, entry.actor, entry.at, m)
            if len(heads) == 1:
                self[mid] = next(iter(heads.values())).memory
            elif heads:
                self[mid] = max(heads.values(), key=lambda h: h.rank).memory
            elif mid not in self:
                self[mid] = m

    def _redacting(self, entry: Entry) -> Entry:
        """`entry` with every snapshot of a redacted memory read as its redaction says, whichever
        line came first (a merged branch may still hold the text); a `redact` entry also rewrites
        the snapshots already taken in."""
        if entry.op == "redact":
            for m in entry.memories:
                keep = self.redacted[m.id] = bool(m.anchors)
                heads = self.heads.get(m.id, {})
                for tx, h in list(heads.items()):
                    heads[tx] = h._replace(memory=redacted_as(h.memory, keep))
                if m.id in self:
                    self[m.id] = redacted_as(self[m.id], keep)
            return entry
        return entry.replace(memories=tuple(redacted_as(m, self.redacted[m.id]) if m.id in self.redacted else m
                                            for m in entry.memories))

    def heads_of(self, memory_id: str) -> tuple[str, ...]:
        """The entries a write replacing `memory_id` depends on: every head (so it merges a fork)."""
        return tuple(sorted(self.heads.get(memory_id, {})))

    def _tip(self, memory_id: str) -> Memory | None:
        seen: set[str] = set()
        m = self.get(memory_id)
        while m is not None and m.status == "superseded" and m.superseded_by and m.id not in seen:
            seen.add(m.id)
            nxt = self.get(m.superseded_by)
            if nxt is None:
                break
            m = nxt
        return m

    def forks(self) -> list[Fork]:
        """Every memory with two or more heads whose sides (what each head left) still stand, by id."""
        if self._forks is not None:
            return self._forks
        out: list[Fork] = []
        for mid in sorted(self.heads):
            heads = self.heads[mid]
            if len(heads) < 2 or mid not in self:
                continue
            sides: dict[str, Side] = {}
            for h in sorted(heads.values(), key=lambda h: h.rank):
                snap = h.memory
                if snap.status == "superseded" and snap.superseded_by:
                    tip = self._tip(snap.superseded_by)
                    if tip is None or tip.status != "active":
                        continue
                    sides.setdefault(tip.id, Side(tip.id, tip, h.op, h.actor, h.at))
                else:
                    sides.setdefault(f"{mid}:{snap.status}", Side(mid, snap, h.op, h.actor, h.at))
            if len(sides) >= 2:
                out.append(Fork(self[mid], tuple(sides.values())))
        self._forks = out
        return out

    def open_conflicts(self) -> list[tuple[str, str]]:
        """(earlier, later) for every contradiction found at a write whose two memories both still stand."""
        return sorted({tuple(sorted((a, b))) for b, others in self.conflicting.items() for a in others  # type: ignore[misc]
                       if a in self and b in self and self[a].status == "active" and self[b].status == "active"})

    def in_conflict(self) -> dict[str, list[str]]:
        """Memory id -> the ids standing against it in a fork (query and context flag them)."""
        out: dict[str, list[str]] = {}
        for f in self.forks():
            ids = list(dict.fromkeys(s.id for s in f.sides))
            for i in ids:
                out.setdefault(i, []).extend(o for o in ids if o != i and o not in out[i])
        return out


REDACTED = "[redacted]"
"""A redacted memory's text in every ledger line, the store and every surface."""


def redacted_as(m: Memory, keep_anchors: bool) -> Memory:
    """A snapshot of a redacted memory: its text gone, its anchors too unless the redaction kept them."""
    return m.replace(content=REDACTED, anchors=m.anchors if keep_anchors else ())


def redact_lines(lines: Sequence[bytes]) -> list[bytes]:
    """The ledger's lines with every snapshot of a memory some `redact` line names rewritten as it
    says (the rest byte for byte); a line that does not parse but names such a memory is dropped
    (it is no record, and may hold the text). Used by `redact` and by the merge driver."""
    import orjson

    parsed: list[Any] = []
    redactions: dict[str, bool] = {}
    for raw in lines:
        try:
            entry = Entry.from_dict(orjson.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError):
            entry = None
        parsed.append(entry)
        if entry is not None and entry.op == "redact":
            redactions.update((m.id, bool(m.anchors)) for m in entry.memories)
    if not redactions:
        return list(lines)
    keys = [i.encode() for i in redactions]
    out = []
    for raw, entry in zip(lines, parsed):
        if entry is None:
            if not any(k in raw for k in keys):
                out.append(raw)
        elif entry.op == "redact" or not any(m.id in redactions for m in entry.memories):
            out.append(raw)
        else:
            memories = tuple(redacted_as(m, redactions[m.id]) if m.id in redactions else m for m in entry.memories)
            out.append(orjson.dumps(entry.replace(memories=memories).to_dict()))
    return out


def stamped(entry: Entry, state: dict[str, Memory]) -> Entry:
    """`entry` as its writer appends it: the next `seq`, each memory's deps every head it replaces."""
    if not isinstance(state, FoldState):
        state = fold([])
    deps = tuple((m.id, state.heads_of(m.id)) for m in entry.memories)
    return entry.replace(seq=state.top + 1, deps=deps)  # type: ignore[no-any-return]


def _entries_naming(data: bytes, keys: Sequence[bytes]) -> list[Entry]:
    """The whole, good lines of `data` holding any of `keys`, parsed, in line order."""
    import orjson

    starts: set[int] = set()
    for key in keys:
        at = data.find(key)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(key, at + len(key))
    out: list[Entry] = []
    for start in sorted(starts):
        stop = data.find(b"\n", start)
        if stop < 0:
            continue  # a torn tail: never a record
        try:
            out.append(Entry.from_dict(orjson.loads(data[start:stop])))
        except (ValueError, KeyError, TypeError, AttributeError):  # orjson's JSONDecodeError is a ValueError
            continue
    return out


def fold(entries: Iterable[Entry]) -> FoldState:
    """The snapshot of every memory, whatever the order of the lines (see the module's doc)."""
    items = list(entries)
    order = sorted(range(len(items)), key=lambda i: rank(items[i], i))
    state = FoldState()
    for i in order:
        state.apply(items[i])
    return state


def refold(state: dict[str, Memory], entries: Iterable[Entry]) -> dict[str, Memory]:
    """`state` with `entries` (lines appended after it) taken in; `state` itself is unchanged."""
    if not isinstance(state, FoldState):  # a plain mapping: the snapshots laid over it, in line order
        out = dict(state)
        for entry in entries:
            for memory in entry.memories:
                out[memory.id] = memory
        return out
    nxt = state.copy()
    for entry in entries:
        nxt.apply(entry)
    return nxt


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("anchorfs needs a POSIX system (fcntl locks)")


class Side(Value):
    """One side of a fork: the memory it left standing (a successor, or the memory itself
    retracted or kept), and who wrote it."""

    __slots__ = ("id", "memory", "op", "actor", "at")
    id: str
    memory: Memory
    op: str
    actor: str
    at: datetime

    def __init__(self, id: str, memory: Memory, op: str, actor: str, at: datetime) -> None:  # noqa: A002
        cls = self.__class__
        object.__setattr__(self, "__class__", cls._Open)  # see `Value._Open`
        self.id = id
        self.memory = memory
        self.op = op
        self.actor = actor
        self.at = at
        self.__class__ = cls

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.memory.content, "author": self.memory.author,
                "status": self.memory.status, "op": self.op, "actor": self.actor, "at": to_iso(self.at)}


class Fork(Value):
    """One memory that two entries changed without seeing each other (two successors, or a
    supersede racing a retract), each side still standing: listed, never resolved by a guess."""

    __slots__ = ("memory", "sides")
    memory: Memory
    sides: tuple[Side, ...]

    def __init__(self, memory: Memory, sides: tuple[Side, ...]) -> None:
        cls = self.__class__
        object.__setattr__(self, "__class__", cls._Open)  # see `Value._Open`
        self.memory = memory
        self.sides = sides
        self.__class__ = cls

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.memory.id, "content": self.memory.content, "sides": [s.to_dict() for s in self.sides]}
