"""The fold snapshot: `.anchorfs/fold.snap`, the folded ledger kept between processes.

Folding the whole ledger is most of a one-shot command or hook on a large ledger. The snapshot
keeps what the fold gave (each memory, and what `FoldState` needs to stay order-free: heads,
replaced ids, the highest `seq`, the line count) with the ledger prefix it was folded from
(`catchup.Prefix`: offset, chained blake3, the ledger's stat), and the drift view a pass reads.

Derived, never trusted blindly: the prefix must still hold by `catchup`'s rule (stat unchanged
and settled, else its checksum against the bytes now); a grown ledger is the snapshot plus the
lines after it (`ledger.refold`); anything else (a ledger rewritten, a snapshot torn, of another
version, state folder or owner, or failing its checksum) is a cold cache, rebuilt and written
anew; one past twice the ledger's size and 1 MiB is not read. Written through
`statefs.replace_state`, lock-free (the last whole file wins); never by a read-only workspace,
nor from a read that skipped a bad line or found a torn tail.
"""

from __future__ import annotations

import gc
import os
from itertools import accumulate
from datetime import datetime
import stat as stat_mod
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import blake3

from . import catchup
from .catchup import Folded, Prefix
from ..core.errors import AnchorfsError
from .log import OPS, FoldState, Head, Ledger, fold, refold
from ..core.model import AnchorRef, Memory, SnapshotError, StaleClaim, from_iso
from ..core.statefs import open_state, replace_state

from ..core import __version__

__all__ = ["SNAP_FILE", "FORMAT", "VERSION", "MIN_LINES", "DriftView", "Snapshot", "current", "decode", "drift_view",
           "encode", "load", "save", "snap_file"]

SNAP_FILE = "fold.snap"
FORMAT = "anchorfs-fold"
VERSION = 14
"""13: each memory a positional row, and the drift view naming records by byte offset. A file of
another version is not used."""
MIN_LINES = 64
"""A ledger this short folds fast: no snapshot is written for it."""
REWRITE_DIVISOR = 32
"""A grown fold is saved again once the lines since the snapshot pass 1/32 of its memories
(at least `MIN_LINES`)."""
_HEAD_LIMIT = 1 << 16
_Folder = tuple[int, int]


def snap_file(ledger: Ledger) -> str:
    """The fold snapshot's path, beside the ledger (a str: see `Ledger.file`)."""
    return os.path.join(ledger.dir, SNAP_FILE)


class Snapshot(NamedTuple):
    """A snapshot read from disk: its fold, and the file's identity (to re-stamp that file)."""

    folded: Folded
    ident: tuple[int, int, int, int]


def _folder(ledger: Ledger) -> _Folder | None:
    try:
        st = os.lstat(ledger.dir)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat_mod.S_ISDIR(st.st_mode) else None


# -- the format ------------------------------------------------------------------------------

def _row(m: Memory) -> list[Any]:
    """A memory as a positional row (its fields in `Memory`'s order, each anchor a row too)."""
    return [m.id, m.content, m.kind, list(m.tags),
            [[a.path, a.sha256, a.symbol, list(a.lines) if a.lines else None, a.content_hash, a.commit, a.dirty,
              a.token_hash] for a in m.anchors],
            m.author, m.recorded_at, None if m.valid_from == m.recorded_at else m.valid_from, m.valid_until,
            m.status, m.supersedes, m.superseded_by, m.reason, m.verified_at,
            [c.to_dict() for c in m.stale_claims] or None]


def _records(state: FoldState) -> Iterator[list[Any]]:
    """One [id, heads, named] per memory, in the fold's dict order; each head
    [seq, line, tx, op, actor, at, memory row]."""
    heads_all, named_all = state.heads, state.named
    for mid in state:
        named = named_all.get(mid)
        yield [mid, [[h.rank[0] if len(h.rank) == 3 else None, h.rank[1] if len(h.rank) == 2 else None,
                      h.tx, h.op, h.actor, h.at, _row(h.memory)] for h in heads_all[mid].values()],
               sorted(named) if named is not None else None]


def encode(folded: Folded, folder: _Folder) -> bytes:
    """The file's bytes: a header line (format, versions, prefix, folder, the body's size and
    checksum), then the body: a line with the fold's counts, the drift view (`_view`), then one
    line per memory record."""
    state = folded.state
    if not isinstance(state, FoldState):
        raise TypeError("only a FoldState is snapshotted")
    import orjson

    head = orjson.dumps({"top": state.top, "lines": state.lines,
                         "conflicting": {k: sorted(v) for k, v in state.conflicting.items()},
                         "redacted": state.redacted})
    dumps, utc = orjson.dumps, orjson.OPT_UTC_Z  # times as orjson writes them: RFC 3339, read by `from_iso`
    records = [dumps(rec, option=utc) + b"\n" for rec in _records(state)]
    view = orjson.dumps(_view(state, list(accumulate(map(len, records), initial=0))))
    body = b"".join([head, b"\n", view, b"\n", *records])
    header = orjson.dumps({"format": FORMAT, "v": VERSION, "anchorfs": __version__,
                           "prefix": folded.prefix.to_dict(), "folder": list(folder),
                           "size": len(body), "body": blake3.blake3(body).hexdigest()})
    return header + b"\n" + body


def _str(x: Any) -> str:
    if type(x) is not str:
        raise ValueError("not a string")
    return x


def _int(x: Any) -> int:
    if type(x) is not int or x < 0:
        raise ValueError("not a count")
    return x


def _time(text: Any) -> datetime:
    if type(text) is not str:
        raise ValueError("not a time")
    at = from_iso(text)
    assert at is not None
    return at


def _memory(row: Any, mid: str) -> Memory:
    """A memory row read back; any surprise (a field count, a type) raises."""
    (id_, content, kind, tags, anchors, author, recorded_s, valid_from, valid_until, status, supersedes,
     superseded_by, reason, verified_at, claims) = row
    if id_ != mid or type(content) is not str or type(kind) is not str or type(status) is not str:
        raise ValueError("a bad memory row")
    recorded = _time(recorded_s)
    refs = []
    for path, sha256, symbol, lines, content_hash, commit, dirty, token_hash in anchors:
        refs.append(AnchorRef(_str(path), sha256, symbol, (int(lines[0]), int(lines[1])) if lines else None,
                              content_hash, commit, dirty, token_hash))
    return Memory(id_, content, kind, tuple(map(_str, tags)), tuple(refs), author, recorded,
                  recorded if valid_from is None else _time(valid_from),
                  None if valid_until is None else _time(valid_until), status, supersedes, superseded_by, reason,
                  None if verified_at is None else _time(verified_at),
                  tuple([StaleClaim.from_dict(c) for c in claims]) if claims else ())


def _record(rec: Any) -> tuple[str, dict[str, Head], set[str] | None, Memory]:
    """One memory record read back (id, heads, named ids, the memory the fold gives), checked as
    the ledger reader checks a line; any surprise raises."""
    mid, heads_in, named_in = rec
    if type(mid) is not str or not mid or type(heads_in) is not list or not heads_in:
        raise ValueError("a bad memory record")  # every memory folded has a head
    heads: dict[str, Head] = {}
    for seq, line, tx, op, actor, at_s, row in heads_in:
        if type(tx) is not str or type(actor) is not str or op not in OPS or tx in heads:
            raise ValueError("a bad head")
        memory = _memory(row, mid)
        at = memory.recorded_at if at_s == row[6] else _time(at_s)  # a head's time is most often its record's
        if seq is not None:
            if type(seq) is not int or seq < 1 or line is not None:
                raise ValueError("a bad rank")
            rank: tuple[Any, ...] = (seq, at, tx)
        else:
            rank = (0, _int(line))
        heads[tx] = Head(rank, tx, op, actor, at, memory)
    named: set[str] | None = None
    if named_in is not None:
        if type(named_in) is not list:
            raise ValueError("bad names")
        named = {_str(t) for t in named_in}
    memory = next(iter(heads.values())).memory if len(heads) == 1 else max(heads.values(), key=lambda x: x.rank).memory
    return mid, heads, named, memory


_RECORDS = 2
"""The body's line of the first memory record: the counts, then the drift view, come first."""


def _view(state: FoldState, starts: list[int]) -> dict[str, list[Any]]:
    """What a whole-fold drift pass asks, so a new process's pass builds no memory: the active
    anchored memories (`at`: where their records start, from `starts`, `ids`); their distinct paths in order of first use
    (`uniq`); per path, the hash all its anchors recorded or None (`want`), and its memories
    (`owners`, positions among the anchored); the anchored ones with `stale_claims` (`claims`),
    and the records of the unanchored ones with some (`marked`)."""
    ids: list[str] = []
    at: list[int] = []
    claims: list[int] = []
    marked: list[int] = []
    want: dict[str, str | None] = {}
    owners: dict[str, list[int]] = {}
    for k, m in enumerate(state.values()):
        if m.status != "active":
            continue
        if not m.anchors:
            if m.stale_claims:
                marked.append(starts[k])
            continue
        t = len(ids)
        ids.append(m.id)
        at.append(starts[k])
        if m.stale_claims:
            claims.append(t)
        for a in m.anchors:
            mine = owners.get(a.path)
            if mine is None:
                owners[a.path], want[a.path] = [t], a.sha256
            else:
                if mine[-1] != t:
                    mine.append(t)
                if want[a.path] != a.sha256:
                    want[a.path] = None
    return {"ids": ids, "at": at, "uniq": list(want), "want": list(want.values()), "owners": list(owners.values()),
            "claims": claims, "marked": marked}


class _Rows(Sequence[Memory]):
    """The memories of some records of a snapshot's body (`at`: their offsets from `base`), each
    built from its line when first read (a drift pass reads only those resting on a changed
    file); `ids` without building any."""

    __slots__ = ("_body", "_base", "_at", "ids", "_built")

    def __init__(self, body: bytes, base: int, at: list[int], ids: list[str]) -> None:
        self._body, self._base, self._at, self.ids = body, base, at, ids
        self._built: dict[int, Memory] = {}

    def __len__(self) -> int:
        return len(self._at)

    def __getitem__(self, i: int) -> Memory:  # type: ignore[override]  # no slices: none is asked
        at = self._at[i]
        memory = self._built.get(at)
        if memory is None:
            import orjson

            start = self._base + at
            mid, _, _, memory = _record(orjson.loads(self._body[start:self._body.index(b"\n", start)]))
            if self.ids and mid != self.ids[i]:
                raise ValueError("a view naming another record")
            self._built[at] = memory
        return memory


class DriftView:
    """The drift view of a snapshot that is the whole ledger (`_view`): `targets` builds a
    memory only when read, `marked` is built."""

    __slots__ = ("targets", "uniq", "want", "owners", "claims", "marked")

    def __init__(self, body: bytes, base: int, view: dict[str, Any]) -> None:
        ids, at, uniq, want, owners = view["ids"], view["at"], view["uniq"], view["want"], view["owners"]
        claims, marked = view["claims"], view["marked"]
        if not (type(ids) is type(at) is type(uniq) is type(want) is type(owners) is type(claims)
                is type(marked) is list) or len(ids) != len(at) or not len(uniq) == len(want) == len(owners):
            raise ValueError("a bad drift view")
        self.targets = _Rows(body, base, at, ids)
        self.uniq: list[str] = [_str(p) for p in uniq]
        self.want: list[str | None] = want
        self.owners: list[list[int]] = owners
        self.claims: list[int] = claims
        self.marked = list(_Rows(body, base, marked, []))


def drift_view(ledger: Ledger) -> DriftView | None:
    """The drift view of the snapshot on disk when it is the whole ledger now (settled), else
    None: the caller folds (`current`)."""
    read = _read(ledger)
    if read is None:
        return None
    data, st = read
    try:
        checked = _checked(data, st.st_mtime_ns, _folder(ledger))
        if checked is None or not catchup.settled(ledger, checked[0]):
            return None
        start = data.index(b"\n", checked[1]) + 1  # past the body's counts line
        end = data.index(b"\n", start)
        import orjson

        return DriftView(data, end + 1, orjson.loads(data[start:end]))
    except _SURPRISES:
        return None


def _state(data: bytes) -> FoldState:
    """The body (the lines after the header) read back into a `FoldState`, checked as the ledger
    reader checks a line; any surprise raises (the caller treats it as no snapshot)."""
    import orjson

    lines = data.split(b"\n")[1:]
    if len(lines) < _RECORDS + 1 or lines[-1] != b"":
        raise ValueError("a torn record")
    head = orjson.loads(lines[0])
    if not isinstance(head, dict):
        raise ValueError("not a fold")
    state = FoldState()
    state.top, state.lines = _int(head["top"]), _int(head["lines"])
    state.conflicting = {_str(k): frozenset(map(_str, v)) for k, v in head["conflicting"].items()}
    state.redacted = {_str(k): v for k, v in head["redacted"].items() if type(v) is bool}
    heads_all, named_all = state.heads, state.named
    loads = orjson.loads
    for line in lines[_RECORDS:-1]:
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
        prefix = checked[0]
        state = _state(data)
    except _SURPRISES:
        return None
    return Folded(prefix, state, state.lines)


_SURPRISES = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, SnapshotError)
"""What a damaged snapshot can raise while read (orjson's and json's `JSONDecodeError` are ValueErrors)."""


def _checked(data: bytes, seen_ns: int, folder: _Folder | None) -> tuple[Prefix, int] | None:
    """(prefix, where the body starts) of a snapshot whose header is ours (format, versions, this
    state folder) and whose body matches its size and checksum; None otherwise. May raise on garbage."""
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
    body = memoryview(data)[cut + 1:]  # not copied: a hook's snapshot is megabytes
    if header.get("size") != len(body) or header.get("body") != blake3.blake3(body).hexdigest():
        return None
    prefix = Prefix.from_dict(header.get("prefix"), seen_ns)
    return None if prefix is None else (prefix, cut + 1)


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
        data = os.read(fd, st.st_size)  # one read, one buffer: a hook reads it whole
        while chunk := os.read(fd, 1 << 22):  # grown since the fstat
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return data, st


def load(ledger: Ledger) -> Snapshot | None:
    """The snapshot beside `ledger`, checked as it is read; None when missing or not usable."""
    read = _read(ledger)
    if read is None:
        return None
    data, st = read
    folded = decode(data, st.st_mtime_ns, _folder(ledger))
    if folded is None:
        return None
    return Snapshot(folded, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


def save(ledger: Ledger, folded: Folded) -> bool:
    """Write `folded` as the snapshot (its mtime the moment its prefix was verified); False when
    it cannot be (a link there, an I/O error): a failed write of a cache is no error."""
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
    from ..core.statedir import upgrade_gitignore

    try:
        upgrade_gitignore(ledger.dir)
        # the racy rule measures from the mtime (`catchup.stamp`): the moment the prefix was verified
        replace_state(path, payload, fsync=True, mtime_ns=folded.prefix.seen_ns)
    except (OSError, AnchorfsError):
        return False
    return True


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
    """The fold of the ledger as it is now: from `cached` (this process's last fold), else from
    the snapshot on disk when it holds, plus the lines after; a ledger that no longer starts with
    that prefix is folded afresh. The snapshot is written anew (when `write`) after a fresh fold,
    or once enough lines were folded in since. The cyclic collector is paused meanwhile: a fold
    allocates much and frees nothing, so collections would find no garbage."""
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
