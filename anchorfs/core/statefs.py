"""Every file in `.anchorfs/` is opened here, never through a link.

The state folder travels with the repository, so a clone can hold a symlink at any state path
(`ledger.jsonl -> ../../victim.txt`); following it would write or read a file outside. So the
folder is checked with `lstat` (`check_state`), every open carries `O_NOFOLLOW` and `O_NONBLOCK`
and is confirmed a regular file by `fstat`, temp files are created with `O_EXCL` under a random
name, and a link found anywhere is refused in one line (`WorkspaceError`) before anything is
written. Hard links are the file itself, indistinguishable here.
"""

from __future__ import annotations

import errno
import os
import stat

from .errors import InputError, WorkspaceError

__all__ = [
    "armed",
    "fault",
    "find_block",
    "replace_block",
    "replace_text",
    "STATE_FILES",
    "STATE_LIMIT",
    "StateTooLarge",
    "STORE_DIR",
    "check_state",
    "fsync_dir",
    "check_state_dir",
    "check_store_dir",
    "create_temp",
    "open_state",
    "read_state",
    "refuse_link",
    "replace_state",
]

FAULT_ENV = "ANCHORFS_TEST_FAULT"
"""Test-only fault injection: a comma-separated list of points (see `anchorfs.core.statefs.fault`)."""

STORE_DIR = "memories.lance"
STATE_FILES = ("ledger.jsonl", "lock", "manifest.json", "drift.json", "applied", "events.jsonl",
               ".gitignore", "fold.snap", "server.sock", "sessions.json", "usage.jsonl", STORE_DIR)
"""Every name anchorfs keeps in `.anchorfs/`; none of them may be a link (a test keeps these in
step with their owners)."""


def armed(point: str) -> bool:
    """Whether tests asked for a fault at `point` (for faults that must act before `fault`)."""
    spec = os.environ.get(FAULT_ENV)
    return spec is not None and point in spec.split(",")


def fault(point: str) -> None:
    """Crash or fail at a named point when tests ask for it through the environment. Points:
    ledger-append, ledger-partial, ledger-cut (EPERM), kill-after-ledger, kill-after-store (exit),
    store-write, applied-write, drift-write, manifest-write (ENOSPC; the last three after half)."""
    if not armed(point):
        return
    if point.startswith("kill"):
        os._exit(137)
    if point == "ledger-cut":
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    raise OSError(errno.ENOSPC, f"injected fault at {point}")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # O_NOFOLLOW on a link: Linux says ELOOP, FreeBSD EMLINK
_STORE_WALK_LIMIT = 100_000
"""Entries `check_store_dir` looks at before giving up on a store too odd to be ours."""


def _refusal(path: str | os.PathLike[str], what: str) -> WorkspaceError:
    return WorkspaceError(f"refusing {path}: the {what} is a symbolic link (anchorfs never follows links in its state)")


def refuse_link(path: str | os.PathLike[str], what: str = "state file") -> os.stat_result | None:
    """Raise `WorkspaceError` if `path` is a symbolic link; its `lstat`, None when missing."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise _refusal(path, what)
    return st


def check_state_dir(state: str | os.PathLike[str]) -> None:
    """The state folder must be a real folder, not a link to one elsewhere (missing is fine)."""
    st = refuse_link(state, "state folder")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise WorkspaceError(f"refusing {state}: the state folder is not a folder")


def check_state(state: str | os.PathLike[str]) -> None:
    """The state folder and every state name in it (`STATE_FILES`), checked with `lstat` as a
    workspace is opened or made: a link anywhere there fails every command at once."""
    check_state_dir(state)
    for name in STATE_FILES:
        what = "store folder" if name == STORE_DIR else "state file"
        refuse_link(os.path.join(state, name), what)


def check_store_dir(path: str | os.PathLike[str]) -> None:
    """The LanceDB folder and everything under it must be real files and folders, checked
    before LanceDB (which follows links) opens any of it. Missing is fine."""
    refuse_link(path, "store folder")
    seen = 0
    todo = [os.fspath(path)]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue  # a stray file where the table belongs: the store reports it
        except OSError as exc:
            raise WorkspaceError(f"cannot read {folder}: {exc.strerror}") from None
        for entry in entries:
            seen += 1
            if entry.is_symlink():
                raise _refusal(entry.path, "store file")
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)
        if seen > _STORE_WALK_LIMIT:
            raise WorkspaceError(f"refusing {path}: more than {_STORE_WALK_LIMIT} entries; run `anchorfs reindex`")


def open_state(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """`os.open` for a state file: never follows a link, never blocks on a FIFO. A link raises
    `WorkspaceError`; anything else not a regular file `OSError`, as a failed open would (callers
    treat a damaged state file as cold)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _refusal(path, "state file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a folder or a FIFO there: an I/O error, as each caller handles one
            code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
            raise OSError(code, "not a regular file" if code == errno.EINVAL else os.strerror(code), os.fspath(path))
        if not flags & _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


STATE_LIMIT = 64 << 20
"""The most bytes of a derived state file anchorfs reads: a larger one is a cold cache."""


class StateTooLarge(OSError):
    """A derived state file past its size bound: read as missing (a cold cache)."""


def read_state(path: str | os.PathLike[str], limit: int = STATE_LIMIT, *, tail: bool = False) -> bytes | None:
    """A state file's bytes, or None when it does not exist. A link raises `WorkspaceError`;
    a file larger than `limit` raises `StateTooLarge` before a byte is read, or, with `tail`,
    gives its last `limit` bytes from the first whole line among them (a log read from its end)."""
    try:
        fd = open_state(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        size = os.fstat(fd).st_size
        start = 0
        if size > limit:
            if not tail:
                raise StateTooLarge(errno.EFBIG, f"larger than {limit} bytes", os.fspath(path))
            start = size - limit
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if start:
            data = data[data.find(b"\n") + 1:]
        return data
    finally:
        os.close(fd)


def create_temp(path: str | os.PathLike[str], mode: int = 0o644) -> tuple[int, str]:
    """(fd, name) of a new temp file beside `path`, for a write that ends in `os.replace`: a
    random `.tmp` name, created exclusive and no-follow. `mode` is filtered by the umask."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _refusal(tmp, "temp file") from None
        raise
    return fd, tmp


def replace_state(path: str | os.PathLike[str], payload: bytes, *, fsync: bool = False, fault_point: str | None = None,
                  mode: int | None = None, mtime_ns: int | None = None) -> os.stat_result:
    """Write a file whole or not at all: a `create_temp` file, then `os.replace`; the one writer
    of every state file and of a person's rules file. A link at `path` is refused first.

    `mode` is set exactly (no umask); `mtime_ns` becomes the file's mtime and atime; `fsync` makes
    the bytes durable before the rename (the folder's fsync is the caller's); `fault_point` names
    the test-only fault switch. Returns the `fstat` of the file written.
    """
    refuse_link(path)
    fd, tmp = create_temp(path, 0o644 if mode is None else mode)
    try:
        try:
            view = memoryview(payload)
            if fault_point is not None and FAULT_ENV in os.environ and armed(fault_point):
                view = view[os.write(fd, view[: len(view) // 2]):]
                fault(fault_point)
            while view:
                view = view[os.write(fd, view):]
            if mode is not None:
                os.fchmod(fd, mode)
            if mtime_ns is not None:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            if fsync:
                os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return st


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a rename in `folder` durable, best effort; a link at `folder` is skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- managed blocks in text files ------------------------------------------------------------------

def find_block(text: str, begin_prefix: str, end: str, *, where: str = "the file") -> list[tuple[int, int]]:
    """(start, stop) character offsets of each block from a line starting with `begin_prefix`
    through its `end` line (inclusive, with its newline). A begin with no end is refused."""
    spans: list[tuple[int, int]] = []
    pos = 0
    lines = text.splitlines(keepends=True)
    start: int | None = None
    for line in lines:
        bare = line.rstrip("\r\n").strip()
        if start is None and bare.startswith(begin_prefix):
            start = pos
        elif start is not None and bare == end:
            spans.append((start, pos + len(line)))
            start = None
        pos += len(line)
    if start is not None:
        raise InputError(f"the anchorfs block in {where} has no `{end}` line; fix it by hand, nothing was written")
    return spans


def replace_block(text: str, block: str, begin_prefix: str, end: str, *, where: str = "the file") -> str:
    """`text` with its managed block replaced by `block` in place (later copies removed), or
    `block` appended after a blank line when there is none. Text outside is kept byte for byte."""
    spans = find_block(text, begin_prefix, end, where=where)
    if not block.endswith("\n"):
        block += "\n"
    if not spans:
        if not text:
            return block
        # only a newline the text lacks: what was there stays a byte-identical prefix
        return text + ("" if text.endswith("\n") else "\n") + block
    out = [text[: spans[0][0]], block]
    for (_, stop), (nxt, _) in zip(spans, spans[1:]):
        out.append(text[stop:nxt])
    out.append(text[spans[-1][1]:])
    return "".join(out)


def replace_text(path: str | os.PathLike[str], text: str, *, existed: bool) -> None:
    """Replace a person's file (rules, instructions) whole or not at all, keeping its mode, the
    bytes fsynced before the rename and the folder after it: a crash must not leave it empty."""
    mode = stat.S_IMODE(os.stat(path).st_mode) if existed else 0o644
    replace_state(os.fspath(path), text.encode("utf-8"), mode=mode, fsync=True)
    fsync_dir(os.path.dirname(os.path.realpath(path)))  # the folder the rename happened in (not a link)
