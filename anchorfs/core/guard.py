"""The one guarded open for workspace files: every read of a file under the root goes here.

Between a `stat` and an `open` a file can be swapped for a symlink out of the workspace or for a
FIFO (the read would block forever), and a folder on the way can become a link. So the checks
are made on the open fd, which cannot change under us: `O_NOFOLLOW`, `O_NONBLOCK`, `O_CLOEXEC`,
`O_NOCTTY`; `fstat` (a regular file, the device and inode the caller checked, the size bound);
on Linux, the fd's real path (`/proc/self/fd/N`) must be the path asked for, under the root and
not in `.anchorfs/`. `_statmatch.reread` (C, openat2 beneath the root) makes the same checks in
batch where the kernel allows; `tests/core/test_guard.py` holds both to the same cases.

A violation raises a `GuardError` (an `AnchorError`), which callers map to a verdict: `unsafe`
for `EscapedError`, `unreadable` for `NotRegularError` / `TooLargeError`, a re-check for
`SwappedError`. Other OSErrors (not found, permission denied) pass through untouched.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

from .errors import AnchorError, UnsafePathError
from .statedir import STATE_DIR

__all__ = [
    "GuardError",
    "EscapedError",
    "NotRegularError",
    "SwappedError",
    "TooLargeError",
    "folded",
    "is_state_name",
    "open_guarded",
    "read_guarded",
    "hash_guarded",
]

_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
          | getattr(os, "O_NOCTTY", 0))
_CHUNK = 1 << 20
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # O_NOFOLLOW on a link: Linux says ELOOP, FreeBSD EMLINK


class GuardError(AnchorError):
    """A workspace file that failed the guarded open; `path` is the path asked for."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class EscapedError(GuardError, UnsafePathError):
    """What was opened (or a link met at the last name) lies outside the root or in `.anchorfs/`."""


class NotRegularError(GuardError):
    """A FIFO, socket, device or folder where a regular file was checked."""

    def __init__(self, path: str, reason: str, *, is_dir: bool = False) -> None:
        super().__init__(path, reason)
        self.is_dir = is_dir


class SwappedError(GuardError):
    """The file opened is not the one checked (another inode, a new link, another place): check again."""


class TooLargeError(GuardError):
    """Larger than the caller's bound (or grew past it while being read)."""


def folded(name: str) -> str:
    """`name` as a case-folding, normalizing filesystem (macOS, Windows) may read it: NFKC, then
    casefold (ASCII: just lower case, no Unicode tables loaded)."""
    if name.isascii():
        return name.lower()
    import unicodedata

    return unicodedata.normalize("NFKC", name).casefold()


def is_state_name(name: str) -> bool:
    """Whether a top-level name is `.anchorfs` on some filesystem: case-insensitive ones fold
    case and some normalize Unicode, so `.AnchorFS/ledger.jsonl` is the ledger."""
    return (name.isascii() or len(name) >= 4) and folded(name) == STATE_DIR


def _escapes(real: str, root: str) -> str | None:
    """Why `real` (a canonical path) is off limits under `root` (a realpath), or None."""
    if real == root:
        return "the workspace root, not a file"
    prefix = root if root.endswith(os.sep) else root + os.sep
    if not real.startswith(prefix):
        return "resolves outside the workspace"
    if is_state_name(real[len(prefix):].partition(os.sep)[0]):
        return f"resolves into anchorfs's own {STATE_DIR}/ folder"
    return None


def _link_refused(path: str, root: str | None, exc: OSError) -> OSError | GuardError:
    """O_NOFOLLOW met a link: outside the root it is an escape, inside a change to re-check;
    a loop that resolves nowhere stays the OSError it is."""
    try:
        os.stat(path)  # follows the link without opening anything
    except OSError as again:
        if again.errno == errno.ELOOP:
            return exc
    if root is not None:
        why = _escapes(os.path.realpath(path), root)
        if why is not None:
            return EscapedError(path, f"a symbolic link that {why}; not followed")
    return SwappedError(path, "became a symbolic link after it was checked; not followed")


def _confirm_place(fd: int, path: str, root: str | None) -> None:
    """On Linux, the fd's own path must be the one asked for, under the root, outside `.anchorfs/`."""
    try:
        seen = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc (another OS, a bare container): the fstat checks stand alone
        return
    if root is not None:
        why = _escapes(seen, root)
        if why is not None:
            raise EscapedError(path, f"the file opened {why}")
    if seen != path and seen != os.path.normpath(os.path.abspath(path)):
        raise SwappedError(path, "the file opened is not at the path checked (moved, or a folder on the way changed)")


def open_guarded(path: str | os.PathLike[str], *, root: str | None = None, expect: os.stat_result | None = None,
                 max_bytes: int | None = None) -> tuple[int, os.stat_result]:
    """Open a workspace file for reading: (fd, its fstat); the caller closes the fd. `root`: the
    workspace's realpath, `expect`: the stat the caller checked, `max_bytes`: a size bound."""
    p = os.fspath(path)
    try:
        fd = os.open(p, _FLAGS)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _link_refused(p, root, exc) from None
        if exc.errno == errno.ENXIO:  # a socket (or a device without its driver)
            raise NotRegularError(p, "not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            is_dir = stat.S_ISDIR(st.st_mode)
            raise NotRegularError(p, "a directory, not a file" if is_dir else "not a regular file", is_dir=is_dir)
        if expect is not None and (st.st_ino != expect.st_ino or st.st_dev != expect.st_dev):
            raise SwappedError(p, "replaced by another file after it was checked")
        _confirm_place(fd, p, root)
        if max_bytes is not None and st.st_size > max_bytes:
            raise TooLargeError(p, f"larger than {max_bytes} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_guarded(path: str | os.PathLike[str], *, root: str | None = None, expect: os.stat_result | None = None,
                 max_bytes: int | None = None, limit: int | None = None) -> bytes:
    """The bytes of a workspace file through `open_guarded`. `max_bytes` refuses a larger file
    (`TooLargeError`, also when it grows while read); `limit` reads at most that many bytes."""
    fd, st = open_guarded(path, root=root, expect=expect, max_bytes=max_bytes)
    try:
        cap = limit if limit is not None else (max_bytes + 1 if max_bytes is not None else None)
        chunks: list[bytes] = []
        total = 0
        want = st.st_size + 1  # one read for a file that did not grow, a second to see EOF
        while cap is None or total < cap:
            n = want if cap is None else min(want, cap - total)
            chunk = os.read(fd, n)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = _CHUNK
    finally:
        os.close(fd)
    if max_bytes is not None and limit is None and total > max_bytes:
        raise TooLargeError(os.fspath(path), f"grew past {max_bytes} bytes while being read")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def hash_guarded(path: str | os.PathLike[str], *, root: str | None = None, expect: os.stat_result | None = None) -> str:
    """Hex SHA-256 of a whole workspace file through `open_guarded`, streamed (no size bound;
    raw `os.read`: `hashlib.file_digest` allocates 256 KiB per call)."""
    fd, _ = open_guarded(path, root=root, expect=expect)
    try:
        digest = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of `data`: the anchor contract's hash."""
    return hashlib.sha256(data).hexdigest()
