"""What a one-shot `record` needs of the fold, without folding: the fold's `top` and the memories
that could be the same claim.

A `record` writes new memories: its ledger entry needs the fold's highest `seq` (`ledger.stamped`:
the new ids have no heads), and its duplicate check the memories, active or under review, whose
text is the new one's. The full fold gives both by decoding every record of the fold snapshot
(most of a one-shot `anchorfs record` at 10,000 memories, issue 19). Here the snapshot is read
and checked whole as `foldsnap.load` checks it (format, state folder, body checksum), but only
the records that hold the new text are decoded: the snapshot is orjson's output, where a text
is always spelled the same, so a record whose memory has that text (outer whitespace aside)
holds its JSON spelling. The lines appended since the snapshot are parsed (`catchup.follow`,
as the full path reads them) and applied, in ledger order, to those records and to the records
of the memories they touch with that text, as `ledger.refold` applies them: the memories so
folded are the full fold's, value for value and in its order.

Anything the full path would do otherwise is left to it (None): no snapshot, or one that does
not check; a ledger rewritten, torn, moved while read, or unchanged under another stat (the
full path vouches for it anew); a bad line, or any warning; a line without `seq` or not above
the snapshot's `top` (a union merge's older lines); as many lines since the snapshot as make
the full path write it again (`foldsnap.REWRITE_DIVISOR`); a record that does not read back.
"""

from __future__ import annotations

import os
import warnings

import blake3
import orjson

from . import catchup, foldsnap
from .catchup import Prefix
from .errors import AnchorfsError, LedgerError
from .ledger import Entry, FoldState, Ledger
from .model import Memory
from .statefs import open_state

__all__ = ["RecordView", "view", "top_now", "MAX_CANDIDATES"]

MAX_CANDIDATES = 4096
"""More records holding the text than this (a short, common text): the full fold is as cheap."""


class RecordView:
    """The fold's `top` after the ledger's first `prefix.offset` bytes, the memories among them
    whose text is one of the texts asked (in the fold's order), and how many lines the full
    path would have folded in since the snapshot (`since`)."""

    __slots__ = ("prefix", "top", "known", "since", "threshold")

    def __init__(self, prefix: Prefix, top: int, known: list[Memory], since: int, threshold: int) -> None:
        self.prefix = prefix
        self.top = top
        self.known = known
        self.since = since
        self.threshold = threshold


def _follow(ledger: Ledger, prefix: Prefix) -> catchup.Follow | None:
    """The ledger after `prefix`, read as the full path reads it, or None when that read has
    something to say (a warning, a bad line, a torn or unvouched tail): the full path says it."""
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            follow = catchup.follow(ledger, prefix)
    except (LedgerError, OSError):
        return None
    now = follow.prefix
    if said or follow.skipped or follow.kind == "rewritten" or now.stat is None or now.stat[2] != now.offset:
        return None
    return follow


def _needle(text: str) -> bytes:
    return orjson.dumps(text)[1:-1]


def _read(ledger: Ledger) -> tuple[bytearray, int] | None:
    """The snapshot file's bytes, read into one buffer (a read in chunks joined after costs ten
    times as much at 9 MB: every page touched twice), and its mtime; None as `foldsnap._read`."""
    try:
        fd = open_state(foldsnap.snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > 2 * os.lstat(ledger.file).st_size + (1 << 20):
            return None  # no fold of that ledger is this large: not ours
        buf = bytearray(st.st_size)
        view = memoryview(buf)
        got = 0
        while got < len(buf):
            n = os.readv(fd, [view[got:]])
            if n == 0:
                return None  # cut short meanwhile: not the file whose size was taken
            got += n
        if os.read(fd, 1):
            return None  # grown meanwhile
        return buf, st.st_mtime_ns
    except OSError:
        return None
    finally:
        os.close(fd)


def _snapshot(ledger: Ledger) -> tuple[Prefix, int, int, int, int, bytearray] | None:
    """(prefix, top, lines, memories, where the records start, the file's bytes) of the fold
    snapshot, checked as `foldsnap.decode` checks it before it reads the records (format,
    version, this state folder, the body's size and checksum, the counts, the plan's bounds);
    None for anything else. `memories` is the count of its records."""
    read = _read(ledger)
    if read is None:
        return None
    data, seen_ns = read
    mv = memoryview(data)
    try:
        cut = data.find(b"\n", 0, foldsnap._HEAD_LIMIT)
        if cut < 0:
            return None
        header = orjson.loads(mv[:cut])
        if not isinstance(header, dict) or header.get("format") != foldsnap.FORMAT \
                or header.get("v") != foldsnap.VERSION:
            return None
        folder = foldsnap._folder(ledger)
        if folder is None or header.get("folder") != list(folder):
            return None
        body = cut + 1
        if header.get("size") != len(data) - body or header.get("body") != blake3.blake3(mv[body:]).hexdigest():
            return None
        where = header.get("plan")
        if type(where) is not list or len(where) != 3 or type(where[1]) is not int or where[1] < 0:
            return None
        prefix = Prefix.from_dict(header.get("prefix"), seen_ns)
        end = data.find(b"\n", body)
        if prefix is None or end < 0:
            return None
        counts = orjson.loads(mv[body:end])
        if not isinstance(counts, dict) or not isinstance(counts.get("index"), dict):
            return None
        top, lines = counts.get("top"), counts.get("lines")
        if type(top) is not int or type(lines) is not int or top < 0 or lines < 0:
            return None
        records = end + 1 + where[1]
        if data[records:records + 1] != b"\n":
            return None
        records += 1
        if records < len(data) and data[-1:] != b"\n":
            return None  # a torn record
        return prefix, top, lines, _memories(data, end + 1, records), records, data
    except orjson.JSONDecodeError:
        return None


def _memories(data: bytearray, plan: int, records: int) -> int:
    """How many records the snapshot holds: the plan's count of every memory where it keeps one
    (format 5's `all_n`, checked against the records' bounds), else the records' lines counted."""
    cut = data.find(b"\n", plan, records)
    try:
        head = orjson.loads(memoryview(data)[plan:cut]) if cut > plan else None
    except orjson.JSONDecodeError:
        head = None
    n = head.get("all_n") if isinstance(head, dict) else None
    if type(n) is int and 0 <= n <= len(data) - records:
        return n
    return data.count(b"\n", records)


def view(ledger: Ledger, texts: set[str], held: tuple[str, ...]) -> RecordView | None:
    """The view for a record of memories with `texts` (each stripped), or None: fold instead.
    `held`: the statuses a duplicate may have."""
    snap = _snapshot(ledger)
    if snap is None:
        return None
    prefix, top, lines, n_records, first, records = snap  # `records`: the whole file; they start at `first`
    threshold = max(foldsnap.MIN_LINES, n_records // foldsnap.REWRITE_DIVISOR)
    entries: list[Entry] = []
    if catchup.settled(ledger, prefix):
        now = prefix
    else:
        follow = _follow(ledger, prefix)
        if follow is None or follow.kind != "grown":
            return None  # "same" under another stat: the full path writes the snapshot anew
        entries, now = follow.entries, follow.prefix
        if any(e.seq is None or e.seq <= top for e in entries) or len(entries) >= threshold:
            return None
    starts: dict[int, None] = {}
    for text in texts:
        needle = _needle(text)
        at = records.find(needle, first)
        while at >= 0:
            starts[max(first, records.rfind(b"\n", first, at) + 1)] = None
            if len(starts) > MAX_CANDIDATES:
                return None
            at = records.find(needle, records.find(b"\n", at) + 1)
    # the memories the new lines touch with such a text: their records too (a text is one
    # memory's for good, but a ledger edited by hand may say otherwise)
    for e in entries:
        for m in e.memories:
            if m.content.strip() in texts:
                key = b'["' + _needle(m.id) + b'",'
                if records.startswith(key, first):
                    starts[first] = None
                elif (at := records.find(b"\n" + key, first)) >= 0:
                    starts[at + 1] = None
    state = FoldState()
    try:
        for at in sorted(starts):  # the fold's order
            end = records.find(b"\n", at)
            mid, heads, named, memory = foldsnap._record(orjson.loads(records[at:end]))
            if mid in state:
                return None
            state[mid] = memory
            state.heads[mid] = heads
            if named is not None:
                state.named[mid] = named
    except foldsnap._SURPRISES:
        return None
    state.top, state.lines = top, lines
    for e in entries:
        state.apply(e)
    known = [m for m in state.values() if m.status in held and m.content.strip() in texts]
    return RecordView(now, state.top, known, len(entries), threshold)


def top_now(ledger: Ledger, seen: RecordView) -> int | None:
    """Under the writer lock: the fold's `top` now, from the lines appended since `seen` was
    taken (another writer's); None when the full path must fold (it would write the snapshot
    now, or the ledger did anything but grow)."""
    if catchup.settled(ledger, seen.prefix):
        return seen.top
    follow = _follow(ledger, seen.prefix)
    if follow is None or follow.kind == "rewritten":
        return None
    if follow.kind == "same":
        return seen.top  # as the full path's fold of that prefix: the same state
    entries = follow.entries
    if seen.since + len(entries) >= seen.threshold:
        return None
    return max([seen.top, *(e.seq for e in entries if e.seq is not None)])
