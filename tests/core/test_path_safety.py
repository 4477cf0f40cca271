"""The path-safety matrix, at write time and at check time: symlink chains out of the root,
loops, dangling links, a folder swapped for a link after anchoring, links into `.anchorfs/`,
case and Unicode-normalization tricks, very long paths, names that are not UTF-8.

Each case must end in a clear error (write) or verdict (check), and none may read a byte
outside the root. That is proven, not assumed: an audit hook (`sys.addaudithook`) sees every
`open` Python makes (builtins.open, os.open, and so the hash functions that read through
them), resolves the path at that instant as the open would (with O_NOFOLLOW a link at the
last name is not followed) and, when it lands in a forbidden zone (the folder outside the root
holding the bait files; `.anchorfs/` for the anchor-reading layer) or, with a blocking open, on
a FIFO, records it and refuses the open, so the bait is never read and a FIFO never blocks.
The swap-after-check cases at the end swap the file at the instant of the open itself.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

import anchorfs
from anchorfs.anchor.anchors import STATE_DIR, parse_markers, parse_spec, take
from anchorfs.drift import DriftChecker, DriftReport
from anchorfs.core.errors import AnchorError, AnchorfsError, UnsafePathError
from anchorfs.drift.hashcache import HashCache, sha256_bytes
from anchorfs.core.model import AnchorRef, Drift, Memory, Verdict, new_id, utcnow

APP = b"def handler(event):\n    return event['body']\n"
UTIL = b"def helper():\n    return 42\n\n\ndef other():\n    return 0\n"
NFC = unicodedata.normalize("NFC", "caf\u00e9.py")
NFD = unicodedata.normalize("NFD", NFC)
assert NFC != NFD


# --------------------------------------------------------------------------- the guard


@dataclass
class Guard:
    zones: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    active: bool = False


GUARD = Guard()


def _reaches(path: str, flags: int) -> str:
    """What an open of `path` with `flags` would touch: with O_NOFOLLOW a link at the last name
    is refused by the kernel, so only the folders on the way are followed."""
    if flags & os.O_NOFOLLOW:
        head, tail = os.path.split(os.path.abspath(path))
        return os.path.join(os.path.realpath(head), tail)
    return os.path.realpath(path)


def _audit(event: str, args: tuple[object, ...]) -> None:
    if not GUARD.active or event != "open":
        return
    target = args[0]
    if target is None or isinstance(target, int):
        return  # an fd: its path was checked when it was opened
    path = os.fsdecode(target)  # type: ignore[arg-type]
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    real = _reaches(path, flags)  # realpath and stat fire no `open` event: no recursion
    GUARD.opened.append(real)
    bad = any(real == z or real.startswith(z + os.sep) for z in GUARD.zones)
    if not bad and not flags & os.O_NONBLOCK:  # a non-blocking open of a FIFO returns at once
        try:
            bad = stat.S_ISFIFO(os.stat(path).st_mode)
        except OSError:
            pass
    if bad:
        GUARD.violations.append(real)
        raise PermissionError(errno.EACCES, "path-safety guard: forbidden open", path)


sys.addaudithook(_audit)  # process-wide and permanent; inert while GUARD.active is False


@contextmanager
def guarded(*zones: Path) -> Iterator[Guard]:
    """Record every open; refuse (and record) any into `zones` or onto a FIFO."""
    GUARD.zones = [os.path.realpath(z) for z in zones]
    GUARD.opened, GUARD.violations = [], []
    GUARD.active = True
    try:
        yield GUARD
    finally:
        GUARD.active = False


# --------------------------------------------------------------------------- layout


@dataclass
class Layout:
    root: Path
    outside: Path

    @property
    def state(self) -> Path:
        return self.root / STATE_DIR

    @property
    def root_real(self) -> str:
        return os.path.realpath(self.root)


@pytest.fixture
def lay(tmp_path: Path) -> Layout:
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.py").write_bytes(APP)  # the same bytes as src/app.py: reading it would look fresh
    (outside / "pkg" / "util.py").write_bytes(UTIL)
    os.mkfifo(outside / "pipe")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_bytes(APP)
    (root / "lib").mkdir()
    (root / "lib" / "util.py").write_bytes(UTIL)
    anchorfs.init(root)
    (root / STATE_DIR / "ledger.jsonl").write_bytes(b"")  # present, so links to it resolve
    return Layout(root, outside)


def deep_file(base: Path, total: int, data: bytes = APP, part: int = 100) -> str:
    """Create a file whose absolute path is about `total` bytes long; returns it relative to base.

    Built with directory fds, so it works past PATH_MAX too."""
    depth = max(1, (total - len(os.fsencode(str(base))) - 10) // (part + 1))
    names = [f"{i:03d}" + "d" * (part - 3) for i in range(depth)]
    fd = os.open(base, os.O_RDONLY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        wfd = os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(wfd, data)
        os.close(wfd)
    finally:
        os.close(fd)
    return "/".join([*names, "f.py"])


def link(at: Path, target: str | Path, *, is_dir: bool = False) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, at, target_is_directory=is_dir)


# --------------------------------------------------------------------------- the guard works


def test_the_guard_refuses_and_records_reads_outside_and_fifos(lay: Layout) -> None:
    link(lay.root / "bait", lay.outside / "secret.py")
    os.mkfifo(lay.root / "fifo")
    with guarded(lay.outside) as g:
        with pytest.raises(PermissionError, match="guard"):
            open(lay.outside / "secret.py", "rb")
        with pytest.raises(PermissionError, match="guard"):
            os.open(lay.root / "bait", os.O_RDONLY)
        with pytest.raises(PermissionError, match="guard"):  # would block forever if opened
            open(lay.root / "fifo", "rb")
        with open(lay.root / "src" / "app.py", "rb") as fh:
            assert fh.read() == APP
    assert g.violations == [os.path.realpath(lay.outside / "secret.py")] * 2 + [os.path.realpath(lay.root / "fifo")]
    assert os.path.realpath(lay.root / "src" / "app.py") in g.opened
    with open(lay.outside / "secret.py", "rb"):  # inert once the block is left
        pass


# --------------------------------------------------------------------------- write time

# name -> (set-up returning (content, anchor specs), error class, message fragment)
WriteCase = tuple[Callable[[Layout], tuple[str, list[str]]], type[AnchorfsError], str]


def _w(spec: str) -> Callable[[Layout], tuple[str, list[str]]]:
    return lambda lay: ("m", [spec])


def _chain_out(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "c", lay.outside / "secret.py")
    link(lay.root / "b", "c")
    link(lay.root / "a", lay.root / "b")
    return "m", ["a"]


def _relative_out(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "src" / "rel.py", "../../outside/secret.py")
    return "m", ["src/rel.py"]


def _dir_out(spec: str) -> Callable[[Layout], tuple[str, list[str]]]:
    def setup(lay: Layout) -> tuple[str, list[str]]:
        link(lay.root / "vendor", lay.outside / "pkg", is_dir=True)
        return "m", [spec]
    return setup


def _marker_out(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "vendor", lay.outside / "pkg", is_dir=True)
    return "see @anchor(file=vendor/util.py, symbol=helper)", []


def _to(target_of: Callable[[Layout], str | Path], spec: str = "l") -> Callable[[Layout], tuple[str, list[str]]]:
    def setup(lay: Layout) -> tuple[str, list[str]]:
        link(lay.root / spec, target_of(lay))
        return "m", [spec]
    return setup


def _loop(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "loop1", "loop2")
    link(lay.root / "loop2", "loop1")
    return "m", ["loop1"]


def _dir_loop(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "d1", "d2", is_dir=True)
    link(lay.root / "d2", "d1", is_dir=True)
    return "m", ["d1/x.py"]


def _state_dir_link(lay: Layout) -> tuple[str, list[str]]:
    link(lay.root / "st", lay.state, is_dir=True)
    return "m", ["st/ledger.jsonl"]


def _state_case_real_dir(lay: Layout) -> tuple[str, list[str]]:
    (lay.root / ".AnchorFS").mkdir()  # a separate folder here; the very ledger on macOS or Windows
    (lay.root / ".AnchorFS" / "ledger.jsonl").write_bytes(b"{}\n")
    return "m", [".AnchorFS/ledger.jsonl"]


def _nfd_for_nfc(lay: Layout) -> tuple[str, list[str]]:
    (lay.root / NFC).write_bytes(APP)
    return "m", [NFD]


def _long_path(lay: Layout) -> tuple[str, list[str]]:
    return "m", [deep_file(lay.root, 4300)]


def _non_utf8_name(lay: Layout) -> tuple[str, list[str]]:
    (Path(os.fsdecode(os.fsencode(lay.root) + b"/caf\xe9.py"))).write_bytes(APP)
    return "m", [os.fsdecode(b"caf\xe9.py")]


def _non_utf8_dir(lay: Layout) -> tuple[str, list[str]]:
    d = Path(os.fsdecode(os.fsencode(lay.root) + b"/\xff\xfe"))
    d.mkdir()
    (d / "x.py").write_bytes(APP)
    return "m", [os.fsdecode(b"\xff\xfe/x.py")]


def _link_to_non_utf8(lay: Layout) -> tuple[str, list[str]]:
    (Path(os.fsdecode(os.fsencode(lay.root) + b"/caf\xe9.py"))).write_bytes(APP)
    link(lay.root / "ok.py", os.fsdecode(b"caf\xe9.py"))  # the name given is fine, the target's is not
    return "m", ["ok.py"]


def _fifo_inside(lay: Layout) -> tuple[str, list[str]]:
    os.mkfifo(lay.root / "pipe")
    return "m", ["pipe"]


OUT = "outside the workspace"
STATE = r"\.anchorfs/ folder"
LOOPED = "symbolic links"

WRITE_CASES: dict[str, WriteCase] = {
    "dotdot": (_w("../outside/secret.py"), UnsafePathError, OUT),
    "dotdot-after-a-folder": (_w("src/../../outside/secret.py"), UnsafePathError, OUT),
    "absolute-outside": (lambda lay: ("m", [str(lay.outside / "secret.py")]), UnsafePathError, OUT),
    "symlink-chain-out": (_chain_out, UnsafePathError, OUT),
    "relative-symlink-out": (_relative_out, UnsafePathError, OUT),
    "folder-link-out": (_dir_out("vendor/util.py"), UnsafePathError, OUT),
    "symbol-through-folder-link-out": (_dir_out("vendor/util.py#helper"), UnsafePathError, OUT),
    "lines-through-folder-link-out": (_dir_out("vendor/util.py:1-2"), UnsafePathError, OUT),
    "marker-through-folder-link-out": (_marker_out, UnsafePathError, OUT),
    "link-to-the-parent": (_to(lambda lay: "..", "up"), UnsafePathError, OUT),
    "through-a-link-to-the-parent": (lambda lay: (link(lay.root / "up", ".."), ("m", ["up/outside/secret.py"]))[1],
                                     UnsafePathError, OUT),
    "link-to-a-fifo-outside": (_to(lambda lay: lay.outside / "pipe"), UnsafePathError, OUT),
    "dangling-link-out": (_to(lambda lay: lay.outside / "nothere.py"), UnsafePathError, OUT),
    "dangling-link-in": (_to(lambda lay: lay.root / "nothere.py"), AnchorError, "does not exist"),
    "symlink-loop": (_loop, AnchorError, LOOPED),
    "self-loop": (_to(lambda lay: "l"), AnchorError, LOOPED),
    "folder-loop": (_dir_loop, AnchorError, LOOPED),
    "link-to-the-root": (_to(lambda lay: lay.root), AnchorError, "workspace root"),
    "the-root": (_w("."), AnchorError, "workspace root"),
    "state-folder": (_w(".anchorfs/ledger.jsonl"), UnsafePathError, STATE),
    "state-folder-itself": (_w(".anchorfs"), UnsafePathError, STATE),
    "state-through-dotdot": (_w("src/../.anchorfs/ledger.jsonl"), UnsafePathError, STATE),
    "state-folder-link": (_state_dir_link, UnsafePathError, STATE),
    "state-file-link": (_to(lambda lay: lay.state / "ledger.jsonl"), UnsafePathError, STATE),
    "state-relative-link": (_to(lambda lay: "../.anchorfs/ledger.jsonl", "src/l"), UnsafePathError, STATE),
    "state-upper-case": (_w(".ANCHORFS/ledger.jsonl"), UnsafePathError, STATE),
    "state-mixed-case-real-folder": (_state_case_real_dir, UnsafePathError, STATE),
    "state-long-s": (_w(".anchorf\u017f/ledger.jsonl"), UnsafePathError, STATE),
    "state-fullwidth": (_w("\uff0e\uff41nchorfs/ledger.jsonl"), UnsafePathError, STATE),
    "nfd-spelling-of-an-nfc-file": (_nfd_for_nfc, AnchorError, "does not exist"),
    "name-over-255-bytes": (_w("a" * 300 + ".py"), AnchorError, "File name too long"),
    "path-over-path-max": (_long_path, AnchorError, "File name too long"),
    "name-not-utf8": (_non_utf8_name, AnchorError, "not valid UTF-8"),
    "folder-not-utf8": (_non_utf8_dir, AnchorError, "not valid UTF-8"),
    "link-to-a-name-not-utf8": (_link_to_non_utf8, AnchorError, "not valid UTF-8"),
    "nul-byte": (_w("src/app.py\0.txt"), UnsafePathError, "NUL"),
    "fifo-inside": (_fifo_inside, AnchorError, "not a regular file"),
    "a-folder": (_w("src"), AnchorError, "is a directory"),
}


@pytest.mark.parametrize("case", WRITE_CASES)
def test_write_time_matrix(lay: Layout, case: str) -> None:
    setup, error, fragment = WRITE_CASES[case]
    content, specs = setup(lay)
    refs = [parse_spec(s) for s in specs] + parse_markers(content)
    assert refs
    # The anchor layer alone may not even open a file in `.anchorfs/`.
    with guarded(lay.outside, lay.state) as g:
        with pytest.raises(error, match=fragment) as info:
            for ref in refs:
                take(lay.root_real, ref)
    assert g.violations == []
    message = str(info.value)
    assert "\n" not in message and len(message) < 6000
    # Through the SDK: the same error, nothing written, nothing read outside.
    with anchorfs.open(lay.root) as ws:
        with guarded(lay.outside) as g:
            with pytest.raises(error, match=fragment):
                ws.record(content, anchors=specs)
        assert g.violations == []
        assert ws.list() == []
    assert (lay.state / "ledger.jsonl").read_bytes() == b""
    assert not (lay.state / "memories.lance").exists()


def test_links_that_stay_inside_are_followed_and_stored_canonically(lay: Layout) -> None:
    link(lay.root / "alias2", "src/app.py")
    link(lay.root / "alias", lay.root / "alias2")
    link(lay.root / "shared", "lib", is_dir=True)
    with guarded(lay.outside, lay.state) as g:
        a = take(lay.root_real, parse_spec("alias"))
        b = take(lay.root_real, parse_spec("shared/util.py#helper"))
    assert g.violations == []
    assert os.path.realpath(lay.root / "src" / "app.py") in g.opened  # the guard did see the read
    assert (a.path, b.path, b.symbol) == ("src/app.py", "lib/util.py", "helper")


def test_nfc_and_nfd_names_are_two_files_each_anchored_to_its_own_bytes(lay: Layout) -> None:
    (lay.root / NFC).write_bytes(b"nfc\n")
    (lay.root / NFD).write_bytes(b"nfd\n")
    with anchorfs.open(lay.root) as ws:
        a = ws.record("nfc", anchors=[NFC]).anchors[0]
        b = ws.record("nfd", anchors=[NFD]).anchors[0]
        assert (a.path, b.path) == (NFC, NFD)
        assert a.sha256 != b.sha256
        (lay.root / NFD).unlink()
        report = {m.memory.content: m.checks[0].verdict for m in ws.drift().memories}
    assert report == {"nfc": Verdict.FRESH, "nfd": Verdict.DELETED}
    raw = (lay.state / "ledger.jsonl").read_bytes()
    assert NFC.encode() in raw and NFD.encode() in raw  # stored as given, not normalized


def test_unicode_names_and_a_long_path_under_the_limit_work(lay: Layout) -> None:
    (lay.root / "日本").mkdir()
    (lay.root / "日本" / "файл.py").write_bytes(UTIL)
    deep = deep_file(lay.root, 3900)
    with anchorfs.open(lay.root) as ws:
        m = ws.record("unicode and deep", anchors=["日本/файл.py#helper", deep])
        assert [a.path for a in m.anchors] == ["日本/файл.py", deep]
        assert [c.verdict for c in ws.check(m).checks] == [Verdict.FRESH, Verdict.FRESH]


# --------------------------------------------------------------------------- check time


@dataclass(frozen=True)
class CheckCase:
    files: dict[str, bytes]  # created under the case's folder before anchoring
    specs: list[str]  # relative to the case's folder
    mutate: Callable[[Layout, Path], None]
    verdict: Verdict


def _swap_for_link(name: str, target: Callable[[Layout, Path], str | Path]) -> Callable[[Layout, Path], None]:
    def mutate(lay: Layout, c: Path) -> None:
        path = c / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        os.symlink(target(lay, c), path)
    return mutate


def _move_out_and_link(name: str) -> Callable[[Layout, Path], None]:
    def mutate(lay: Layout, c: Path) -> None:
        away = lay.outside / f"moved-{c.name}"
        (c / name).rename(away)  # same bytes outside: reading them would wrongly say fresh
        os.symlink(away, c / name, target_is_directory=True)
    return mutate


def _move_in_and_link(lay: Layout, c: Path) -> None:
    (c / "pkg").rename(c / "real_pkg")
    os.symlink("real_pkg", c / "pkg", target_is_directory=True)


def _file_to_fifo(lay: Layout, c: Path) -> None:
    (c / "f.py").unlink()
    os.mkfifo(c / "f.py")


def _file_to_dir(lay: Layout, c: Path) -> None:
    (c / "f.py").unlink()
    (c / "f.py").mkdir()


def _file_to_loop(lay: Layout, c: Path) -> None:
    (c / "f.py").unlink()
    os.symlink("g.py", c / "f.py")
    os.symlink("f.py", c / "g.py")


def _folder_to_loop(lay: Layout, c: Path) -> None:
    shutil.rmtree(c / "pkg")
    os.symlink("pkg2", c / "pkg", target_is_directory=True)
    os.symlink("pkg", c / "pkg2", target_is_directory=True)


def _nfc_to_nfd(lay: Layout, c: Path) -> None:
    (c / NFC).rename(c / NFD)


def _case_rename(lay: Layout, c: Path) -> None:
    (c / "pkg").rename(c / "PKG")


def _grow_too_long(lay: Layout, c: Path) -> None:
    first = next(p for p in c.iterdir() if p.is_dir())
    deeper = c / ("x" * 200)  # the tree moved 201 bytes deeper, behind a link: past PATH_MAX
    deeper.mkdir()
    first.rename(deeper / first.name)
    os.symlink(deeper / first.name, first, target_is_directory=True)


def _to_non_utf8_link(lay: Layout, c: Path) -> None:
    target = os.fsencode(c) + b"/\xff.py"
    Path(os.fsdecode(target)).write_bytes(APP)
    (c / "f.py").unlink()
    os.symlink(os.fsdecode(b"\xff.py"), c / "f.py")


ONE = {"f.py": APP}
PKG = {"pkg/util.py": UTIL}
CHECK_CASES: dict[str, CheckCase] = {
    "file-to-symlink-chain-out": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: c / "hop"), Verdict.UNSAFE),
    "file-to-relative-link-out": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: "../../outside/secret.py"), Verdict.UNSAFE),
    "folder-swapped-for-link-out": CheckCase(PKG, ["pkg/util.py", "pkg/util.py#helper", "pkg/util.py:1-2"], _move_out_and_link("pkg"), Verdict.UNSAFE),
    "parent-folder-swapped-for-link-out": CheckCase({"a/b/f.py": APP}, ["a/b/f.py"], _move_out_and_link("a"), Verdict.UNSAFE),
    "folder-swapped-for-link-to-state": CheckCase({"pkg/ledger.jsonl": b"x\n"}, ["pkg/ledger.jsonl"], _swap_for_link("pkg", lambda lay, c: lay.state), Verdict.UNSAFE),
    "file-swapped-for-link-to-ledger": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: lay.state / "ledger.jsonl"), Verdict.UNSAFE),
    "file-to-dangling-link-out": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: lay.outside / "nothere.py"), Verdict.UNSAFE),
    "file-to-link-to-fifo-out": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: lay.outside / "pipe"), Verdict.UNSAFE),
    "file-to-link-to-parent-folder": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: lay.root.parent), Verdict.UNSAFE),
    "file-to-link-to-the-root": CheckCase(ONE, ["f.py"], _swap_for_link("f.py", lambda lay, c: lay.root), Verdict.UNREADABLE),
    "file-to-symlink-loop": CheckCase(ONE, ["f.py"], _file_to_loop, Verdict.UNREADABLE),
    "folder-to-symlink-loop": CheckCase(PKG, ["pkg/util.py"], _folder_to_loop, Verdict.UNREADABLE),
    "file-to-fifo": CheckCase(ONE, ["f.py"], _file_to_fifo, Verdict.UNREADABLE),
    "file-to-folder": CheckCase(ONE, ["f.py"], _file_to_dir, Verdict.UNREADABLE),
    "folder-moved-past-path-max": CheckCase({}, [], _grow_too_long, Verdict.UNREADABLE),
    # bytes of its own: a copy of APP elsewhere in the tree would be found as where it went
    "file-to-dangling-link-in": CheckCase({"f.py": APP + b"# only here\n"}, ["f.py"], _swap_for_link("f.py", lambda lay, c: "nothere.py"), Verdict.DELETED),
    # renamed, the bytes kept: found at the new name (issue 18), never by folding names
    "nfc-name-renamed-to-nfd": CheckCase({NFC: APP}, [NFC], _nfc_to_nfd, Verdict.MOVED),
    "folder-renamed-to-upper-case": CheckCase(PKG, ["pkg/util.py"], _case_rename, Verdict.MOVED),
    "folder-swapped-for-link-inside": CheckCase(PKG, ["pkg/util.py", "pkg/util.py#helper"], _move_in_and_link, Verdict.FRESH),
    "file-to-link-inside-same-bytes": CheckCase({"f.py": APP, "g.py": APP}, ["f.py"], _swap_for_link("f.py", lambda lay, c: "g.py"), Verdict.FRESH),
    "file-to-link-to-a-name-not-utf8": CheckCase(ONE, ["f.py"], _to_non_utf8_link, Verdict.FRESH),
}


def _prepare(lay: Layout, name: str, case: CheckCase) -> tuple[Path, list[str]]:
    c = lay.root / f"c-{name}"
    c.mkdir()
    for rel, data in case.files.items():
        (c / rel).parent.mkdir(parents=True, exist_ok=True)
        (c / rel).write_bytes(data)
    specs = [f"c-{name}/{s}" for s in case.specs]
    if name == "folder-moved-past-path-max":
        specs = [f"c-{name}/" + deep_file(c, 4000)]
    if name == "file-to-symlink-chain-out":
        os.symlink(lay.outside / "secret.py", c / "hop")
    return c, specs


@pytest.mark.parametrize("name", CHECK_CASES)
def test_check_time_matrix_in_the_drift_checker(lay: Layout, tmp_path: Path, name: str) -> None:
    case = CHECK_CASES[name]
    c, specs = _prepare(lay, name, case)
    refs = [take(lay.root_real, parse_spec(s)) for s in specs]
    case.mutate(lay, c)
    now = utcnow()
    memory = Memory(id=new_id(), content=name, anchors=tuple(refs), recorded_at=now, valid_from=now)
    cache = HashCache(tmp_path / "cache" / "manifest.json")  # so nothing in .anchorfs/ is opened
    with guarded(lay.outside, lay.state) as g:
        md = DriftChecker(lay.root_real, cache).check(memory)
    assert g.violations == []
    assert [c.verdict for c in md.checks] == [case.verdict] * len(refs), [c.detail for c in md.checks]
    for check in md.checks:
        assert check.detail and "\n" not in check.detail
    expected = {Verdict.FRESH: Drift.FRESH, Verdict.MOVED: Drift.FRESH,
                Verdict.DELETED: Drift.STALE}.get(case.verdict, Drift.UNKNOWN)
    if case.verdict is Verdict.MOVED:  # at the renamed path itself, not at a copy elsewhere
        assert [c.path_now for c in md.checks] == [f"c-{name}/" + ("PKG/util.py" if "case" in name else NFD)]
    assert md.drift is expected  # unsafe and unreadable are never evidence of staleness


# A hand-edited (or hostile) ledger: anchor paths that take() could never have produced, each
# carrying the hash of the outside bait, so following one would wrongly come back `fresh`.
LEDGER_PATHS = {
    "../outside/secret.py": Verdict.UNSAFE,
    "src/../../outside/secret.py": Verdict.UNSAFE,
    "/etc/passwd": Verdict.UNSAFE,
    "OUTSIDE_ABS": Verdict.UNSAFE,
    ".anchorfs/ledger.jsonl": Verdict.UNSAFE,
    ".ANCHORFS/ledger.jsonl": Verdict.UNSAFE,
    ".anchorf\u017f/ledger.jsonl": Verdict.UNSAFE,
    "src/app.py\0": Verdict.UNSAFE,
    ".anchorfs": Verdict.UNSAFE,
    "": Verdict.UNREADABLE,
}


@pytest.mark.parametrize("path", LEDGER_PATHS)
def test_anchor_paths_no_write_could_produce_are_refused_at_check_time(lay: Layout, tmp_path: Path, path: str) -> None:
    if path == "OUTSIDE_ABS":
        path = str(lay.outside / "secret.py")
    sha = take(lay.root_real, parse_spec("src/app.py")).sha256  # equal to the bait's hash
    now = utcnow()
    memory = Memory(id=new_id(), content="hostile", anchors=(AnchorRef(path=path, sha256=sha),),
                    recorded_at=now, valid_from=now)
    with guarded(lay.outside, lay.state) as g:
        md = DriftChecker(lay.root_real, HashCache(tmp_path / "m.json")).check(memory)
    assert g.violations == []
    want = LEDGER_PATHS.get(path, Verdict.UNSAFE)
    assert md.checks[0].verdict is want, md.checks[0].detail
    assert md.drift is Drift.UNKNOWN


def test_check_time_matrix_through_the_sdk_and_the_cli(lay: Layout) -> None:
    """Every case in one workspace: drift, query, check, verify and the CLI give the verdicts,
    never fail, and never read outside; then re-anchoring an unsafe memory is refused."""
    prepared = {name: _prepare(lay, name, case) for name, case in CHECK_CASES.items()}
    with anchorfs.open(lay.root) as ws:
        mems = ws.record_many([{"content": f"case {name} anchored memory", "anchors": specs}
                               for name, (_, specs) in prepared.items()])
        by_name = dict(zip(CHECK_CASES, mems))
        for name, case in CHECK_CASES.items():
            case.mutate(lay, prepared[name][0])
        tricky = " ".join(f"`c-{n}/{s}`" for n, case in CHECK_CASES.items() for s in case.specs if "#" not in s)
        ws.record(f"paths named in prose: {tricky}")
        with guarded(lay.outside) as g:
            report = {md.memory.id: md for md in ws.drift().memories}
            hits = {h.memory.id: h for h in ws.query("case anchored memory", k=len(mems))}
            checked = {m.id: ws.check(m) for m in mems}
            verify = ws.verify()
        assert g.violations == []
        assert verify.results  # the prose memory was checked, not skipped
        for name, case in CHECK_CASES.items():
            m = by_name[name]
            for seen in (report[m.id].checks, hits[m.id].checks, checked[m.id].checks):
                assert {c.verdict for c in seen} == {case.verdict}, (name, [c.detail for c in seen])
            if case.verdict is Verdict.UNSAFE:
                assert hits[m.id].drift is Drift.UNKNOWN and "UNKNOWN" in hits[m.id].envelope
                with pytest.raises(AnchorError, match="cannot re-anchor"):
                    ws.reanchor(m.id)
        unsafe = by_name["folder-swapped-for-link-out"].id
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(lay.root), "--json", "drift"],
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")})
    assert proc.returncode == 90, proc.stderr  # stale ones exist (deleted), and no crash
    assert "Traceback" not in proc.stderr
    data = orjson.loads(proc.stdout)
    row = next(r for r in data["memories"] if r["id"] == unsafe)
    assert row["drift"] == "unknown" and {a["verdict"] for a in row["anchors"]} == {"unsafe"}


def test_cli_refuses_a_name_that_is_not_utf8_in_one_line(lay: Layout) -> None:
    (Path(os.fsdecode(os.fsencode(lay.root) + b"/caf\xe9.py"))).write_bytes(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    proc = subprocess.run([sys.executable.encode(), b"-m", b"anchorfs", b"--root", os.fsencode(lay.root),
                           b"record", b"about the cafe file", b"--anchor", b"caf\xe9.py"],
                          capture_output=True, timeout=120, env=env)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "not valid UTF-8" in err
    assert (lay.state / "ledger.jsonl").read_bytes() == b""


def test_a_workspace_in_a_folder_not_named_in_utf8_refuses_a_write_in_one_line(tmp_path: Path) -> None:
    root = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    root.mkdir()
    (root / "app.py").write_bytes(APP)
    anchorfs.init(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    proc = subprocess.run([sys.executable.encode(), b"-m", b"anchorfs", b"--root", os.fsencode(root),
                           b"record", b"about the app", b"--anchor", b"app.py"],
                          capture_output=True, timeout=120, env=env)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "LanceDB cannot open" in err and "not valid UTF-8" in err
    assert not (root / ".anchorfs" / "ledger.jsonl").exists() or (root / ".anchorfs" / "ledger.jsonl").read_bytes() == b""


# --------------------------------------------------------------------------- swap after check
#
# The race the checks above cannot see: the path is checked, and between that check and the
# open the file becomes a link out of the root or a FIFO. Driven deterministically: a second
# audit hook swaps the file at the very instant of the `open` made from the named site (after
# every stat and realpath the code did), records where each open lands, and the call runs in a
# thread joined with a timeout, so a blocking read fails the test instead of hanging it.

BAIT_DEFS = b"def secret_helper():\n    return 'exfiltrated'\n\n\ndef handler(event):\n    return 0\n"
HANG_SECONDS = 60.0
"""A hang detector, not a speed assertion: a guarded call returns in well under a second."""


@dataclass
class Swap:
    active: bool = False
    target: str = ""  # absolute path of the file to swap
    site: tuple[str, str] = ("", "")  # (module file name, function) the open must come from
    into: Callable[[str], None] | None = None
    fired: bool = False
    zone: str = ""  # where no open may land: the test's folder outside the workspace
    root: str = ""
    escaped: list[str] = field(default_factory=list)


SWAP = Swap()


def _from_site(site: tuple[str, str]) -> bool:
    module, func = site
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == func and os.path.basename(f.f_code.co_filename) == module:
            return True
        f = f.f_back  # type: ignore[assignment]
    return False


def _swap_audit(event: str, args: tuple[object, ...]) -> None:
    if not SWAP.active or event != "open":
        return
    target = args[0]
    if target is None or isinstance(target, int):
        return
    path = os.path.abspath(os.fsdecode(target))  # type: ignore[arg-type]
    if not SWAP.fired and path == SWAP.target and _from_site(SWAP.site):
        SWAP.fired = True
        assert SWAP.into is not None
        SWAP.into(path)  # symlink/mkfifo/rename fire no `open` event: no recursion
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    real = _reaches(path, flags)
    inside_root = real == SWAP.root or real.startswith(SWAP.root + os.sep)
    if not inside_root and (real == SWAP.zone or real.startswith(SWAP.zone + os.sep)):
        SWAP.escaped.append(real)


sys.addaudithook(_swap_audit)  # inert while SWAP.active is False


def _to_link(bait: Path) -> Callable[[str], None]:
    def swap(path: str) -> None:
        os.symlink(bait, path + ".swap")
        os.replace(path + ".swap", path)
    return swap


def _to_fifo(path: str) -> None:
    os.mkfifo(path + ".swap")
    os.replace(path + ".swap", path)


def _to_file(path: str) -> None:
    """Another regular file at the same name: the anchored lines now two lines lower."""
    with open(path + ".swap", "wb") as fh:
        fh.write(b"# moved\n# down\n" + APP)
    os.replace(path + ".swap", path)


def _unblock(path: str) -> None:
    """Give a reader stuck on the FIFO at `path` its EOF, so the thread can end."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def swapped_call(lay: Layout, rel: str, site: tuple[str, str], into: str, call: Callable[[], object]) -> object:
    """Run `call` with `rel` swapped (`into`: "link" out, or "fifo") at the open made from `site`;
    fail if it blocks, if the swap never happened there, or if any open landed outside the root."""
    target = os.path.join(lay.root_real, rel)
    bait = lay.outside / ("defs.py" if site[0] == "claims.py" else "secret.py")
    SWAP.target, SWAP.site, SWAP.fired = target, site, False
    SWAP.into = _to_fifo if into == "fifo" else _to_file if into == "file" else _to_link(bait)
    SWAP.zone, SWAP.root, SWAP.escaped = os.path.realpath(lay.outside.parent), lay.root_real, []
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    SWAP.active = True
    try:
        worker.start()
        worker.join(HANG_SECONDS)
    finally:
        SWAP.active = False
    if worker.is_alive():
        _unblock(target)
        worker.join(5)
        pytest.fail(f"blocked for {HANG_SECONDS:.0f}s at {site[0]}:{site[1]} on a file swapped for a {into}")
    assert SWAP.fired, f"the swap never happened at {site}: the test drives nothing"
    assert SWAP.escaped == [], f"opened outside the workspace: {SWAP.escaped}"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


@pytest.fixture
def swap_lay(lay: Layout) -> Layout:
    (lay.outside / "defs.py").write_bytes(BAIT_DEFS)
    return lay


SWAP_INTO = ["link", "fifo"]


def _edited_elsewhere(lay: Layout) -> None:
    """src/app.py changes after its first two lines: its hash moves, the anchored lines stay."""
    with open(lay.root / "src" / "app.py", "ab") as fh:
        fh.write(b"\n\ndef later():\n    return 1\n")


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_drift_read_of_a_changed_file(swap_lay: Layout, into: str) -> None:
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("the handler returns the body", anchors=["src/app.py:1-2"])
        _edited_elsewhere(swap_lay)
        report = swapped_call(swap_lay, "src/app.py", ("check.py", "_changed"), into, ws.drift)
        assert isinstance(report, DriftReport)
        (result,) = [r for r in report.memories if r.memory.id == m.id]
        (check,) = result.checks
        assert check.verdict is (Verdict.UNSAFE if into == "link" else Verdict.UNREADABLE), check.detail
        assert result.drift is Drift.UNKNOWN


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_query_read_of_a_changed_file(swap_lay: Layout, into: str) -> None:
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("the handler returns the body", anchors=["src/app.py:1-2"])
        _edited_elsewhere(swap_lay)
        hits = swapped_call(swap_lay, "src/app.py", ("check.py", "_changed"), into,
                            lambda: ws.query("handler body", k=3))
        assert isinstance(hits, list)
        (hit,) = [h for h in hits if h.memory.id == m.id]
        assert [c.verdict for c in hit.checks] == [Verdict.UNSAFE if into == "link" else Verdict.UNREADABLE]
        assert hit.drift is Drift.UNKNOWN


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_record_read_refuses_the_write(swap_lay: Layout, into: str) -> None:
    ledger = swap_lay.state / "ledger.jsonl"
    with anchorfs.open(swap_lay.root) as ws:
        before = ledger.read_bytes()
        with pytest.raises(AnchorError, match="outside the workspace" if into == "link" else "not a regular file"):
            swapped_call(swap_lay, "src/app.py", ("anchors.py", "_read_file"), into,
                         lambda: ws.record("the handler returns the body", anchors=["src/app.py:1-2"]))
        assert ledger.read_bytes() == before  # nothing written on refusal
        assert ws.list() == []


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_codetext_read_keeps_the_write_and_reads_nothing_outside(swap_lay: Layout, into: str) -> None:
    with anchorfs.open(swap_lay.root) as ws:
        m = swapped_call(swap_lay, "src/app.py", ("anchors.py", "_read"), into,
                         lambda: ws.record("the handler returns the body", anchors=["src/app.py:1-2"]))
        assert isinstance(m, Memory)
        assert m.anchors[0].sha256 == sha256_bytes(APP)  # taken before the swap
        assert [x.id for x in ws.list()] == [m.id]


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_verify_read_of_a_named_file(swap_lay: Layout, into: str) -> None:
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("requests go through `src/app.py#handler` first")
        report = swapped_call(swap_lay, "src/app.py", ("claims.py", "_in_file"), into, ws.verify)
        (result,) = [r for r in report.results if r.id == m.id]  # type: ignore[attr-defined]
        (claim,) = [c for c in result.claims if c.claim.value == "src/app.py#handler"]
        assert claim.verdict is Drift.UNKNOWN, claim.detail
        assert ("outside the workspace" if into == "link" else "not a regular file") in claim.detail


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_verify_symbol_parse(swap_lay: Layout, into: str) -> None:
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("the `secret_helper` function wraps `helper`")
        report = swapped_call(swap_lay, "src/app.py", ("claims.py", "_parse"), into, ws.verify)
        claims = {c.claim.value: c for r in report.results if r.id == m.id for c in r.claims}  # type: ignore[attr-defined]
        assert claims["helper"].verdict is Drift.FRESH  # the other files were still parsed
        assert "lib/util.py" in claims["helper"].detail
        # Defined only in the outside file the link points to: not a claim anchorfs can confirm.
        assert "secret_helper" not in claims or claims["secret_helper"].verdict is not Drift.FRESH


@pytest.mark.parametrize("into", SWAP_INTO)
def test_swap_at_the_history_working_tree_read(swap_lay: Layout, into: str) -> None:
    from conftest import git

    git(swap_lay.root, "init", "-q", "-b", "main")
    git(swap_lay.root, "add", "src", "lib")
    git(swap_lay.root, "commit", "-q", "-m", "code")
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("the handler returns the body", anchors=["src/app.py:1-2"])
        _edited_elsewhere(swap_lay)
        result = swapped_call(swap_lay, "src/app.py", ("tracker.py", "working_tree"), into, lambda: ws.bisect(m.id))
        assert result is not None
        assert result.culprit is None  # type: ignore[attr-defined]  # no evidence from the swapped file


def test_another_file_swapped_in_at_the_drift_read_is_checked_afresh(swap_lay: Layout) -> None:
    """The guarded open refuses the new inode (its hash was not the one taken); the re-check
    hashes and judges the file that is there now."""
    with anchorfs.open(swap_lay.root) as ws:
        m = ws.record("the handler returns the body", anchors=["src/app.py:1-2"])
        _edited_elsewhere(swap_lay)
        report = swapped_call(swap_lay, "src/app.py", ("check.py", "_changed"), "file", ws.drift)
        assert isinstance(report, DriftReport)
        (result,) = [r for r in report.memories if r.memory.id == m.id]
        (check,) = result.checks
        assert (check.verdict, check.lines_now) == (Verdict.MOVED, (3, 4)), check.detail
        assert result.drift is Drift.FRESH
