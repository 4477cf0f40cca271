"""A cloned repository with a link in `.anchorfs/` (issue 15, items 1 and 10a).

The ledger is meant to be committed, so `.anchorfs/` arrives with repositories other people
wrote, and git stores symlinks. A link at any state path (or the state folder itself a link)
must make every command fail in one line naming it, with nothing written anywhere: not the
link's target outside the clone, not a new file outside, not the clone itself.

One workspace is built once (one memory, real LanceDB) and copied into each case; every case
fails before LanceDB is opened.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import anchorfs
from anchorfs.core.errors import WorkspaceError
from anchorfs.ledger.log import Ledger
from anchorfs.core.statefs import FAULT_ENV
from anchorfs.agents.mcp import write_mcp_config

from conftest import anchored_clone, run_cli, tree_snapshot

VICTIM = b'{"someone else\'s": "data"}\nan unfinished last line'
APP = b"def handler(request):\n    return 'ok'\n"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return anchored_clone(tmp_path_factory, APP)


def _plant(clone: Path, work: Path, case: str) -> str:
    """Put the case's link in the clone; returns the path the error must name."""
    state = clone / ".anchorfs"
    (work / "victim.txt").write_bytes(VICTIM)
    if case == "state folder":
        shutil.copytree(state, work / "outside-state", symlinks=True)  # a plausible state folder, elsewhere
        shutil.rmtree(state)
        state.symlink_to(Path("..") / "outside-state", target_is_directory=True)
        return str(state)
    name, _, how = case.partition(" ")
    target = state / name
    if target.is_dir():
        shutil.copytree(target, work / "outside-store", symlinks=True)  # a real table LanceDB would open
        shutil.rmtree(target)
        target.symlink_to(Path("..") / ".." / "outside-store", target_is_directory=True)
    else:
        target.unlink(missing_ok=True)
        dest = "created-through-the-link" if how == "dangling" else "victim.txt"
        target.symlink_to(Path("..") / ".." / dest)
    return str(target)


CASES = [
    "ledger.jsonl", "ledger.jsonl dangling", "lock dangling", "lock", "manifest.json", "drift.json",
    "applied", "events.jsonl", "events.jsonl dangling", ".gitignore", "memories.lance",
    "state folder",
]


def _commands(clone: Path, memory_id: str) -> list[list[str]]:
    root = ["--root", str(clone)]
    return [
        ["record", "hello", *root], ["record", "anchored", "--anchor", "src/app.py", *root],
        ["query", "handler", *root], ["list", *root], ["show", memory_id, *root], ["drift", *root],
        ["drift", "--json", *root], ["reindex", *root], ["verify", *root], ["context", "the handler", *root],
        ["retract", memory_id, *root], ["revert", memory_id, *root], ["reanchor", memory_id, *root],
        ["history", memory_id, *root], ["ledger", *root], ["bisect", memory_id, *root], ["log", memory_id, *root],
        ["at", "HEAD", *root], ["init", *root], ["init", "--mcp", *root],
    ]


@pytest.mark.parametrize("case", CASES)
def test_a_link_in_the_state_folder_fails_every_command_in_one_line(
        case: str, template: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    clone = work / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    named = _plant(clone, work, case)
    before = tree_snapshot(tmp_path)
    for args in _commands(clone, template[1]):
        code, err = run_cli(capsys, *args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1 and err.startswith("anchorfs: error: refusing "), (args, err)
        assert named in err and "symbolic link" in err, (args, err)
        assert tree_snapshot(tmp_path) == before, args  # nothing written: not the victim, not outside, not the clone
    # the post-commit hook never fails the commit: exit 0, the same one line
    code, err = run_cli(capsys, "hook", "run", "--root", str(clone))
    assert code == 0 and err.count("\n") == 1 and err.startswith("anchorfs: hook: refusing ") and named in err
    assert tree_snapshot(tmp_path) == before
    # the fast `drift` path (the memo, before the CLI) leaves a link to the full pass, which refuses it
    code, err = run_cli(capsys, "drift", "--root", str(clone), entry=True)
    assert code == 1 and named in err and err.count("\n") == 1
    assert (work / "victim.txt").read_bytes() == VICTIM
    assert not (work / "created-through-the-link").exists()
    assert tree_snapshot(tmp_path) == before


def test_the_sdk_refuses_the_same_before_reading(template: tuple[Path, str], tmp_path: Path) -> None:
    work = tmp_path / "work"
    clone = work / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    named = _plant(clone, work, "ledger.jsonl")
    before = tree_snapshot(tmp_path)
    with pytest.raises(WorkspaceError, match="symbolic link") as exc:
        anchorfs.open(clone)
    assert named in str(exc.value)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        anchorfs.init(clone)
    # a Ledger used on its own (no Workspace check) still never opens through the link
    ledger = Ledger(clone / ".anchorfs")
    with pytest.raises(WorkspaceError):
        list(ledger.read())
    with pytest.raises(WorkspaceError):
        ledger.size()
    assert tree_snapshot(tmp_path) == before


def test_a_link_inside_the_store_is_refused_before_lancedb_opens_it(
        template: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    clone = work / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    data = clone / ".anchorfs" / "memories.lance" / "data"
    shutil.copytree(data, work / "outside-data")
    shutil.rmtree(data)
    data.symlink_to(Path("..") / ".." / ".." / "outside-data", target_is_directory=True)
    outside = tree_snapshot(work / "outside-data")
    for args in (["query", "handler"], ["context", "the handler"]):
        before = tree_snapshot(tmp_path)
        code, err = run_cli(capsys, *args, "--root", str(clone))
        assert code == 1 and err.count("\n") == 1 and str(data) in err and "symbolic link" in err, (args, err)
        assert tree_snapshot(tmp_path) == before
    # commands that never open the store still work (`record` writes the ledger alone: the store
    # catches up at the next read); `reindex` rebuilds it without following the link
    assert run_cli(capsys, "list", "--root", str(clone))[0] == 0
    assert run_cli(capsys, "record", "hello", "--root", str(clone))[0] == 0
    assert tree_snapshot(work / "outside-data") == outside
    code, err = run_cli(capsys, "reindex", "--root", str(clone))
    assert code == 0, err
    assert not data.is_symlink()
    assert tree_snapshot(work / "outside-data") == outside
    assert run_cli(capsys, "query", "handler", "--root", str(clone))[0] == 0


def test_init_never_writes_through_a_linked_state_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".anchorfs").symlink_to(outside, target_is_directory=True)
    code, err = run_cli(capsys, "init", "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and str(clone / ".anchorfs") in err
    assert list(outside.iterdir()) == []
    (clone / ".anchorfs").unlink()
    (clone / ".anchorfs").symlink_to(tmp_path / "nowhere")  # dangling: mkdir must not create its target
    code, err = run_cli(capsys, "init", "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and str(clone / ".anchorfs") in err
    assert not (tmp_path / "nowhere").exists()


def test_a_linked_mcp_config_is_refused(template: tuple[Path, str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    victim = tmp_path / "victim.json"
    victim.write_bytes(b'{"mcpServers": {}}\n')
    (clone / ".mcp.json").symlink_to(victim)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        write_mcp_config(clone)
    code, err = run_cli(capsys, "init", "--mcp", "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and ".mcp.json" in err
    assert victim.read_bytes() == b'{"mcpServers": {}}\n'
    assert (clone / ".mcp.json").is_symlink()
    (clone / ".mcp.json").unlink()
    assert write_mcp_config(clone) == clone / ".mcp.json"  # a real file is written as before
    assert not (clone / ".mcp.json").is_symlink()


@pytest.fixture
def append_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Makes files append-only: `chattr +a` where the system allows it (root, ext4/xfs), else
    the fault switch that fails the torn tail's cut with the EPERM such a file gives."""
    done: list[Path] = []
    yield done
    for path in done:
        subprocess.run(["chattr", "-a", str(path)], capture_output=True)


def _make_append_only(path: Path, done: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        ok = subprocess.run(["chattr", "+a", str(path)], capture_output=True).returncode == 0
    except OSError:
        ok = False
    if ok:
        done.append(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                os.ftruncate(fd, 0)
                ok = False  # the filesystem ignored the flag
            except PermissionError:
                pass
            finally:
                os.close(fd)
        except PermissionError:
            pass
    if not ok:
        monkeypatch.setenv(FAULT_ENV, "ledger-cut")


def test_a_torn_tail_that_cannot_be_cut_refuses_writes_and_reads_on(
        template: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        append_only: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    ledger = clone / ".anchorfs" / "ledger.jsonl"
    with open(ledger, "ab") as fh:
        fh.write(b'{"v": 1, "tx": "a crash mid-app')
    saved = ledger.read_bytes()
    _make_append_only(ledger, append_only, monkeypatch)
    code, err = run_cli(capsys, "record", "hello", "--root", str(clone))
    assert code == 1, err
    errors = [line for line in err.splitlines() if line.startswith("anchorfs: error: ")]
    assert len(errors) == 1 and err.endswith("\n") and all(line.startswith("anchorfs: ") for line in err.splitlines())
    assert "torn" in errors[0] and "cannot be cut" in errors[0] and "nothing was written" in errors[0]
    assert "Traceback" not in err and "PermissionError" not in err
    assert ledger.read_bytes() == saved
    # reads skip the torn line (with a warning) and serve what the ledger holds
    code, err = run_cli(capsys, "show", template[1], "--root", str(clone))
    assert code == 0 and "Traceback" not in err
    with pytest.warns(UserWarning, match="torn"):
        with anchorfs.open(clone) as ws:
            assert [m.id for m in ws.list()] == [template[1]]


def test_open_state_never_blocks_on_a_fifo_and_refuses_links(tmp_path: Path) -> None:
    from anchorfs.core import statefs

    fifo = tmp_path / "ledger.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as exc:
        statefs.open_state(fifo, os.O_RDONLY)
    assert exc.value.errno == errno.EINVAL
    assert statefs.read_state(tmp_path / "missing") is None
    (tmp_path / "link").symlink_to(tmp_path / "target")
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_CREAT, os.O_RDWR | os.O_CREAT | os.O_APPEND):
        with pytest.raises(WorkspaceError, match="symbolic link"):
            statefs.open_state(tmp_path / "link", flags)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        statefs.replace_state(tmp_path / "link", b"x")
    assert not (tmp_path / "target").exists()
    statefs.replace_state(tmp_path / "plain", b"one")
    statefs.replace_state(tmp_path / "plain", b"two")
    assert (tmp_path / "plain").read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl", "link", "plain"]  # no temp left


def test_a_failed_append_to_an_append_only_ledger_is_one_line_and_never_acknowledged(
        template: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        append_only: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk mid-record on a file that cannot be cut back: the half record stays as a
    torn line (every read skips it), and the write fails in one line, never a PermissionError."""
    clone = tmp_path / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    ledger = clone / ".anchorfs" / "ledger.jsonl"
    _make_append_only(ledger, append_only, monkeypatch)
    monkeypatch.setenv(FAULT_ENV, ",".join(filter(None, [os.environ.get(FAULT_ENV), "ledger-partial"])))
    code, err = run_cli(capsys, "record", "hello", "--root", str(clone))
    assert code == 1 and "Traceback" not in err and "PermissionError" not in err
    errors = [line for line in err.splitlines() if line.startswith("anchorfs: error: ")]
    assert len(errors) == 1 and "cannot append to the ledger" in errors[0], err
    monkeypatch.delenv(FAULT_ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the torn line, where it could not be cut back
        with anchorfs.open(clone) as ws:
            assert [m.id for m in ws.list()] == [template[1]]
