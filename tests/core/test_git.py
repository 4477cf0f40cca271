"""git plumbing: one process per write batch and per query, and no git on PATH is no failure."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git

import anchorfs
from anchorfs.core import git as git_mod
from anchorfs import history
from anchorfs.cli.commands import cli
from anchorfs.core.errors import HistoryError

FILES = 40


def _commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def many_files(git_repo: Path) -> tuple[Path, str]:
    """A workspace in a git repo with FILES small committed modules; (root, HEAD)."""
    for i in range(FILES):
        (git_repo / "src").mkdir(exist_ok=True)
        (git_repo / "src" / f"m{i:02d}.py").write_text(f"def fn{i}(x):\n    return x + {i}\n")
    anchorfs.init(git_repo)
    return git_repo, _commit_all(git_repo, "modules")


class _GitCounter:
    """Every git process this process starts, by argv (subprocess.run goes through Popen,
    `read_git` through `os.posix_spawnp`)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __enter__(self) -> "_GitCounter":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def reset(self) -> None:
        self.calls.clear()

    @property
    def count(self) -> int:
        return len(self.calls)


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[_GitCounter]:
    counter = _GitCounter()
    real = subprocess.Popen

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, **kw: Any) -> None:
            if isinstance(args, (list, tuple)) and args and args[0] == "git":
                counter.calls.append([str(a) for a in args])
            super().__init__(args, *rest, **kw)

    monkeypatch.setattr(subprocess, "Popen", Counting)
    spawn = os.posix_spawnp  # `read_git` spawns without subprocess

    def counting_spawn(path: Any, argv: Any, *rest: Any, **kw: Any) -> int:
        if argv and argv[0] == "git":
            counter.calls.append([str(a) for a in argv])
        return spawn(path, argv, *rest, **kw)

    monkeypatch.setattr(os, "posix_spawnp", counting_spawn)
    yield counter


def _items(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"content": f"fn{i} adds {i}", "anchors": [f"src/m{i % FILES:02d}.py#fn{i % FILES}"]}
            for i in range(start, start + n)]


# -- issue 19: git processes per write batch and per query ----------------------------------

def test_record_many_costs_one_git_process_per_batch(many_files: tuple[Path, str], git_calls: _GitCounter) -> None:
    root, head = many_files
    (root / "src" / "m03.py").write_text("def fn3(x):\n    return x + 3  # edited\n")  # dirty
    with anchorfs.open(root) as ws:
        git_calls.reset()
        small = ws.record_many(_items(2))
        first = git_calls.count  # one status (the top level is read from its `.git` folder)
        git_calls.reset()
        big = ws.record_many(_items(FILES, start=2))
        assert git_calls.count == 1, git_calls.calls  # HEAD and every path's status together
        git_calls.reset()
        one = ws.record("fn5 adds five", anchors=["src/m05.py"])
        assert git_calls.count == 1
    assert first == 1
    assert all(a.commit == head for m in small + big + [one] for a in m.anchors)
    dirty = {a.path: a.dirty for m in big for a in m.anchors}
    assert dirty["src/m03.py"] is True and dirty["src/m04.py"] is False
    assert [p for p, d in dirty.items() if d] == ["src/m03.py"]


def test_record_without_anchors_starts_no_git(many_files: tuple[Path, str], git_calls: _GitCounter) -> None:
    root, _ = many_files
    with anchorfs.open(root) as ws:
        git_calls.reset()
        ws.record_many([{"content": "plain note"}, {"content": "another"}])
    assert git_calls.count == 0


def _query_git_processes(root: Path, k: int, git_calls: _GitCounter) -> tuple[int, int]:
    history._commit_info.cache_clear()
    history._count_since.cache_clear()
    with anchorfs.open(root) as ws:
        ws.query("adds", k=k)  # the store catches up, the embedder loads: not what is counted
        ws._history_memo.clear()
        history._commit_info.cache_clear()
        history._count_since.cache_clear()
        git_calls.reset()
        hits = ws.query("adds", k=k)
    assert all(h.envelope.startswith("[fresh · anchored ") and "1 commit since" in h.envelope for h in hits)
    return len(hits), git_calls.count


def test_query_git_processes_do_not_grow_with_hits(many_files: tuple[Path, str], git_calls: _GitCounter,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = many_files
    monkeypatch.setattr(git_mod, "_RACY_NS", 10**18)  # HEAD's files never old enough: read HEAD each query
    with anchorfs.open(root) as ws:
        ws.record_many(_items(FILES))
    _commit_all(root, "later work")  # the anchors' commit is one behind HEAD: "1 commit since"
    n_small, small = _query_git_processes(root, 3, git_calls)
    n_big, big = _query_git_processes(root, 30, git_calls)
    assert (n_small, n_big) == (3, 30)
    # HEAD once per query; the anchors' commit (shared) named and counted once.
    assert small == big == 3, git_calls.calls


# -- issue 15 item 7: no git on PATH ----------------------------------------------------------

@pytest.fixture
def no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "no-git-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_reads_and_writes_without_git_on_path(many_files: tuple[Path, str], no_git: None) -> None:
    root, _ = many_files
    with anchorfs.open(root) as ws:
        m = ws.record("fn1 adds one", anchors=["src/m01.py#fn1"])
        assert m.anchors[0].commit is None and m.anchors[0].dirty is None
        hits = ws.query("fn1 adds one", k=3)
        assert hits and hits[0].memory.id == m.id and hits[0].drift.value == "fresh"
        assert "commits since" not in hits[0].envelope
        block = ws.context("change fn1")
        assert "fn1 adds one" in block.markdown and m.id in block.fresh
        with pytest.raises(HistoryError, match="git is not installed"):
            ws.bisect(m.id)


def test_cli_without_git_keeps_plain_output_clean(many_files: tuple[Path, str], no_git: None) -> None:
    root, _ = many_files
    runner = CliRunner()
    r = runner.invoke(cli, ["--root", str(root), "record", "fn2 adds two", "--anchor", "src/m02.py:2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["anchors"][0]["commit"] is None
    for args in (["query", "fn2 adds two"], ["context", "change fn2"]):
        r = runner.invoke(cli, ["--root", str(root), *args])
        assert r.exit_code == 0, r.output
        assert "fn2 adds two" in r.stdout
        assert "git" not in r.stderr and "warning" not in r.stderr


def test_anchors_recorded_with_git_still_read_without_it(many_files: tuple[Path, str],
                                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root, head = many_files
    with anchorfs.open(root) as ws:
        m = ws.record("fn7 adds seven", anchors=["src/m07.py#fn7"])
    assert m.anchors[0].commit == head
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with anchorfs.open(root) as ws:
        hit = ws.query("fn7 adds seven", k=1)[0]
        assert ws.drift().stale == []
    assert hit.memory.id == m.id and hit.drift.value == "fresh"
    assert hit.envelope.startswith("[fresh")


# -- the batch status itself -------------------------------------------------------------------

def test_head_and_dirty_in_a_subfolder_workspace(git_repo: Path) -> None:
    from anchorfs.core.git import head_and_dirty

    sub = git_repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    for name in ("a b.py", "clean.py", "moved.py", "*.py"):
        (sub / name).write_text(name + "\n")
    head = _commit_all(git_repo, "files")
    (sub / "a b.py").write_text("edited\n")
    (sub / "new.py").write_text("untracked\n")
    git(sub, "mv", "moved.py", "renamed.py")
    found_head, dirty = head_and_dirty(sub, ["a b.py", "clean.py", "new.py", "renamed.py", "moved.py", "*.py"])
    assert found_head == head
    # a glob-like name is a literal path, not a pattern matching every file
    assert dirty == {"a b.py", "new.py", "renamed.py", "moved.py"}
    assert head_and_dirty(sub, []) == (head, set())


def _git_says_top(cwd: Path) -> Path | None:
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True).stdout.strip()
    return Path(os.fsdecode(out)) if out else None


def test_the_top_level_is_what_git_says_with_or_without_a_process(tmp_path: Path, git_calls: _GitCounter,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A `.git` folder right in the root answers without git; whatever could move the work tree
    (config, an include, the environment, a linked worktree's `.git` file) is left to git."""
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c")
    (tmp_path / "link").symlink_to(repo)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    cases = [repo, repo / "sub", tmp_path / "link", tmp_path / "wt", tmp_path]
    for root in cases:
        git_calls.reset()
        top, asked = git_mod.toplevel(root), git_calls.count
        assert top == _git_says_top(root), root
        assert asked == (root in (repo / "sub", tmp_path / "wt")), root  # a plain `.git` folder, or none: no process
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for setting in (["core.worktree", str(elsewhere)], ["include.path", str(tmp_path / "more.cfg")]):
        git(repo, "config", *setting)
        git_calls.reset()
        top, asked = git_mod.toplevel(repo), git_calls.count
        assert top == _git_says_top(repo) and asked == 1, setting
        git(repo, "config", "--unset", setting[0])
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    assert git_mod.toplevel(repo) == _git_says_top(repo) == elsewhere


def test_head_and_dirty_before_the_first_commit(git_repo: Path) -> None:
    from anchorfs.core.git import head_and_dirty

    (git_repo / "a.py").write_text("x = 1\n")
    assert head_and_dirty(git_repo, ["a.py"]) == (None, {"a.py"})
    assert os.path.isdir(git_repo / ".git")


def test_envelopes_follow_head_and_the_memo_keeps_only_its_entries(many_files: tuple[Path, str]) -> None:
    root, first = many_files
    with anchorfs.open(root) as ws:
        ws.record_many(_items(6))
        assert all("0 commits since" in h.envelope for h in ws.query("adds", k=6))
        second = _commit_all(root, "later work")
        hits = ws.query("adds", k=6)
        assert len(hits) == 6 and all("1 commit since" in h.envelope for h in hits)
        assert {key[1] for key in ws._history_memo} == {second} != {first}


def test_head_is_read_without_a_process_while_its_files_hold(git_repo: Path, git_calls: _GitCounter,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorfs.core.git import current_head

    monkeypatch.setattr(git_mod, "_RACY_NS", 0)  # the files count as old at once (no sleeping)
    top = Path(os.path.realpath(git_repo))
    assert current_head(top) is None  # unborn
    (git_repo / "a.txt").write_text("a\n")
    c1 = _commit_all(git_repo, "one")
    assert current_head(top) == c1
    git_calls.reset()
    assert current_head(top) == c1 and current_head(top) == c1
    assert git_calls.count == 0  # nothing HEAD rests on changed: no process
    c2 = _commit_all(git_repo, "two")
    assert current_head(top) == c2
    git(git_repo, "checkout", "-q", "-b", "side")
    c3 = _commit_all(git_repo, "three")
    assert current_head(top) == c3
    git(git_repo, "checkout", "-q", "--detach", c1)
    assert current_head(top) == c1
    git(git_repo, "checkout", "-q", "side")
    git(git_repo, "pack-refs", "--all")  # the branch now lives in packed-refs only
    assert current_head(top) == c3
    git(git_repo, "update-ref", "refs/heads/side", c2)
    assert current_head(top) == c2
    c4 = _commit_all(git_repo, "four")
    assert current_head(top) == c4
    git_calls.reset()
    assert current_head(top) == c4 and git_calls.count == 0


def test_head_inside_the_racy_window_is_always_asked(git_repo: Path, git_calls: _GitCounter) -> None:
    from anchorfs.core.git import current_head

    (git_repo / "a.txt").write_text("a\n")
    c1 = _commit_all(git_repo, "one")
    ref = git_repo / ".git" / "refs" / "heads" / "main"
    future = ref.stat().st_mtime_ns + 3600 * 10**9
    os.utime(ref, ns=(future, future))  # "just written", however slow this machine is
    top = Path(os.path.realpath(git_repo))
    current_head(top)
    git_calls.reset()
    assert current_head(top) == c1
    assert git_calls.count == 1  # a ref this fresh could change again without its stat changing


def test_a_repeated_query_starts_no_git_process(many_files: tuple[Path, str], git_calls: _GitCounter,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = many_files
    monkeypatch.setattr(git_mod, "_RACY_NS", 0)
    with anchorfs.open(root) as ws:
        ws.record_many(_items(10))
        first = ws.query("adds", k=10)
        git_calls.reset()
        again = ws.query("adds", k=10)
    assert git_calls.count == 0
    assert [h.envelope for h in again] == [h.envelope for h in first]


def test_git_commands_started_side_by_side_answer_as_one_by_one(many_files: tuple[Path, str],
                                                               git_calls: _GitCounter) -> None:
    """`read_git_each` starts every command before reading any (the move search's rename diff
    and untracked listing), each answer in its command's place; a failing one reads as empty."""
    from anchorfs.core.git import read_git, read_git_each, renames_since

    root, head = many_files
    (root / "src" / "m01.py").rename(root / "src" / "new.py")
    big = "\n".join(f"line {i}" for i in range(40_000))  # past a pipe's buffer: it waits to be read, no deadlock
    (root / "big.txt").write_text(big)
    subprocess.run(["git", "add", "-N", "big.txt"], cwd=root, check=True)
    (root / "staged.txt").write_text(big)
    subprocess.run(["git", "add", "staged.txt"], cwd=root, check=True)
    commands = [("rev-parse", "HEAD"), ("show", ":staged.txt"), ("ls-files", "--others", "--exclude-standard", "-z"),
                ("cat-file", "-p", "nope"), ("show", f"{head}:src/m02.py")]
    git_calls.reset()
    together = read_git_each(root, *commands)
    assert git_calls.count == 5
    assert together == [read_git(root, *c) for c in commands]
    assert together[0].strip().decode() == head and together[1].decode() == big and together[3] == b""
    assert together[2].split(b"\0")[:-1] == [b"src/new.py"]
    found = renames_since(root, [head])
    assert found.untracked == ["src/new.py"]
    assert sorted(found.added) == ["big.txt", "src/new.py", "staged.txt"]  # the working tree's view: intent to add too
    assert found.modified == []


def test_a_cat_file_that_died_is_one_history_error_and_closes_quietly(git_repo: Path) -> None:
    """A walk whose `cat-file` died says so as a HistoryError (one line for the CLI); closing the
    objects afterwards must not replace it with the pipe's own BrokenPipeError."""
    from anchorfs.core.git import _Blobs

    (git_repo / "a.txt").write_text("a\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-qm", "a")
    blobs = _Blobs(git_repo, 1 << 20)
    assert blobs.info("HEAD") is not None
    blobs._procs["info"].kill()
    blobs._procs["info"].wait()
    with pytest.raises(HistoryError, match="stopped unexpectedly"):
        blobs.info("HEAD:a.txt")
    blobs.close()  # no BrokenPipeError for the bytes that never went out
    assert blobs._procs == {}


def test_closing_a_cat_file_with_output_unread_does_not_wait_for_ever(git_repo: Path) -> None:
    """A walk stopped after a blob's header (an error mid-read) leaves the rest of a large blob in
    the pipe: closing must still end the process, not wait on a writer no one reads."""
    import threading

    from anchorfs.core.git import _Blobs

    (git_repo / "big.txt").write_text("x" * 4_000_000)
    git(git_repo, "add", "big.txt")
    git(git_repo, "commit", "-qm", "big")
    blobs = _Blobs(git_repo, 1 << 30)
    oid = blobs.oid("HEAD:big.txt")
    assert oid is not None
    assert blobs._ask("contents", oid).endswith(b" 4000000\n")  # the header read, not the 4 MB after it
    proc = blobs._procs["contents"]
    closing = threading.Thread(target=blobs.close, daemon=True)
    closing.start()
    closing.join(60)
    assert not closing.is_alive() and proc.returncode is not None


def test_a_git_without_batch_command_is_asked_the_older_way(git_repo: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Before git 2.36 `cat-file` has no `--batch-command`: the objects come from `--batch-check`
    and `--batch` instead, with the same answers (a name, a blob, a missing name, not a blob)."""
    from anchorfs.core.git import _Blobs

    (git_repo / "a.txt").write_text("one\ntwo\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-qm", "a")
    blobs = _Blobs(git_repo, 1 << 20)
    new = (blobs.info("HEAD:a.txt"), blobs.get("HEAD:a.txt"), blobs.info("HEAD:nope"), blobs.get("HEAD"))
    blobs.close()
    old_git = tmp_path / "old-git"
    old_git.mkdir()
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    (old_git / "git").write_text(f'#!/bin/sh\nfor a; do [ "$a" = --batch-command ] && {{ echo "usage: git cat-file" >&2; '
                                 f'exit 129; }}; done\nexec {real} "$@"\n')
    (old_git / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{old_git}{os.pathsep}{os.environ['PATH']}")
    blobs = _Blobs(git_repo, 1 << 20)
    old = (blobs.info("HEAD:a.txt"), blobs.get("HEAD:a.txt"), blobs.info("HEAD:nope"), blobs.get("HEAD"))
    assert blobs._split and blobs._procs["info"] is not blobs._procs["contents"]
    blobs.close()
    assert old == new and new[1] == b"one\ntwo\n" and new[2] is None and new[3] is None
