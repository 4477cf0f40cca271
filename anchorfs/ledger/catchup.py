"""Following the ledger as it is now, not as it was when a reader last looked.

The ledger changes in ways a byte offset cannot see (`git checkout`, `reset --hard`, a merge,
a truncation), so what a reader took in is a `Prefix`: its length, a checksum of those bytes
(blake3 chained over 1 MiB blocks), and the ledger's stat then. A prefix is trusted on the
stat alone when it is unchanged and settled (git's racy rule), else its checksum is verified.
Still matching, the reader takes in only the lines after it (`grown`); else it starts over
(`rewritten`). Hashing and parsing read the same bytes through one descriptor.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from typing import Literal

import blake3

from ..drift.hashcache import DEFAULT_GRANULARITY_NS
from ..core.errors import LedgerError
from .log import Entry, Ledger, refold
from ..core.model import Memory
from ..core.statefs import open_state, read_state

__all__ = ["Prefix", "Follow", "Folded", "Kind", "follow", "settled", "extend", "merged", "load", "stamp", "CHECKPOINT_VERSION"]

BLOCK = 1 << 20
"""Chain block: an append re-hashes at most this much of what came before it."""
TAIL = 4096
"""The prefix's last bytes, hashed apart: a truncation or rewrite is refused without a full read."""
CHECKPOINT_VERSION = 2
FINE_NS = 50_000_000
"""The racy window on a filesystem with fine timestamps (see `_granularity`)."""
BATCH = 5000
_ZERO = bytes(32)

Stat = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)."""
_MISSING: Stat = (0, 0, -1, 0, 0)
"""The stat of a ledger that does not exist (yet)."""

Kind = Literal["same", "grown", "rewritten"]


def _sig(st: os.stat_result) -> Stat:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Frozen:
    """A frozen value over `_fields` (equality, hash, repr), without a dataclass's cost at import."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __getstate__(self) -> tuple[object, ...]:  # copy and pickle, past the frozen `__setattr__`
        return self._values()

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(self._fields, state):
            object.__setattr__(self, name, value)


class Prefix(_Frozen):
    """What a reader took in: the ledger's first `offset` bytes. `base` is the chain over the
    whole blocks before `offset`, `digest` the checksum of all, `tail` the hash of the last
    `TAIL`; `stat` the ledger's stat then (None if it moved), `seen_ns` the clock before it."""

    __slots__ = ("offset", "base", "digest", "tail", "stat", "seen_ns")
    _fields = __slots__
    offset: int
    base: bytes
    digest: bytes
    tail: bytes
    stat: Stat | None
    seen_ns: int

    def __init__(self, offset: int, base: bytes, digest: bytes, tail: bytes, stat: Stat | None,
                 seen_ns: int) -> None:
        self.__setstate__((offset, base, digest, tail, stat, seen_ns))

    def to_dict(self) -> dict[str, object]:
        """The JSON form the checkpoint (and the fold snapshot, `anchorfs.ledger.foldsnap`) keeps."""
        return {"v": CHECKPOINT_VERSION, "offset": self.offset, "base": self.base.hex(), "digest": self.digest.hex(),
                "tail": self.tail.hex(), "stat": list(self.stat) if self.stat is not None else None}

    def to_bytes(self) -> bytes:
        import orjson  # at use: a hook that reads no checkpoint never loads it

        return orjson.dumps(self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes | None, seen_ns: int = 0) -> "Prefix | None":
        """The checkpoint's prefix; None for anything else (missing, torn, older, forged)."""
        if not data:
            return None
        import orjson

        try:
            d = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        return cls.from_dict(d, seen_ns)

    @classmethod
    def from_dict(cls, d: object, seen_ns: int = 0) -> "Prefix | None":
        """`to_dict`'s form read back, every field checked; None for anything else."""
        try:
            if not isinstance(d, dict) or d.get("v") != CHECKPOINT_VERSION:
                return None
            offset, st = d["offset"], d["stat"]
            if type(offset) is not int or offset < 0:
                return None
            if st is not None and not (isinstance(st, list) and len(st) == 5 and all(type(x) is int for x in st)):
                return None
            base, digest, tail = (bytes.fromhex(d[k]) for k in ("base", "digest", "tail"))
            if not (len(base) == len(digest) == len(tail) == 32):
                return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        return cls(offset, base, digest, tail, tuple(st) if st is not None else None, seen_ns)  # type: ignore[arg-type]


class _Chain:
    """blake3 over `BLOCK`-sized blocks, each block's hash keyed by the one before it."""

    __slots__ = ("base", "pos", "_h", "_n")

    def __init__(self, base: bytes = _ZERO, pos: int = 0) -> None:
        self.base, self.pos, self._n = base, pos, 0
        self._h = blake3.blake3(base)

    def update(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            take = min(BLOCK - self._n, len(view))
            self._h.update(view[:take])
            self._n += take
            self.pos += take
            view = view[take:]
            if self._n == BLOCK:
                self.base = self._h.digest()
                self._h = blake3.blake3(self.base)
                self._n = 0

    def digest(self) -> bytes:
        h = self._h.copy()
        h.update(self.pos.to_bytes(8, "little"))
        return h.digest()


class Follow(_Frozen):
    """Where the ledger stands against what a reader took in (`same`, `grown`: `entries` after the
    prefix, `rewritten`: every line); `prefix`, the ledger now; `skipped`, the bad lines."""

    __slots__ = ("kind", "prefix", "entries", "skipped")
    _fields = __slots__
    kind: Kind
    prefix: Prefix
    entries: list[Entry]
    skipped: int

    def __init__(self, kind: Kind, prefix: Prefix, entries: list[Entry], skipped: int = 0) -> None:
        self.__setstate__((kind, prefix, entries, skipped))

    __hash__ = None  # type: ignore[assignment]  # as the dataclass's: its entries are a list


def settled(ledger: Ledger, seen: Prefix | None) -> bool:
    """Whether `seen` is still the whole ledger, judged on one `lstat` (the racy rule applied)."""
    if seen is None or seen.stat is None:
        return False
    try:
        st = os.lstat(ledger.file)
    except FileNotFoundError:
        return seen.stat == _MISSING
    except OSError:
        return False
    changed = st.st_mtime_ns if st.st_mtime_ns > st.st_ctime_ns else st.st_ctime_ns
    return _sig(st) == seen.stat and changed + _granularity(st) < seen.seen_ns


def _granularity(st: os.stat_result) -> int:
    """The racy window: `FINE_NS` for times finer than a millisecond, else `DEFAULT_GRANULARITY_NS`."""
    if st.st_mtime_ns % 1_000_000 or st.st_ctime_ns % 1_000_000:
        return FINE_NS
    return DEFAULT_GRANULARITY_NS


def _tail(fd: int, offset: int) -> bytes:
    n = min(TAIL, offset)
    return blake3.blake3(os.pread(fd, n, offset - n) if n else b"").digest()


def _parse(raw: bytes, at: int, path: str | os.PathLike[str], out: list[Entry]) -> int:
    """One line, as `Ledger.read` takes it: a bad line is skipped with its warning (returns 1)."""
    import orjson

    try:
        doc = orjson.loads(raw)
        out.append(Entry.from_dict(doc))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # orjson's JSONDecodeError is a ValueError
        warnings.warn(f"{path}: skipping a bad line at byte {at}: {exc}", stacklevel=4)
        return 1
    return 0


def _scan(fd: int, chain: _Chain, end: int, path: str | os.PathLike[str], entries: list[Entry] | None) -> int:
    """Hash from `chain.pos` to `end` (parsing the lines into `entries`); returns the bad lines skipped."""
    pos, carry, line_at, skipped = chain.pos, b"", chain.pos, 0
    while pos < end:
        block = os.pread(fd, min(BLOCK, end - pos), pos)
        if not block:
            raise _Moved
        chain.update(block)
        pos += len(block)
        if entries is not None:
            data = carry + block if carry else block
            cut = 0
            while (nl := data.find(b"\n", cut)) >= 0:
                skipped += _parse(data[cut:nl + 1], line_at, path, entries)
                line_at += nl + 1 - cut
                cut = nl + 1
            carry = data[cut:]
    return skipped


class _Moved(Exception):
    """The ledger shrank while it was read."""


def _empty(started: int) -> Prefix:
    chain = _Chain()
    return Prefix(0, chain.base, chain.digest(), blake3.blake3(b"").digest(), _MISSING, started)


def _prefix(fd: int, ledger: Ledger, chain: _Chain, end: int, before: os.stat_result, started: int) -> Prefix:
    """The prefix read, vouched for by the stat only if nothing moved meanwhile."""
    after = os.fstat(fd)
    vouch: Stat | None = _sig(after)
    try:
        if (vouch != _sig(before) or Ledger._records_end(fd) != end
                or _sig(os.lstat(ledger.file)) != vouch):  # renamed over meanwhile: not the file read
            vouch = None
    except OSError:
        vouch = None
    return Prefix(end, chain.base, chain.digest(), _tail(fd, end), vouch, started)


def follow(ledger: Ledger, seen: Prefix | None) -> Follow:
    """Compare `seen` with the ledger now (its tail's hash, then its checksum), reading what is new."""
    try:
        for _ in range(3):
            try:
                return _follow(ledger, seen)
            except _Moved:
                continue
        return _follow(ledger, None)
    except OSError as exc:  # a folder where the ledger belongs, an I/O error: one line, as `Ledger.read`
        raise LedgerError(f"cannot read the ledger {ledger.file}: {exc.strerror}") from None


def _follow(ledger: Ledger, seen: Prefix | None) -> Follow:
    started = time.time_ns()
    try:
        fd = open_state(ledger.file, os.O_RDONLY)
    except FileNotFoundError:
        return Follow("same" if seen is not None and seen.offset == 0 else "rewritten", _empty(started), [])
    try:
        before = os.fstat(fd)
        end = Ledger._records_end(fd)
        kind: Kind = "rewritten"
        chain = _Chain()
        if seen is not None and seen.offset <= end and _tail(fd, seen.offset) == seen.tail:
            _scan(fd, chain, seen.offset, ledger.file, None)
            if chain.digest() == seen.digest:
                kind = "same" if end == seen.offset else "grown"
            else:
                chain = _Chain()
        entries: list[Entry] = []
        skipped = 0
        if kind != "same":
            skipped = _scan(fd, chain, end, ledger.file, entries)
        if kind == "rewritten" and before.st_size > end and not ledger._in_flight(end):
            warnings.warn(f"{ledger.file}: skipping a torn last line at byte {end}", stacklevel=3)
        return Follow(kind, _prefix(fd, ledger, chain, end, before, started), entries, skipped)
    finally:
        os.close(fd)


def extend(ledger: Ledger, seen: Prefix | None, end: int) -> Prefix:
    """The prefix to `end` after the caller's own append, re-read from `seen`'s last block if it holds."""
    started = time.time_ns()
    try:
        fd = open_state(ledger.file, os.O_RDONLY)
    except OSError as exc:
        raise LedgerError(f"cannot read the ledger {ledger.file}: {exc.strerror}") from None
    try:
        before = os.fstat(fd)
        chain: _Chain | None = None
        if seen is not None and seen.offset <= end:
            chain = _Chain(seen.base, seen.offset - seen.offset % BLOCK)
            _scan(fd, chain, seen.offset, ledger.file, None)
            if chain.digest() != seen.digest:
                chain = None
        if chain is None:
            chain = _Chain()
        _scan(fd, chain, end, ledger.file, None)
        return _prefix(fd, ledger, chain, end, before, started)
    except (_Moved, OSError):  # cut back meanwhile, or unreadable: a prefix nobody vouches for, verified next time
        return Prefix(end, _ZERO, _ZERO, _ZERO, None, started)
    finally:
        os.close(fd)


def merged(state: Mapping[str, Memory], entries: list[Entry]) -> dict[str, Memory]:
    """`state` with `entries` (lines appended after it) taken in (`ledger.refold`)."""
    return refold(dict(state) if not isinstance(state, dict) else state, entries)


class Folded(_Frozen):
    """A fold (`state`), its prefix, and its line count when last saved as the snapshot (`saved`)."""

    __slots__ = ("prefix", "state", "saved")
    _fields = __slots__
    prefix: Prefix
    state: dict[str, Memory]
    saved: int | None

    def __init__(self, prefix: Prefix, state: dict[str, Memory], saved: int | None = None) -> None:
        self.__setstate__((prefix, state, saved))

    __hash__ = None  # type: ignore[assignment]  # as the dataclass's: its state is a dict


def load(path: str | os.PathLike[str]) -> Prefix | None:
    """The checkpoint at `path`, `seen_ns` its mtime; None when missing or unreadable (or a link)."""
    try:
        data = read_state(path)
        if data is None:
            return None
        return Prefix.from_bytes(data, os.lstat(path).st_mtime_ns)
    except OSError:
        return None


def stamp(path: str | os.PathLike[str], prefix: Prefix) -> None:
    """Give the checkpoint file the time its prefix was verified, which the racy rule measures from."""
    os.utime(path, ns=(prefix.seen_ns, prefix.seen_ns), follow_symlinks=False)
