"""The store is exactly the fold of the ledger as it is now (issue 15 item 6, issue 21).

A committed ledger travels with its branch: `git checkout`, `reset --hard`, a rebase or merge,
or a hand truncation rewrite it under anchorfs. After each, `query` and `list` must give the
fold of the ledger now: no ghosts (memories the ledger no longer holds), nothing lost (lines
inserted before the old end), without `reindex`. Checked both in the same long-lived process
(its fold cache and open store) and in a freshly opened workspace (the checkpoint on disk).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import anchorfs
from anchorfs.sdk import storesync
from anchorfs.ledger.log import Ledger, fold
from anchorfs.core.model import Memory
from anchorfs.sdk.workspace import Workspace

from conftest import git

LEDGER = ".anchorfs/ledger.jsonl"


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A git repo whose ledger is committed, merged by git's `union` driver (the fallback)."""
    anchorfs.init(git_repo)
    (git_repo / ".gitattributes").write_text(f"{LEDGER} merge=union\n")
    (git_repo / "README.md").write_text("a project\n")
    git(git_repo, "add", ".gitattributes", "README.md", ".anchorfs/.gitignore")
    git(git_repo, "commit", "-q", "-m", "start")
    return git_repo


@pytest.fixture
def ws(repo: Path) -> Iterator[Workspace]:
    with anchorfs.open(repo) as w:
        yield w


def commit_ledger(repo: Path, message: str) -> None:
    git(repo, "add", LEDGER)
    git(repo, "commit", "-q", "-m", message)


def the_fold(repo: Path) -> dict[str, Memory]:
    """What the ledger on disk folds to, read independently of any workspace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fold(Ledger(repo / ".anchorfs").read())


def served(w: Workspace) -> dict[str, Memory]:
    """Every memory the store serves, any status, as the store holds it."""
    return {h.memory.id: h.memory for h in w.query("memory note", k=500, include_superseded=True)}


def assert_exact(w: Workspace, repo: Path) -> dict[str, Memory]:
    """query, list and the store's rows are the fold, in this process and in a fresh one."""
    want = the_fold(repo)
    active = {i for i, m in want.items() if m.status == "active"}
    for each in (w, anchorfs.open(repo)):
        assert served(each) == want  # no ghosts, nothing lost, every snapshot the latest
        assert {h.memory.id for h in each.query("memory note", k=500)} == active
        assert {m.id: m for m in each.list(status="all")} == want
        assert storesync.applied(each.state) == each.ledger.size()
    return want


def test_checkout_reset_and_back_serve_only_the_branch_ledger(ws: Workspace, repo: Path) -> None:
    a = ws.record("alpha memory: the cache holds 100 entries")
    b = ws.record("beta memory: deploys run on fridays")
    commit_ledger(repo, "main memories")
    assert_exact(ws, repo)

    git(repo, "checkout", "-q", "-b", "feature")
    c = ws.record("gamma memory, only on the branch")
    a2 = ws.supersede(a.id, "alpha memory: the cache holds 500 entries")
    ws.retract(b.id, reason="not on fridays any more")
    commit_ledger(repo, "branch memories")
    on_branch = assert_exact(ws, repo)

    git(repo, "checkout", "-q", "main")  # a shorter ledger
    on_main = assert_exact(ws, repo)
    assert set(on_main) == {a.id, b.id}
    assert on_main[a.id].status == "active" and on_main[b.id].status == "active"
    assert c.id not in served(ws) and a2.id not in served(ws)
    with pytest.raises(anchorfs.AnchorfsError):
        ws.get(c.id)

    git(repo, "checkout", "-q", "feature")  # and back: main's ledger is a prefix of this one
    assert assert_exact(ws, repo) == on_branch

    git(repo, "checkout", "-q", "main")
    d = ws.record("delta memory, recorded on main then reset away")
    commit_ledger(repo, "delta")
    assert d.id in assert_exact(ws, repo)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    assert set(assert_exact(ws, repo)) == {a.id, b.id}
    e = ws.record("epsilon memory, after the reset")  # writes go on from the ledger as it is now
    assert set(assert_exact(ws, repo)) == {a.id, b.id, e.id}


def test_a_hand_truncated_or_same_size_rewritten_ledger_is_followed(ws: Workspace, repo: Path) -> None:
    a = ws.record("alpha memory one")
    b = ws.record("bravo memory two")
    c = ws.record("charlie memory three")
    assert_exact(ws, repo)
    path = repo / LEDGER
    lines = path.read_bytes().splitlines(keepends=True)

    path.write_bytes(b"".join(lines[:2]))  # truncated in place: same inode
    assert set(assert_exact(ws, repo)) == {a.id, b.id}

    # the same size, another text: a fold keyed on the size alone would keep the old one
    path.write_bytes(b"".join(lines[:2]) + lines[2].replace(b"charlie memory three", b"charlie memory THREE"))
    rewritten = assert_exact(ws, repo)
    assert rewritten[c.id].content == "charlie memory THREE"
    assert path.stat().st_size == len(b"".join(lines))

    path.write_bytes(b"")  # emptied
    assert assert_exact(ws, repo) == {}
    path.unlink()  # and gone
    assert assert_exact(ws, repo) == {}
    again = ws.record("a memory after the ledger was removed")
    assert set(assert_exact(ws, repo)) == {again.id}


def test_a_rebase_that_inserts_lines_in_the_middle_and_a_merge(ws: Workspace, repo: Path) -> None:
    a = ws.record("alpha memory from the start")
    commit_ledger(repo, "alpha")
    git(repo, "checkout", "-q", "-b", "feature")
    b = ws.record("bravo memory on the feature branch")
    b2 = ws.supersede(b.id, "bravo memory on the feature branch, corrected")
    commit_ledger(repo, "bravo")
    git(repo, "checkout", "-q", "main")
    c = ws.record("charlie memory on main meanwhile")
    commit_ledger(repo, "charlie")
    git(repo, "checkout", "-q", "feature")
    before = assert_exact(ws, repo)
    size_before = (repo / LEDGER).stat().st_size

    git(repo, "rebase", "-q", "main")  # union: main's lines, then the branch's: charlie lands in the middle
    text = (repo / LEDGER).read_bytes()
    assert text.index(c.id.encode()) < text.index(b.id.encode())
    assert (repo / LEDGER).stat().st_size > size_before
    now = assert_exact(ws, repo)
    assert set(now) == {*before, c.id} == {a.id, b.id, b2.id, c.id}

    git(repo, "checkout", "-q", "main")
    assert set(assert_exact(ws, repo)) == {a.id, c.id}
    d = ws.record("delta memory on main")
    commit_ledger(repo, "delta")
    git(repo, "merge", "-q", "--no-edit", "feature")  # union again: the branch's lines appended
    assert set(assert_exact(ws, repo)) == {a.id, b.id, b2.id, c.id, d.id}


def test_a_checkout_reuses_the_vectors_of_memories_both_branches_hold(ws: Workspace, repo: Path) -> None:
    kept = [ws.record(f"memory number {i} about the build") for i in range(3)]
    commit_ledger(repo, "main")
    git(repo, "checkout", "-q", "-b", "feature")
    extra = ws.record("memory only on the feature branch")
    commit_ledger(repo, "feature")
    table = ws.store.table()

    def rows() -> dict[str, tuple[str, list[float]]]:
        got = table.search().select(["id", "text_hash", "vector"]).limit(100).to_list()
        return {r["id"]: (r["text_hash"], list(r["vector"])) for r in got}

    before = rows()
    git(repo, "checkout", "-q", "main")
    assert set(assert_exact(ws, repo)) == {m.id for m in kept}
    after = rows()
    assert extra.id not in after
    assert after == {m.id: before[m.id] for m in kept}  # untouched rows: same hash, same vector


def test_a_checkpoint_says_what_it_took_in(ws: Workspace, repo: Path) -> None:
    """The checkpoint holds the offset (its old key) and a checksum of that prefix."""
    from anchorfs.ledger import catchup

    ws.record("one memory")
    seen = catchup.Prefix.from_bytes((repo / ".anchorfs" / "applied").read_bytes())
    assert seen is not None and seen.offset == (repo / LEDGER).stat().st_size
    assert orjson.loads((repo / ".anchorfs" / "applied").read_bytes())["offset"] == seen.offset
    again = catchup.follow(ws.ledger, seen)
    assert again.kind == "same" and again.prefix.digest == seen.digest
    # an older checkpoint (offset only) or a forged one is no checkpoint: the reader starts over
    for bad in (b'{"offset": 5}', b"", b"[]", b'{"v": 2, "offset": -1}'):
        assert catchup.Prefix.from_bytes(bad) is None
    # a prefix is extended from its last block, and agrees with reading it whole
    ws.record("two memories")
    size = (repo / LEDGER).stat().st_size
    assert catchup.extend(ws.ledger, seen, size).digest == catchup.follow(ws.ledger, None).prefix.digest


def test_the_chained_checksum_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks, so a few lines span several: extend, verify and a flipped byte in an early block."""
    from anchorfs.ledger import catchup

    monkeypatch.setattr(catchup, "BLOCK", 64)
    monkeypatch.setattr(catchup, "TAIL", 16)
    with anchorfs.open(anchorfs.init(tmp_path)) as w:
        w.record("first memory, long enough to span a few small blocks")
        seen = catchup.follow(w.ledger, None).prefix
        w.record("second memory, also long enough to span blocks")
        grown = catchup.follow(w.ledger, seen)
        assert grown.kind == "grown" and [m.content for e in grown.entries for m in e.memories] == [
            "second memory, also long enough to span blocks"]
        end = w.ledger.size()
        assert catchup.extend(w.ledger, seen, end).digest == grown.prefix.digest
        path = w.ledger.path
        data = bytearray(path.read_bytes())
        data[10] = ord("X") if data[10] != ord("X") else ord("Y")  # inside the first block, tail intact
        path.write_bytes(bytes(data))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the damaged line is skipped with a warning
            assert catchup.follow(w.ledger, grown.prefix).kind == "rewritten"


def test_the_racy_rule_distrusts_a_stat_taken_too_soon(ws: Workspace, repo: Path) -> None:
    from anchorfs.ledger import catchup

    ws.record("one memory")
    seen = catchup.follow(ws.ledger, None).prefix
    st = os.lstat(repo / LEDGER)
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    soon = catchup.Prefix(seen.offset, seen.base, seen.digest, seen.tail, seen.stat, changed)
    later = catchup.Prefix(seen.offset, seen.base, seen.digest, seen.tail, seen.stat,
                           changed + catchup.DEFAULT_GRANULARITY_NS + 1)
    assert not catchup.settled(ws.ledger, soon)  # same stat, but the file could still change in its tick
    assert catchup.settled(ws.ledger, later)
    assert not catchup.settled(ws.ledger, None)
