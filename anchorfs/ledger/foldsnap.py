"""The fold snapshot: `.anchorfs/fold.snap`, the folded ledger kept between processes.

Every process used to fold the whole ledger (`ledger.fold`: parse each line, check each
snapshot, order the entries), which is most of a one-shot `record`, of the agent hooks and of
the post-commit hook on a large ledger. The snapshot keeps what the fold gave (each memory's
snapshot, and what `FoldState` needs to stay order-free: the heads of every memory, the ids
named as replaced, the highest `seq`, the line count) with the ledger prefix it was folded
from (`catchup.Prefix`: offset, chained blake3, the ledger's stat).

It is derived and never trusted blindly:
- the prefix must still hold, by the rule `catchup` uses for the store's checkpoint: the
  ledger's stat unchanged and settled (racy-git: its last change older than the snapshot's
  own mtime by more than the granularity), else the prefix's checksum against the bytes now;
- a grown ledger is the snapshot plus the lines after it (`ledger.refold`); anything else (a
  ledger rewritten, truncated, or checked out to other bytes, even of the same size; a
  snapshot that is torn, garbage, a link, of another version or another state folder, or
  whose body does not match its own checksum) is ignored: the fold is rebuilt from the
  ledger and written anew;
- it is data only (JSON lines: a header, then the body: the fold's counts, then one record
  per memory, all under the header's checksum): nothing in it is ever executed. It names the
  anchorfs version that wrote it and the state folder it was written in (device and inode),
  so an upgrade starts cold and a copy committed to a clone, or carried over with `cp -r`, is
  never read. Every memory in it passed the ledger reader's own rules (`model.check_snapshot`)
  when it was folded from the ledger, so it is not checked again on load (a third of a
  10,000-memory session start); a shape it could not have written still raises and makes it
  a cold cache. It is never larger than twice the ledger and 1 MiB.

Written through `statefs.replace_state` (exclusive temp beside it, its mtime set, fsync, the
atomic `os.replace`), lock-free: each file is whole and self-consistent, and the last one wins. A
read-only workspace never writes it; nor is a fold kept whose read skipped a bad line or found
a torn tail (those are said on every read, so no later process may skip reading them).
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import blake3

from . import catchup
from .catchup import Folded, Prefix
from ..core.errors import AnchorfsError
from .log import OPS, FoldState, Head, Ledger, fold, refold
from ..core.model import Memory, SnapshotError, from_iso, to_iso
from ..core.statefs import open_state, replace_state

from ..core import __version__

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["SNAP_FILE", "FORMAT", "VERSION", "MIN_LINES", "Snapshot", "current", "decode", "encode", "load", "save",
           "snap_file", "snap_path"]

SNAP_FILE = "fold.snap"
FORMAT = "anchorfs-fold"
VERSION = 9
"""9: the counts and the records only, keyed by the anchorfs version too. A file of another
version is simply not used."""
MIN_LINES = 64
"""A ledger this short folds in about a millisecond: no snapshot is written for it."""
REWRITE_DIVISOR = 32
"""A grown fold is saved again once the lines since the snapshot pass 1/32 of its memories
(at least `MIN_LINES`): a reader parses at most that tail, a writer rewrites rarely."""
_HEAD_LIMIT = 1 << 16
_Folder = tuple[int, int]


def snap_file(ledger: Ledger) -> str:
    """The fold snapshot's path, beside the ledger (a str: see `Ledger.file`)."""
    return os.path.join(ledger.dir, SNAP_FILE)


def snap_path(ledger: Ledger) -> Path:
    from pathlib import Path

    return Path(snap_file(ledger))


class Snapshot:
    """A snapshot read from disk: its fold, and the file's identity (to re-stamp that file).
    A plain class: a dataclass costs a millisecond of every hook's import."""

    __slots__ = ("folded", "ident")

    def __init__(self, folded: Folded, ident: tuple[int, int, int, int]) -> None:
        self.folded = folded
        self.ident = ident


def _folder(ledger: Ledger) -> _Folder | None:
    try:
        st = os.lstat(ledger.dir)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat_mod.S_ISDIR(st.st_mode) else None


# -- the format ------------------------------------------------------------------------------

def _records(state: FoldState) -> Iterator[list[Any]]:
    """One [id, heads, named, lone] per memory, in the fold's dict order."""
    heads_all, named_all = state.heads, state.named
    for mid, memory in state.items():
        heads = heads_all.get(mid)
        named = named_all.get(mid)
        out_heads = None
        if heads is not None:
            out_heads = [[h.rank[0] if len(h.rank) == 3 else None, h.rank[1] if len(h.rank) == 2 else None,
                          h.tx, h.op, h.actor, to_iso(h.at), h.memory.to_dict()] for h in heads.values()]
        yield [mid, out_heads, sorted(named) if named is not None else None,
               memory.to_dict() if not heads else None]


def encode(folded: Folded, folder: _Folder) -> bytes:
    """The file's bytes: a header line (format, versions, prefix, folder, the body's size and
    checksum), then the body: a line with the fold's counts, then one line per memory record."""
    state = folded.state
    if not isinstance(state, FoldState):
        raise TypeError("only a FoldState is snapshotted")
    import orjson

    head = orjson.dumps({"top": state.top, "lines": state.lines})
    body = b"".join([head, b"\n", *(orjson.dumps(rec) + b"\n" for rec in _records(state))])
    header = orjson.dumps({"format": FORMAT, "v": VERSION, "anchorfs": __version__,
                           "prefix": folded.prefix.to_dict(), "folder": list(folder),
                           "size": len(body), "body": blake3.blake3(body).hexdigest()})
    return header + b"\n" + body


def _memory(d: Any, mid: str) -> Memory:
    if d["id"] != mid:
        raise ValueError("a snapshot under another id")
    return Memory.from_dict(d)


def _str(x: Any) -> str:
    if type(x) is not str:
        raise ValueError("not a string")
    return x


def _int(x: Any) -> int:
    if type(x) is not int or x < 0:
        raise ValueError("not a count")
    return x


def _record(rec: Any) -> tuple[str, dict[str, Head], set[str] | None, Memory]:
    """One memory record read back (id, heads, named ids, the memory the fold gives), checked as
    the ledger reader checks a line; any surprise raises."""
    if type(rec) is not list or len(rec) != 4:
        raise ValueError("a bad memory record")
    mid, heads_in, named_in, lone = _str(rec[0]), rec[1], rec[2], rec[3]
    if not mid:
        raise ValueError("a memory without an id")
    if heads_in is None:
        raise ValueError("a memory without heads")  # every memory folded has a heads entry
    if type(heads_in) is not list:
        raise ValueError("bad heads")
    from_dict = Memory.from_dict
    heads: dict[str, Head] = {}
    for h in heads_in:
        if type(h) is not list or len(h) != 7:
            raise ValueError("a bad head")
        seq, line, tx, op, actor, at_s, snap = h
        if type(tx) is not str or type(actor) is not str or type(at_s) is not str or op not in OPS \
                or tx in heads:
            raise ValueError("a bad head")
        at = from_iso(at_s)
        if at is None:
            raise ValueError("a head without a time")
        if seq is not None:
            if type(seq) is not int or seq < 1 or line is not None:
                raise ValueError("a bad rank")
            rank: tuple[Any, ...] = (seq, at, tx)
        else:
            rank = (0, _int(line))
        if snap["id"] != mid:
            raise ValueError("a snapshot under another id")
        heads[tx] = Head(rank, tx, op, actor, at, from_dict(snap))
    named: set[str] | None = None
    if named_in is not None:
        if type(named_in) is not list:
            raise ValueError("bad names")
        named = {_str(t) for t in named_in}
    if heads and lone is not None:
        raise ValueError("a lone snapshot beside heads")
    if len(heads) == 1:
        memory = next(iter(heads.values())).memory
    elif heads:
        memory = max(heads.values(), key=lambda x: x.rank).memory
    else:
        memory = _memory(lone, mid)
    return mid, heads, named, memory


def _state(body: bytes) -> FoldState:
    """The body read back into a `FoldState`, checked as the ledger reader checks a line; any
    surprise raises (the caller treats it as no snapshot)."""
    import orjson

    lines = body.split(b"\n")
    if len(lines) < 2 or lines[-1] != b"":
        raise ValueError("a torn record")
    head = orjson.loads(lines[0])
    if not isinstance(head, dict):
        raise ValueError("not a fold")
    state = FoldState()
    state.top, state.lines = _int(head["top"]), _int(head["lines"])
    heads_all, named_all = state.heads, state.named
    loads = orjson.loads
    for line in lines[1:-1]:
        mid, heads, named, memory = _record(loads(line))
        if mid in state:
            raise ValueError("a memory twice")
        heads_all[mid] = heads
        if named is not None:
            named_all[mid] = named
        state[mid] = memory
    return state


def decode(data: bytes, seen_ns: int, folder: _Folder | None) -> Folded | None:
    """The snapshot in `data` (its prefix's `seen_ns` is the file's mtime), or None for anything
    that is not a whole, well-formed snapshot written in this state folder."""
    try:
        checked = _checked(data, seen_ns, folder)
        if checked is None:
            return None
        prefix, body = checked
        state = _state(body)
    except _SURPRISES:
        return None
    return Folded(prefix, state, state.lines)


_SURPRISES = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, SnapshotError)
"""What a damaged snapshot can raise while read (orjson's and json's `JSONDecodeError` are ValueErrors)."""


def _checked(data: bytes, seen_ns: int, folder: _Folder | None) -> tuple[Prefix, bytes] | None:
    """(prefix, body) of a snapshot whose header is ours (format, versions, this state folder)
    and whose body matches its size and checksum; None otherwise. May raise on garbage."""
    import orjson

    cut = data.find(b"\n", 0, _HEAD_LIMIT)
    if cut < 0:
        return None
    header = orjson.loads(data[:cut])
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("v") != VERSION \
            or header.get("anchorfs") != __version__:
        return None
    if folder is None or header.get("folder") != list(folder):
        return None
    body = data[cut + 1:]
    if header.get("size") != len(body) or header.get("body") != blake3.blake3(body).hexdigest():
        return None
    prefix = Prefix.from_dict(header.get("prefix"), seen_ns)
    return None if prefix is None else (prefix, body)


def _read(ledger: Ledger) -> tuple[bytes, os.stat_result] | None:
    """The snapshot file's bytes and its `fstat`; None when missing, a link (never followed,
    only ignored), unreadable, or larger than any fold of that ledger."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return None
    try:
        st = os.fstat(fd)
        ledger_size = os.lstat(ledger.file).st_size
        if st.st_size > 2 * ledger_size + (1 << 20):
            return None  # no fold of that ledger is this large: not ours
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks), st


def load(ledger: Ledger) -> Snapshot | None:
    """The snapshot beside `ledger`, checked as it is read; None when missing or not usable
    (a link there is never followed, only ignored)."""
    read = _read(ledger)
    if read is None:
        return None
    data, st = read
    folded = decode(data, st.st_mtime_ns, _folder(ledger))
    if folded is None:
        return None
    return Snapshot(folded, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


def save(ledger: Ledger, folded: Folded) -> bool:
    """Write `folded` as the snapshot (`statefs.replace_state`: exclusive temp, mtime set to the
    moment its prefix was verified, fsync, `os.replace`); False when it cannot be (a link there,
    an I/O error): the snapshot is only ever a saving, so a failed write is no error."""
    folder = _folder(ledger)
    path = snap_file(ledger)
    if folder is None or not isinstance(folded.state, FoldState):
        return False
    try:
        st = os.lstat(path)
        if not stat_mod.S_ISREG(st.st_mode):
            return False  # a link (or anything odd) there is left alone, never written through or over
    except FileNotFoundError:
        pass
    except OSError:
        return False
    payload = encode(folded, folder)
    try:
        _upgrade_gitignore(ledger)
        # the racy rule measures from the mtime (`catchup.stamp`): the moment the prefix was verified
        replace_state(path, payload, fsync=True, mtime_ns=folded.prefix.seen_ns)
    except (OSError, AnchorfsError):
        return False
    return True


def _upgrade_gitignore(ledger: Ledger) -> None:
    from ..core.statedir import upgrade_gitignore

    upgrade_gitignore(ledger.dir)


def _restamp(ledger: Ledger, snap: Snapshot, prefix: Prefix) -> None:
    """Give the snapshot just verified whole the time of that verification, so later readers
    trust it on the stat alone; only if it is still the very file read (fd, identity checked)."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == snap.ident:
            os.utime(fd, ns=(prefix.seen_ns, prefix.seen_ns))
    except OSError:
        pass
    finally:
        os.close(fd)


def _worth_saving(ledger: Ledger, follow: catchup.Follow, state: FoldState, saved: int | None) -> bool:
    prefix = follow.prefix
    if prefix.stat is None or follow.skipped or prefix.stat[2] != prefix.offset:
        return False  # not vouched for, a bad line skipped, or a torn tail: every read must see those
    if state.lines < MIN_LINES:
        return False
    if saved is None:
        return True
    return state.lines - saved >= max(MIN_LINES, len(state) // REWRITE_DIVISOR)


def _warn_torn(ledger: Ledger, end: int) -> None:
    try:
        torn = os.lstat(ledger.file).st_size > end and not ledger._in_flight(end)
    except OSError:
        return
    if torn:
        import warnings

        warnings.warn(f"{ledger.file}: skipping a torn last line at byte {end}", stacklevel=4)


def current(ledger: Ledger, cached: Folded | None = None, *, write: bool = True) -> Folded:
    """The fold of the ledger as it is now.

    From `cached` (this process's last fold) when given, else from the snapshot on disk when
    it holds; the lines after either are folded in, and a ledger that no longer starts with
    their prefix is folded afresh. The snapshot is written anew (when `write`) after a fresh
    fold, or once enough lines were folded in since it was last written.

    The cyclic collector is paused meanwhile: a fold allocates one memory (and its dicts) per
    snapshot and frees nothing, so each collection it would trigger walks a growing heap for
    no garbage (a third of the time at 20,000 memories).
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _current(ledger, cached, write=write)
    finally:
        if paused:
            gc.enable()


def _current(ledger: Ledger, cached: Folded | None, *, write: bool) -> Folded:
    base = cached
    snap: Snapshot | None = None
    if base is None:
        snap = load(ledger)
        if snap is not None:
            if catchup.settled(ledger, snap.folded.prefix):
                return snap.folded
            base = snap.folded
    follow = catchup.follow(ledger, base.prefix if base is not None else None)
    if snap is not None and follow.kind != "rewritten":
        _warn_torn(ledger, follow.prefix.offset)  # as a read from the first line would have
    saved: int | None
    if follow.kind == "same" and base is not None:
        state, saved = base.state, base.saved
        if snap is not None and write and follow.prefix.stat is not None:
            if follow.prefix.stat != snap.folded.prefix.stat:
                saved = None  # the same bytes under another stat (a checkout, a touch): vouch for it anew
            elif catchup.settled(ledger, follow.prefix):
                _restamp(ledger, snap, follow.prefix)
    elif follow.kind == "grown" and base is not None:
        state, saved = refold(base.state, follow.entries), base.saved
    else:
        state, saved = fold(follow.entries), None
    if write and isinstance(state, FoldState) and _worth_saving(ledger, follow, state, saved):
        if save(ledger, Folded(follow.prefix, state)):
            saved = state.lines
    return Folded(follow.prefix, state, saved)
