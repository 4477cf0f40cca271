"""What was handed to an agent: a local record, `.anchorfs/usage.jsonl` (git-ignored, never in the
ledger), one line per hand-out by `recall`, `context` and the hooks, read by `list --unused` and
`show`. It only informs a person: nothing is served differently and nothing is ever retired for
being unused. Appended in one write; read from its end, bounded; a lost line makes a memory look
less used, never changes a verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime

from ..core.errors import AnchorfsError
from ..core.model import from_iso, to_iso, utcnow
from ..core.statefs import StateTooLarge, open_state, read_state

__all__ = ["USAGE_FILE", "handed", "last_handed"]

USAGE_FILE = "usage.jsonl"
_READ = 16 << 20  # the newest this many bytes are read: years of hand-outs for a busy agent


def handed(state_dir: str, ids: Iterable[str], by: str) -> None:
    """Note that `ids` were handed to an agent by `by` now; a record that cannot be written is skipped."""
    import orjson

    ids = list(dict.fromkeys(ids))
    if not ids:
        return
    line = orjson.dumps({"at": to_iso(utcnow()), "by": by, "ids": ids}) + b"\n"
    try:
        fd = open_state(os.path.join(state_dir, USAGE_FILE), os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn last line stays apart from this one
                line = b"\n" + line
            os.write(fd, line)  # one write with O_APPEND: concurrent hand-outs never interleave
        finally:
            os.close(fd)
    except (OSError, AnchorfsError):  # usage never stands in the way of a hand-out
        pass


def last_handed(state_dir: str) -> dict[str, tuple[datetime, str]]:
    """Each memory's newest hand-out in the record: id -> (when, by which surface)."""
    import orjson

    try:
        data = read_state(os.path.join(state_dir, USAGE_FILE), _READ, tail=True) or b""
    except (StateTooLarge, OSError):
        data = b""
    out: dict[str, tuple[datetime, str]] = {}
    for raw in data.splitlines():
        try:
            d = orjson.loads(raw)
            at, by, ids = from_iso(d["at"]), str(d["by"]), d["ids"]
        except (ValueError, KeyError, TypeError):  # a torn or foreign line: skipped
            continue
        if at is None or not isinstance(ids, list):
            continue
        for mid in ids:
            if isinstance(mid, str) and (mid not in out or out[mid][0] <= at):
                out[mid] = (at, by)
    return out
