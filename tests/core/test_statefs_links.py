"""A crafted clone with a link at `.anchorfs/fold.snap`, `server.sock` or `events.jsonl`: refused
as a link at any other state path is (`statefs.STATE_FILES`), in one line naming it, with nothing
read through it nor written anywhere (not the target outside the clone, not the clone).

These three were missing from `STATE_FILES`, so `check_state` let them through: the fold snapshot
and the digest memo are opened without following links where they are read, but a command went
on to run (and write) in a clone that plants a link, and a client would connect through a linked
socket to whatever it names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import anchorfs
from anchorfs.core.errors import WorkspaceError
from anchorfs.core.statefs import STATE_FILES, check_state

from conftest import anchored_clone, run_cli, tree_snapshot

VICTIM = b"root:x:0:0:root:/root:/bin/bash\n"
NAMES = ("fold.snap", "server.sock", "events.jsonl")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return anchored_clone(tmp_path_factory, b"def handler(request):\n    return 'ok'\n")


def test_the_names_are_state_files() -> None:
    assert set(NAMES) <= set(STATE_FILES)


@pytest.mark.parametrize("target", ["outside", "/etc/passwd", "dangling"])
@pytest.mark.parametrize("name", NAMES)
def test_a_linked_state_file_is_refused_and_nothing_is_written(
        name: str, target: str, template: tuple[Path, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    clone = work / "clone"
    shutil.copytree(template[0], clone, symlinks=True)
    (work / "victim").write_bytes(VICTIM)
    link = clone / ".anchorfs" / name
    link.unlink(missing_ok=True)
    dest = {"outside": str(Path("..") / ".." / "victim"), "dangling": str(work / "created-through-the-link")}
    link.symlink_to(dest.get(target, target))
    named = str(link)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        check_state(clone / ".anchorfs")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        anchorfs.open(clone)
    before = tree_snapshot(tmp_path)
    root = ["--root", str(clone)]
    memory_id = template[1]
    for args in (["record", "hello", *root], ["query", "handler", *root], ["list", *root], ["drift", *root],
                 ["show", memory_id, *root], ["verify", *root], ["retract", memory_id, *root], ["init", *root]):
        code, err = run_cli(capsys, *args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1 and err.startswith("anchorfs: error: refusing "), (args, err)
        assert named in err and "symbolic link" in err, (args, err)
        assert tree_snapshot(tmp_path) == before, args
    # the agent hooks never fail the agent: the same one line, nothing written
    code, err = run_cli(capsys, "hook", "run", *root)
    assert code == 0 and err.count("\n") == 1 and named in err, err
    assert tree_snapshot(tmp_path) == before
    # the fast paths before the CLI (drift replay, hooks, server hand-off) leave it to the full pass
    code, err = run_cli(capsys, "drift", *root, entry=True)
    assert code == 1 and named in err and err.count("\n") == 1, err
    assert (work / "victim").read_bytes() == VICTIM
    assert not (work / "created-through-the-link").exists()
    assert tree_snapshot(tmp_path) == before


def test_state_files_names_every_file_its_owners_keep() -> None:
    """The names are spelled out in `statefs`; they must not drift from their owners'."""
    from anchorfs.ledger import foldsnap
    from anchorfs.cli import server

    assert {foldsnap.SNAP_FILE, server.SOCKET_NAME} <= set(STATE_FILES)
