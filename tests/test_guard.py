"""The one guarded open for workspace files (`anchorfs.guard`), on real files: what it refuses,
with which error, and that it reads and hashes what it accepts exactly."""

from __future__ import annotations

import errno
import hashlib
import os
import socket
from pathlib import Path

import pytest

from anchorfs.guard import (
    EscapedError,
    GuardError,
    NotRegularError,
    SwappedError,
    TooLargeError,
    hash_guarded,
    open_guarded,
    read_guarded,
)
from anchorfs.errors import AnchorError, UnsafePathError

DATA = b"def f():\n    return 1\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(DATA)
    (root / "other").mkdir()
    (root / "other" / "a.py").write_bytes(b"other\n")
    (root / ".anchorfs").mkdir()
    (root / ".anchorfs" / "ledger.jsonl").write_bytes(b"{}\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.py").write_bytes(DATA)
    return Path(os.path.realpath(root))


def test_reads_and_hashes_a_regular_file_exactly(ws: Path) -> None:
    path = str(ws / "pkg" / "a.py")
    st = os.stat(path)
    assert read_guarded(path, root=str(ws), expect=st, max_bytes=len(DATA)) == DATA
    assert hash_guarded(path, root=str(ws), expect=st) == hashlib.sha256(DATA).hexdigest()
    assert read_guarded(path, limit=3) == DATA[:3]
    empty = ws / "empty.py"
    empty.write_bytes(b"")
    assert read_guarded(str(empty), root=str(ws)) == b""
    big = ws / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # several reads
    assert read_guarded(str(big), root=str(ws)) == big.read_bytes()
    assert hash_guarded(str(big)) == hashlib.sha256(big.read_bytes()).hexdigest()


def test_every_violation_is_an_anchor_error_and_an_escape_is_unsafe() -> None:
    assert issubclass(GuardError, AnchorError)
    assert issubclass(EscapedError, UnsafePathError)
    for cls in (NotRegularError, SwappedError, TooLargeError):
        assert issubclass(cls, GuardError) and not issubclass(cls, UnsafePathError)


def test_a_link_at_the_last_name_is_never_followed(ws: Path) -> None:
    out = ws / "out.py"
    out.symlink_to(ws.parent / "outside" / "a.py")
    with pytest.raises(EscapedError, match="outside the workspace"):
        read_guarded(str(out), root=str(ws))
    inside = ws / "in.py"
    inside.symlink_to(ws / "pkg" / "a.py")
    with pytest.raises(SwappedError, match="symbolic link"):  # inside: the caller re-resolves it
        read_guarded(str(inside), root=str(ws))
    state = ws / "st.jsonl"
    state.symlink_to(ws / ".anchorfs" / "ledger.jsonl")
    with pytest.raises(EscapedError, match=".anchorfs"):
        read_guarded(str(state), root=str(ws))
    with pytest.raises(SwappedError):  # no root known: still never followed
        hash_guarded(str(out))


def test_a_link_loop_stays_the_oserror_it_is(ws: Path) -> None:
    (ws / "l1").symlink_to(ws / "l2")
    (ws / "l2").symlink_to(ws / "l1")
    with pytest.raises(OSError) as info:
        read_guarded(str(ws / "l1"), root=str(ws))
    assert info.value.errno == errno.ELOOP
    assert not isinstance(info.value, GuardError)


def test_a_fifo_opens_at_once_and_is_refused(ws: Path) -> None:
    fifo = ws / "pipe.py"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularError, match="not a regular file") as info:
        read_guarded(str(fifo), root=str(ws))  # with no writer: a blocking open would never return
    assert not info.value.is_dir


def test_a_directory_and_a_socket_are_not_regular_files(ws: Path) -> None:
    with pytest.raises(NotRegularError) as info:
        read_guarded(str(ws / "pkg"), root=str(ws))
    assert info.value.is_dir
    sock_path = ws / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        with pytest.raises(NotRegularError):
            read_guarded(str(sock_path), root=str(ws))
    finally:
        sock.close()


def test_another_inode_than_the_one_checked_is_a_swap(ws: Path) -> None:
    path = ws / "pkg" / "a.py"
    checked = os.stat(path)
    (ws / "pkg" / "new.py").write_bytes(DATA)
    os.replace(ws / "pkg" / "new.py", path)  # same name, same bytes, another file
    with pytest.raises(SwappedError, match="replaced"):
        read_guarded(str(path), root=str(ws), expect=checked)
    assert read_guarded(str(path), root=str(ws), expect=os.stat(path)) == DATA


def test_a_folder_swapped_for_a_link_on_the_way_is_caught_by_the_fds_place(ws: Path) -> None:
    """O_NOFOLLOW guards only the last name: a folder on the way turned into a link is seen by
    the fd's own path (/proc/self/fd), out of the root an escape, inside a swap."""
    if not os.path.exists("/proc/self/fd"):
        pytest.fail("this test needs Linux /proc")
    path = str(ws / "pkg" / "a.py")
    os.rename(ws / "pkg", ws / "pkg.old")
    os.symlink(ws.parent / "outside", ws / "pkg")
    with pytest.raises(EscapedError, match="outside the workspace"):
        read_guarded(path, root=str(ws))
    os.unlink(ws / "pkg")
    os.symlink(ws / "other", ws / "pkg")
    with pytest.raises(SwappedError, match="not at the path checked"):
        read_guarded(path, root=str(ws))
    with pytest.raises(SwappedError):  # without a root, the place must still be the path asked for
        hash_guarded(path)


def test_the_size_bound(ws: Path) -> None:
    path = str(ws / "pkg" / "a.py")
    with pytest.raises(TooLargeError):
        read_guarded(path, root=str(ws), max_bytes=len(DATA) - 1)
    assert read_guarded(path, root=str(ws), max_bytes=len(DATA)) == DATA


def test_open_guarded_hands_back_an_fd_and_its_stat(ws: Path) -> None:
    path = str(ws / "pkg" / "a.py")
    fd, st = open_guarded(path, root=str(ws))
    try:
        assert st.st_ino == os.stat(path).st_ino
        assert os.read(fd, 100) == DATA
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_not_found_passes_through_as_the_oserror(ws: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_guarded(str(ws / "pkg" / "gone.py"), root=str(ws))
