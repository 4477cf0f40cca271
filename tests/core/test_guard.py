"""The one guarded open for workspace files (`anchorfs.core.guard`), on real files: what it refuses,
with which error, and that it reads and hashes what it accepts exactly."""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorfs.core.guard import (
    EscapedError,
    GuardError,
    NotRegularError,
    SwappedError,
    TooLargeError,
    hash_guarded,
    open_guarded,
    read_guarded,
)
from anchorfs.core.errors import AnchorError, UnsafePathError

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


# -- the batch re-read in C (`_statmatch.reread`): the same refusals as the guarded open ---------

def _key(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@pytest.fixture
def reread():  # type: ignore[no-untyped-def]
    """`_statmatch.reread`: openat2 beneath the root with no link on the way (Linux 5.6+)."""
    from anchorfs.drift import _statmatch

    if not hasattr(_statmatch, "reread"):
        pytest.fail("anchorfs.drift._statmatch.reread is not built (Linux builds it)")

    def run(root: Path, rels: list[str], keys: list[tuple[int, int, int, int]], limit: int = 1 << 20):
        return _statmatch.reread(str(root), rels, _statmatch.pack(keys), limit)

    return run


def test_reread_reads_exactly_what_the_guarded_open_accepts(ws: Path, reread) -> None:  # type: ignore[no-untyped-def]
    (ws / "empty.py").write_bytes(b"")
    rels = ["pkg/a.py", "other/a.py", "empty.py"]
    got = reread(ws, rels, [_key(ws / r) for r in rels])
    assert got == [DATA, b"other\n", b""]
    assert got == [read_guarded(str(ws / r), root=str(ws)) for r in rels]


def test_reread_refuses_every_file_the_guarded_open_refuses(ws: Path, reread) -> None:  # type: ignore[no-untyped-def]
    good = _key(ws / "pkg" / "a.py")
    os.symlink(ws.parent / "outside", ws / "linkdir")  # a folder on the way that leads out
    os.symlink(ws / "pkg", ws / "inner")  # one that stays inside: still not the path asked for
    os.symlink(ws / "pkg" / "a.py", ws / "last.py")  # a link at the last name
    os.mkfifo(ws / "fifo")
    (ws / ".AnchorFS").mkdir()
    (ws / ".AnchorFS" / "x").write_bytes(DATA)
    cases = {
        "linkdir/a.py": _key(ws.parent / "outside" / "a.py"),
        "inner/a.py": good,
        "last.py": good,
        "fifo": _key(ws / "fifo"),
        ".anchorfs/ledger.jsonl": _key(ws / ".anchorfs" / "ledger.jsonl"),
        ".AnchorFS/x": _key(ws / ".AnchorFS" / "x"),
        "../outside/a.py": _key(ws.parent / "outside" / "a.py"),
        "pkg/../pkg/a.py": good,
        "/etc/hostname": good,
        "gone.py": good,
        "pkg": _key(ws / "pkg"),
    }
    rels = list(cases)
    assert reread(ws, rels, list(cases.values())) == [None] * len(rels)
    # a stat that is not the file's now: each field alone refuses it
    for field in range(4):
        off = list(good)
        off[field] += 1
        assert reread(ws, ["pkg/a.py"], [tuple(off)]) == [None]
    assert reread(ws, ["pkg/a.py"], [good], limit=len(DATA) - 1) == [None]  # over the bound: never opened
    assert reread(ws, ["pkg/a.py"], [good], limit=len(DATA)) == [DATA]


def test_reread_gives_up_the_batch_where_it_cannot_judge(ws: Path, tmp_path: Path, reread) -> None:  # type: ignore[no-untyped-def]
    good = _key(ws / "pkg" / "a.py")
    os.symlink(ws, tmp_path / "wslink")
    assert reread(tmp_path / "wslink", ["pkg/a.py"], [good]) is None  # a root that is not its realpath
    assert reread(ws, ["pkg/a.py", "pkg/a\0.py"], [good, good]) is None  # a name C cannot pass
    assert reread(ws, ["pkg/a.py", "\udcff/a.py"], [good, good]) is None
    assert reread(ws, [], []) == []
    with pytest.raises(ValueError):
        reread(ws, ["pkg/a.py", "other/a.py"], [good])
    (ws / "é").mkdir()
    (ws / "é" / "a.py").write_bytes(DATA)  # a first part only Python can fold: left to it
    assert reread(ws, ["é/a.py"], [_key(ws / "é" / "a.py")]) == [None]


def test_reread_threads_split_a_large_batch_and_agree(ws: Path, reread) -> None:  # type: ignore[no-untyped-def]
    rels = []
    for i in range(1300):  # three shares of 512 and more
        rel = f"many/f{i}.txt"
        (ws / "many").mkdir(exist_ok=True)
        (ws / rel).write_bytes(b"%d\n" % i)
        rels.append(rel)
    keys = [_key(ws / r) for r in rels]
    wrong = {0, 511, 512, 1023, 1299}
    for i in wrong:
        keys[i] = (keys[i][0], keys[i][1] + 1, *keys[i][2:])
    got = reread(ws, rels, keys)
    assert [i for i, data in enumerate(got) if data is None] == sorted(wrong)
    assert all(data == b"%d\n" % i for i, data in enumerate(got) if data is not None)


_NAMES = ["a.py", "b", "c.txt", ".anchorfs", ".AnchorFS", "..", ".", "é", "d"]


@given(st.lists(st.tuples(st.sampled_from(["file", "dir", "link_in", "link_out", "link_up", "fifo"]),
                          st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3)), min_size=1, max_size=12),
       st.lists(st.lists(st.sampled_from([*_NAMES, ""]), min_size=1, max_size=4), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_reread_reads_a_file_exactly_when_it_is_plainly_there(tmp_path_factory: pytest.TempPathFactory,
                                                             made: list[tuple[str, list[str]]],
                                                             asked: list[list[str]]) -> None:
    """Over random trees of files, folders, links (inside, out, up) and FIFOs: `reread` returns a
    file's bytes exactly when its path is plain, outside the state folder, reached without any
    link, a regular file, and its stat is the key given; else None. Never anything else."""
    from anchorfs.drift import _statmatch
    from anchorfs.core.guard import is_state_name

    top = tmp_path_factory.mktemp("tree")
    root = top / "ws"
    root.mkdir()
    (top / "outside").mkdir()
    (top / "outside" / "a.py").write_bytes(b"out\n")
    for kind, parts in made:
        path = root.joinpath(*parts)
        if not os.path.realpath(path).startswith(os.path.realpath(root) + "/") or os.path.lexists(path):
            continue  # outside, or made already
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                path.write_bytes(("/".join(parts) + "\n").encode())
            elif kind == "dir":
                path.mkdir()
            elif kind == "link_in":
                path.symlink_to(root / "b")
            elif kind == "link_out":
                path.symlink_to(top / "outside")
            elif kind == "link_up":
                path.symlink_to("..")
            else:
                os.mkfifo(path)
        except OSError:
            continue
    real_root = os.path.realpath(root)
    # what was made, a child of each (through a folder or a link), and the random paths
    rels = [q for _, parts in made for q in ("/".join(parts), "/".join(parts) + "/a.py")]
    rels += ["/".join(parts) for parts in asked]
    keys = []
    want: list[bytes | None] = []
    for rel in rels:
        full = os.path.join(real_root, rel)
        try:
            st_ = os.lstat(full)
            keys.append((st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino))
        except OSError:
            keys.append((0, 0, 0, 0))
            want.append(None)
            continue
        parts = rel.split("/")
        plain = rel != "" and not rel.startswith("/") and "" not in parts and "." not in parts and ".." not in parts
        ascii_first = parts[0].isascii()
        linked = os.path.realpath(full) != full
        regular = stat.S_ISREG(st_.st_mode)
        ok = plain and ascii_first and not is_state_name(parts[0]) and not linked and regular
        want.append(Path(full).read_bytes() if ok else None)
    got = _statmatch.reread(real_root, rels, _statmatch.pack(keys), 1 << 20)
    assert got == want, list(zip(rels, got, want))
