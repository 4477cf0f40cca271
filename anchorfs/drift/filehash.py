"""SHA-256 of workspace files, the anchor contract's hash: a file streamed through the one
guarded open (`sha256_file`), and a batch of files read again in one C loop (`reread_digests`).
The hash cache (`anchorfs.drift.hashcache`) decides when a file needs hashing; this only hashes."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

try:  # the batch re-read in C, off the GIL: built at install where a C compiler is at hand
    from . import _statmatch
except ImportError:  # callers go one file at a time through the guarded open
    _statmatch = None  # type: ignore[assignment]

__all__ = ["reread_digests", "sha256_file"]

_ONE_READ = 1 << 20
"""Files up to this size are hashed from one `os.read` (`HashCache.hash_many`, `reread_digests`)."""
_RENEW_BYTES = 64 << 20
"""Most bytes `reread_digests` holds at once: one batch of `_statmatch.reread`'s reads."""


def reread_digests(root: str, rels: Sequence[str], keys: Sequence[tuple[int, ...]]
                   ) -> tuple[int, list[bytes | None]] | None:
    """(when the reads began, per file `root/rel` the SHA-256 of its bytes read again now, None
    where it was refused) by `_statmatch.reread`'s loop: the guarded open's checks, in C, at
    most `_RENEW_BYTES` held at once. None where the loop is not built or refused the batch:
    the caller goes one by one."""
    reread = getattr(_statmatch, "reread", None)
    if reread is None:
        return None
    started = time.time_ns()  # before any read, so a caller's racy rule errs towards poisoning
    out: list[bytes | None] = []
    import hashlib

    sha256 = hashlib.sha256
    start = 0
    while start < len(rels):  # batches of at most _RENEW_BYTES held at once
        end, held = start, 0
        while end < len(rels) and (end == start or held + keys[end][0] <= _RENEW_BYTES):
            held += keys[end][0]
            end += 1
        packed = _statmatch.pack(list(keys[start:end]))
        got = reread(root, list(rels[start:end]), packed, _ONE_READ) if packed is not None else None
        if got is None:
            return None
        out.extend(None if data is None else sha256(data).digest() for data in got)
        start = end
    return started, out


def sha256_file(
    path: str | os.PathLike[str], *, root: str | None = None, expect: os.stat_result | None = None
) -> str:
    """Hex SHA-256 of a whole workspace file, streamed, through the one guarded open
    (`anchorfs.core.guard`): a violation raises its `GuardError`; other OSErrors pass."""
    from ..core.guard import hash_guarded

    return hash_guarded(path, root=root, expect=expect)
