"""Bisect's fixed cost (issue 37, item 10): the git processes one walk starts, and its questions to
`cat-file`, do not grow with the commits walked nor with the steps that touched the file."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git

from anchorfs.anchor.anchors import narrowed_text, text_hash
from anchorfs.core.git import _Blobs
from anchorfs.history import bisect, log
from anchorfs.core.model import AnchorRef, Memory, new_id


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The git subcommand (and its arguments) of every git process started from now on."""
    calls: list[list[str]] = []
    real_popen, real_spawn = subprocess.Popen, os.posix_spawnp

    def name(argv: Any) -> list[str]:
        args = [str(a) for a in argv[1:]]
        while args and args[0] in ("-c", "-C"):
            args = args[2:]
        return args

    class Counting(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, **kw: Any) -> None:
            if isinstance(args, (list, tuple)) and args and args[0] == "git":
                calls.append(name(args))
            super().__init__(args, *rest, **kw)

    def counting_spawn(path: Any, argv: Any, *rest: Any, **kw: Any) -> int:
        if argv and argv[0] == "git":
            calls.append(name(argv))
        return real_spawn(path, argv, *rest, **kw)

    monkeypatch.setattr(subprocess, "Popen", Counting)
    monkeypatch.setattr(os, "posix_spawnp", counting_spawn)
    return calls


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every object name asked of a `cat-file` process from now on."""
    seen: list[str] = []
    real = _Blobs._ask

    def ask(blobs: _Blobs, verb: str, spec: str) -> bytes:
        seen.append(spec)
        return real(blobs, verb, spec)

    monkeypatch.setattr(_Blobs, "_ask", ask)
    return seen


def history(repo: Path, commits: int, every: int) -> Memory:
    """`commits` commits through fast-import, the anchored file edited above its span in every
    `every`-th one (others touch another file), the span's line changed at the end; the memory."""
    body = [f"line {i}" for i in range(1, 41)]
    stream: list[bytes] = []
    for n in range(commits):
        files = {"other.txt": f"{n}\n"}
        if n == commits - 1:
            body[body.index("line 30")] = "line 30 changed"
        elif n and n % every == 0:
            body.insert(0, f"header {n}")
        if n == 0 or n % every == 0 or n == commits - 1:
            files["big.txt"] = "\n".join(body) + "\n"
        stream.append(b"commit refs/heads/main\ncommitter T <t@e> %d +0000\ndata 2\nc%d\n" % (1_7e9 + n, n % 10))
        for path, text in files.items():
            data = text.encode()
            stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(stream), check=True)
    git(repo, "checkout", "-q", "-f", "main")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    data = git(repo, "show", f"{first}:big.txt").encode()
    ref = AnchorRef("big.txt", sha256=hashlib.sha256(data).hexdigest(), lines=(29, 31), commit=first)
    ref = AnchorRef(**{**ref.to_dict(), "content_hash": text_hash(narrowed_text(ref, data)[0])})
    return Memory(id=new_id(), content="line 30", anchors=(ref,))


@pytest.mark.parametrize("commits, every", [(60, 30), (240, 3)])
def test_a_walk_reads_its_diffs_from_one_git_log(tmp_path: Path, commits: int, every: int,
                                                spawned: list[list[str]], asked: list[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    memory = history(repo, commits, every)
    assert len(log(repo, memory).anchors[0].steps) == (commits - 1) // every + 1
    spawned.clear()
    asked.clear()
    result = bisect(repo, memory)
    assert result.culprit is not None and result.culprit.distance == 0
    commands = sorted(c[0] for c in spawned)
    # the objects (names, sizes and contents), the chain, one stream of diffs limited to the file,
    # and where the changed lines went at the breaking step (the top level: its `.git` folder)
    assert commands == ["cat-file", "diff-tree", "log", "rev-list"]
    assert not any("--stdin" in c for c in spawned)
    # HEAD, the anchor's commit, the chain's first parent, the anchored blob, the breaking step's,
    # and a candidate where its lines may have gone (each a name, then its contents): no
    # question per step, however many steps touched the file
    assert len(asked) <= 10, asked


def test_a_file_renamed_back_and_forth_costs_one_more_stream(git_repo: Path, spawned: list[list[str]]) -> None:
    """Each file the walk followed the text to stays in the stream's path limit: a rename back to
    one of them is read from the same stream, only a file not seen before starts another."""
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 21))
    (repo / "a.txt").write_text(body)
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "add")
    first = git(repo, "rev-parse", "HEAD").strip()
    for old, new in (("a.txt", "b.txt"), ("b.txt", "a.txt"), ("a.txt", "b.txt"), ("b.txt", "a.txt")):
        git(repo, "mv", old, new)
        git(repo, "commit", "-qm", f"{old} -> {new}")
    (repo / "a.txt").write_text(body.replace("line 10\n", "line ten\n"))
    git(repo, "commit", "-qam", "edit")
    data = body.encode()
    ref = AnchorRef("a.txt", sha256=hashlib.sha256(data).hexdigest(), lines=(10, 10), commit=first)
    ref = AnchorRef(**{**ref.to_dict(), "content_hash": text_hash(narrowed_text(ref, data)[0])})
    memory = Memory(id=new_id(), content="line 10", anchors=(ref,))
    steps = log(repo, memory).anchors[0].steps
    assert [(s.verdict.value, s.path) for s in steps] == [
        ("moved", "b.txt"), ("moved", "a.txt"), ("moved", "b.txt"), ("moved", "a.txt"), ("changed", "a.txt")]
    spawned.clear()
    assert bisect(repo, memory).culprit.subject == "edit"  # type: ignore[union-attr]
    assert len([c for c in spawned if c[0] == "log" and "-p" in c]) == 2
