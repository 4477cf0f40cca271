from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git

from anchorfs.anchor.anchors import judge, narrowed_text, take, text_hash
from anchorfs.core.errors import HistoryError
from anchorfs.history import (
    WORKING_TREE,
    _intact,
    Hunk,
    bisect,
    drift_at,
    history_facts,
    log,
)
from anchorfs.core.model import AnchorRef, Drift, Memory, Verdict, new_id

TOKEN_PY = '''"""Token helpers."""
import jwt
def issue(user):
    """Issue a JWT for the user."""
    return jwt.encode({"sub": user}, KEY)

EXPIRY_HOURS = 24

def verify(token):
    return jwt.decode(token, KEY)
'''

HEADER = "# Copyright 2026 Example\n# SPDX-License-Identifier: MIT\n"

_day = [0]


def commit(repo: Path, message: str, files: dict[str, str | bytes | None], *, day: int | None = None) -> str:
    """Write (or delete, for None) files and commit them with fixed dates; returns the hash."""
    for rel, content in files.items():
        path = repo / rel
        if content is None:
            git(repo, "rm", "-q", rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        git(repo, "add", rel)
    _day[0] += 1
    when = f"2026-08-{day or _day[0] % 28 + 1:02d}T10:00:00+00:00"
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    git(repo, "commit", "-q", "--allow-empty", "-m", message, env=env)
    return git(repo, "rev-parse", "HEAD").strip()


def remember(root: Path, content: str, *refs: AnchorRef, dirty: bool = False) -> Memory:
    head = git(root, "rev-parse", "HEAD").strip()
    real = os.path.realpath(root)
    anchors = tuple(take(real, ref, commit=head, dirty=dirty) for ref in refs)
    return Memory(id=new_id(), content=content, anchors=anchors)


def short(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--short", rev).strip()


@pytest.fixture
def token_repo(git_repo: Path) -> dict:
    """The issue's scenario: two memories on auth/token.py, five commits after them."""
    repo = git_repo
    c0 = commit(repo, "add token module", {"auth/token.py": TOKEN_PY, "README.md": "hi\n"}, day=1)
    expiry = remember(repo, "token expiry is 24h", AnchorRef("auth/token.py", lines=(7, 7)))
    jwts = remember(repo, "auth issues JWTs", AnchorRef("auth/token.py", lines=(3, 5)))
    c1 = commit(repo, "unrelated notes", {"docs/notes.md": "notes\n"}, day=2)
    c2 = commit(repo, "add license header", {"auth/token.py": HEADER + TOKEN_PY}, day=3)
    raised = HEADER + TOKEN_PY.replace("EXPIRY_HOURS = 24", "EXPIRY_HOURS = 168")
    c3 = commit(repo, "raise token expiry", {"auth/token.py": raised}, day=4)
    split = raised.split("def verify")[0].rstrip("\n") + "\n"
    c4 = commit(repo, "split verify into its own module",
                {"auth/token.py": split, "auth/verify.py": "def verify(token):\n    return token\n"}, day=5)
    c5 = commit(repo, "migrate to auth.tokens",
                {"auth/token.py": None, "auth/tokens/__init__.py": "from pyjwt import *\n"}, day=6)
    return {"repo": repo, "commits": [c0, c1, c2, c3, c4, c5], "expiry": expiry, "jwts": jwts}


# -- the issue's scenario ---------------------------------------------------------------------

def test_bisect_names_the_expiry_change_with_its_hunk(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    result = bisect(repo, token_repo["expiry"])
    culprit = result.culprit
    assert culprit is not None and not result.holds
    assert culprit.commit == cs[3]
    assert culprit.short == short(repo, cs[3])
    assert culprit.subject == "raise token expiry"
    assert culprit.author == "Test Author"
    assert culprit.date is not None and culprit.date.startswith("2026-08-04")
    assert culprit.cause == "changed"
    assert culprit.lines_before == (9, 9)  # the header moved line 7 to 9
    hunk = culprit.hunk
    assert hunk is not None
    assert (hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count) == (9, 1, 9, 1)
    assert hunk.lines == ("-EXPIRY_HOURS = 24", "+EXPIRY_HOURS = 168")
    assert [s.commit for s in result.touches] == [cs[2]]  # the header: moved, not broken
    assert result.touches[0].verdict is Verdict.MOVED
    assert result.touches[0].lines_after == (9, 9)


def test_bisect_names_the_migration_that_deleted_the_module(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    result = bisect(repo, token_repo["jwts"])
    culprit = result.culprit
    assert culprit is not None
    assert culprit.commit == cs[5]
    assert culprit.cause == "deleted"
    assert culprit.verdict is Verdict.DELETED
    assert culprit.lines_before == (5, 7)
    assert [s.commit for s in result.touches] == [cs[2], cs[3], cs[4]]
    # only the header moved lines 3-5 (to 5-7); the next two left them identical in place
    assert [s.verdict for s in result.touches] == [Verdict.MOVED, Verdict.FRESH, Verdict.FRESH]
    assert [(s.lines_before, s.lines_after) for s in result.touches] == [((3, 5), (5, 7)), ((5, 7), (5, 7)),
                                                                         ((5, 7), (5, 7))]
    assert result.anchors[0].verdict is Verdict.DELETED


def test_bisect_json_contract(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    d = bisect(repo, token_repo["expiry"]).to_dict()
    json.dumps(d)  # serialisable as is
    assert d["id"] == token_repo["expiry"].id
    c = d["culprit"]
    assert {"commit", "short", "date", "author", "subject", "cause", "hunk"} <= set(c)
    assert c["commit"] == cs[3] and c["cause"] == "changed"
    assert c["hunk"]["text"] == "@@ -9 +9 @@\n-EXPIRY_HOURS = 24\n+EXPIRY_HOURS = 168"
    assert c["lines"] == [9, 9]
    assert c["touches_before"] == 1
    assert [t["commit"] for t in d["touches"]] == [cs[2]]
    assert d["anchors"][0]["anchor"] == "auth/token.py:7"
    assert d["anchors"][0]["culprit"]["commit"] == cs[3]


def test_log_lists_every_touch_with_its_verdict(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    result = log(repo, token_repo["expiry"])
    steps = result.steps
    assert [s.commit for s in steps] == [cs[2], cs[3], cs[4], cs[5]]  # c1 never touched it
    assert [s.verdict for s in steps] == [Verdict.MOVED, Verdict.CHANGED, Verdict.CHANGED, Verdict.DELETED]
    assert steps[0].lines_before == (7, 7) and steps[0].lines_after == (9, 9)
    assert steps[1].invalidates and not steps[2].invalidates
    d = result.to_dict()
    assert [s["commit"] for s in d["anchors"][0]["steps"]] == [cs[2], cs[3], cs[4], cs[5]]


def test_at_first_commit_both_fresh_at_head_both_stale(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    mems = [token_repo["expiry"], token_repo["jwts"]]
    first = drift_at(repo, mems, cs[0])
    assert first.commit == cs[0]
    assert [r.drift for r in first.results] == [Drift.FRESH, Drift.FRESH]
    head = drift_at(repo, mems, "HEAD")
    assert [r.drift for r in head.results] == [Drift.STALE, Drift.STALE]
    assert {c.verdict for r in head.results for c in r.checks} == {Verdict.DELETED}
    middle = drift_at(repo, mems, cs[3]).to_dict()
    assert [m["drift"] for m in middle["memories"]] == ["stale", "fresh"]
    assert middle["stale"] == 1 and middle["fresh"] == 1 and middle["checked"] == 2
    assert middle["memories"][1]["anchors"][0]["verdict"] == "moved"


def test_at_leaves_out_memories_recorded_later(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    git(repo, "checkout", "-q", cs[4])
    later = remember(repo, "verify lives in auth/verify.py", AnchorRef("auth/verify.py"))
    git(repo, "checkout", "-q", "main")
    report = drift_at(repo, [token_repo["expiry"], later], cs[2])
    assert [r.memory.id for r in report.results] == [token_repo["expiry"].id]
    assert report.skipped == 1
    assert [r.memory.id for r in drift_at(repo, [later], cs[4]).results] == [later.id]


def test_at_unknown_revision_is_one_clear_error(token_repo: dict) -> None:
    with pytest.raises(HistoryError, match="unknown revision 'no-such-rev'"):
        drift_at(token_repo["repo"], [token_repo["expiry"]], "no-such-rev")
    with pytest.raises(HistoryError, match="unknown revision"):
        drift_at(token_repo["repo"], [], "--all")


def test_envelopes(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    stale = history_facts(repo, token_repo["expiry"], Drift.STALE)
    assert stale == (f'{cs[3][:7]} 2026-08-04 "raise token expiry"', None)
    assert history_facts(repo, token_repo["expiry"], Drift.FRESH) == (None, 5)
    assert history_facts(repo, Memory(id=new_id(), content="x"), Drift.FRESH) is None


# -- symbols ------------------------------------------------------------------------------------

ISSUER_PY = '''import time


class TokenIssuer:
    def __init__(self, key):
        self.key = key

    def issue(self, user):
        return {"sub": user, "exp": time.time() + 86400}


def helper():
    return 1
'''


def test_symbol_culprit_is_the_edit_inside_it_after_three_touches(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "issuer", {"auth/issuer.py": ISSUER_PY})
    mem = remember(repo, "tokens expire after a day", AnchorRef("auth/issuer.py", symbol="TokenIssuer.issue"))
    text = ISSUER_PY
    text = text.replace("import time\n", "import time\nimport json\n")
    t1 = commit(repo, "import json", {"auth/issuer.py": text})
    text = text.replace("return 1", "return 2")
    t2 = commit(repo, "helper returns 2", {"auth/issuer.py": text})
    text = text.replace("self.key = key", "self.key = key\n        self.alg = 'HS256'")
    t3 = commit(repo, "choose an algorithm", {"auth/issuer.py": text})
    text = text.replace("86400", "3600")
    t4 = commit(repo, "tokens expire after an hour", {"auth/issuer.py": text})

    result = bisect(repo, mem)
    assert result.culprit is not None
    assert result.culprit.commit == t4
    assert result.culprit.cause == "changed"
    assert result.culprit.lines_before == (10, 11)
    assert result.culprit.hunk is not None and "+        return" in result.culprit.hunk.text
    assert [s.commit for s in result.touches] == [t1, t2, t3]

    steps = log(repo, mem).steps
    assert [s.commit for s in steps] == [t1, t2, t3, t4]
    assert [s.verdict for s in steps[:3]] == [_intact("symbol")] * 3  # as judge says of each version
    assert [s.lines_after for s in steps[:3]] == [(9, 10), (9, 10), (10, 11)]
    assert steps[3].verdict is Verdict.CHANGED
    assert [r.drift for r in drift_at(repo, [mem], t3).results] == [Drift.FRESH]
    assert drift_at(repo, [mem], t3).results[0].checks[0].lines_now == (10, 11)
    assert [r.drift for r in drift_at(repo, [mem], t4).results] == [Drift.STALE]


def test_symbol_missing_is_a_culprit(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "issuer", {"auth/issuer.py": ISSUER_PY})
    mem = remember(repo, "helper returns 1", AnchorRef("auth/issuer.py", symbol="helper"))
    gone = commit(repo, "drop helper", {"auth/issuer.py": ISSUER_PY.split("\n\ndef helper")[0] + "\n"})
    result = bisect(repo, mem)
    assert result.culprit is not None and result.culprit.commit == gone
    assert result.culprit.verdict is Verdict.SYMBOL_MISSING


# -- the working tree ---------------------------------------------------------------------------

def test_uncommitted_edit_inside_the_span_is_the_working_tree(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "settings", {"settings.py": "A = 1\nB = 2\nC = 3\nD = 4\n"})
    mem = remember(repo, "B is two", AnchorRef("settings.py", lines=(2, 3)))
    commit(repo, "above", {"settings.py": "Z = 0\nA = 1\nB = 2\nC = 3\nD = 4\n"})
    (repo / "settings.py").write_text("Z = 0\nA = 1\nB = 20\nC = 3\nD = 4\n")
    result = bisect(repo, mem)
    culprit = result.culprit
    assert culprit is not None
    assert culprit.commit == WORKING_TREE and culprit.short == WORKING_TREE
    assert culprit.subject == "uncommitted changes"
    assert culprit.cause == "changed"
    assert culprit.lines_before == (3, 4)
    assert culprit.hunk is not None and culprit.hunk.lines == ("-B = 2", "+B = 20")
    assert len(result.touches) == 1
    d = result.to_dict()["culprit"]
    assert d["commit"] == "working tree" and d["short"] == "working tree"
    assert history_facts(repo, mem, Drift.STALE) == ("uncommitted changes", None)


def test_uncommitted_edit_above_the_span_holds(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "settings", {"settings.py": "A = 1\nB = 2\nC = 3\n"})
    mem = remember(repo, "C is three", AnchorRef("settings.py", lines=(3, 3)))
    (repo / "settings.py").write_text("A = 100\nnew = 1\nB = 2\nC = 3\n")
    result = bisect(repo, mem)
    assert result.culprit is None and result.holds
    assert result.anchors[0].lines_now == (4, 4)
    assert result.anchors[0].verdict is Verdict.MOVED
    assert result.to_dict()["culprit"] is None
    assert "the memory holds" in result.describe()


def test_uncommitted_deletion_is_the_working_tree(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "settings", {"settings.py": "A = 1\n"})
    mem = remember(repo, "A is one", AnchorRef("settings.py"))
    (repo / "settings.py").unlink()
    culprit = bisect(repo, mem).culprit
    assert culprit is not None and culprit.commit == WORKING_TREE and culprit.cause == "deleted"


def test_dirty_anchor_follows_the_text_into_a_later_commit(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "settings", {"settings.py": "A = 1\nB = 2\n"})
    (repo / "settings.py").write_text("A = 1\nB = 3\n")
    mem = remember(repo, "B is three", AnchorRef("settings.py", lines=(2, 2)), dirty=True)
    commit(repo, "B is three now", {"settings.py": "A = 1\nB = 3\n"})
    commit(repo, "header", {"settings.py": "# s\nA = 1\nB = 3\n"})
    result = bisect(repo, mem)
    assert result.holds and result.culprit is None
    assert result.anchors[0].lines_now == (3, 3)
    (repo / "settings.py").write_text("# s\nA = 1\nB = 4\n")
    culprit = bisect(repo, mem).culprit
    assert culprit is not None and culprit.commit == WORKING_TREE


def test_dirty_anchor_never_committed_then_discarded_is_the_working_tree(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "settings", {"settings.py": "A = 1\nB = 2\n"})
    (repo / "settings.py").write_text("A = 1\nB = 3\n")
    mem = remember(repo, "B is three", AnchorRef("settings.py", lines=(2, 2)), dirty=True)
    assert bisect(repo, mem).holds  # still on disk
    git(repo, "checkout", "--", "settings.py")
    result = bisect(repo, mem)
    assert result.culprit is not None and result.culprit.commit == WORKING_TREE


# -- merges, renames, binary files ------------------------------------------------------------

def test_merge_moves_the_span_and_a_rename_is_followed(git_repo: Path) -> None:
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 11))
    commit(repo, "base", {"src/a.txt": body, "img.bin": b"\x00\x01\x02"})
    mem = remember(repo, "line 5 matters", AnchorRef("src/a.txt", lines=(5, 6)))
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side: prepend", {"src/a.txt": "top\n" + body, "img.bin": b"\x00\x01\x03"})
    commit(repo, "side: binary", {"img2.bin": b"\x00" * 50})
    git(repo, "checkout", "-q", "main")
    commit(repo, "main: unrelated", {"other.txt": "x\n"})
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "side",
        env={"GIT_AUTHOR_DATE": "2026-08-20T10:00:00+00:00", "GIT_COMMITTER_DATE": "2026-08-20T10:00:00+00:00"})
    merge = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "mv", "src/a.txt", "src/b.txt")
    renamed = commit(repo, "rename a to b", {})

    result = log(repo, mem)
    steps = result.steps
    assert [s.commit for s in steps] == [merge, renamed]  # side commits are one merge step
    assert steps[0].merge and steps[0].verdict is Verdict.MOVED
    assert steps[0].lines_after == (6, 7)
    # the rename moved the text, byte for byte: followed, not a culprit (issue 18)
    assert steps[1].verdict is Verdict.MOVED and steps[1].path_now == "src/b.txt"
    assert steps[1].renamed_to == "src/b.txt" and steps[1].lines_after == (6, 7)
    found = bisect(repo, mem)
    assert found.holds and found.culprit is None
    assert found.anchors[0].path_now == "src/b.txt" and found.anchors[0].lines_now == (6, 7)


def test_anchor_taken_on_a_side_branch_starts_at_its_merge(git_repo: Path) -> None:
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 11))
    commit(repo, "base", {"a.txt": body})
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side edit", {"a.txt": body.replace("line 8", "LINE 8")})
    mem = remember(repo, "line 8 shouts", AnchorRef("a.txt", lines=(8, 8)))
    git(repo, "checkout", "-q", "main")
    commit(repo, "main: change line 2", {"a.txt": body.replace("line 2\n", "line 2\nextra\n")})
    git(repo, "merge", "-q", "--no-edit", "side",
        env={"GIT_AUTHOR_DATE": "2026-08-20T10:00:00+00:00", "GIT_COMMITTER_DATE": "2026-08-20T10:00:00+00:00"})
    merge = git(repo, "rev-parse", "HEAD").strip()
    steps = log(repo, mem).steps
    # Diffed from the anchor's own commit, the merge brings main's insertion above line 8.
    assert [s.commit for s in steps] == [merge]
    assert steps[0].verdict is Verdict.MOVED and steps[0].lines_after == (9, 9)
    assert bisect(repo, mem).holds


def test_a_checkout_older_than_the_anchor_is_one_step_back(git_repo: Path) -> None:
    """HEAD behind the anchor's commit (an older checkout): one step, from that commit to HEAD."""
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 11))
    commit(repo, "base", {"a.txt": body})
    old = git(repo, "rev-parse", "HEAD").strip()
    commit(repo, "line 8 grows", {"a.txt": body.replace("line 8", "line 8 grown")})
    mem = remember(repo, "line 8 has grown", AnchorRef("a.txt", lines=(8, 8)))
    git(repo, "checkout", "-q", old)
    assert [(s.commit, s.verdict) for s in log(repo, mem).anchors[0].steps] == [(old, Verdict.CHANGED)]
    assert bisect(repo, mem).culprit.commit == old  # type: ignore[union-attr]


def test_binary_files_on_the_path(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "logo", {"logo.png": b"\x89PNG\x00\x00\x01", "notes.txt": "a\nb\nc\n"})
    whole = remember(repo, "the logo is final", AnchorRef("logo.png"))
    lines = remember(repo, "b is second", AnchorRef("notes.txt", lines=(2, 2)))
    commit(repo, "binary noise", {"noise.bin": b"\x00\xff" * 100})
    changed = commit(repo, "new logo", {"logo.png": b"\x89PNG\x00\x00\x02"})
    binary = commit(repo, "notes became binary", {"notes.txt": b"a\nb\n\x00c\n"})
    culprit = bisect(repo, whole).culprit
    assert culprit is not None and culprit.commit == changed and culprit.cause == "changed"
    steps = log(repo, lines).steps
    assert [s.commit for s in steps] == [binary]
    assert steps[0].verdict is _intact("lines")  # "b" is still line 2, judged on content
    assert bisect(repo, lines).holds


def test_whole_file_culprit_is_the_first_commit_that_changed_it(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "cfg", {"cfg.toml": "a = 1\n"})
    mem = remember(repo, "cfg is tiny", AnchorRef("cfg.toml"))
    first = commit(repo, "cfg b", {"cfg.toml": "a = 1\nb = 2\n"})
    commit(repo, "cfg c", {"cfg.toml": "a = 1\nb = 2\nc = 3\n"})
    result = bisect(repo, mem)
    assert result.culprit is not None and result.culprit.commit == first
    assert result.touches == ()
    assert result.culprit.hunk is not None and result.culprit.hunk.lines == ("+b = 2",)


def test_a_change_undone_later_is_not_a_culprit(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "s", {"s.py": "A = 1\nB = 2\n"})
    mem = remember(repo, "B is two", AnchorRef("s.py", lines=(2, 2)))
    broke = commit(repo, "b3", {"s.py": "A = 1\nB = 3\n"})
    fixed = commit(repo, "revert b3", {"s.py": "A = 1\nB = 2\n"})
    result = bisect(repo, mem)
    assert result.holds and result.culprit is None
    steps = log(repo, mem).steps
    assert [(s.commit, s.invalidates, s.restores) for s in steps] == [(broke, True, False), (fixed, False, True)]
    again = commit(repo, "b4", {"s.py": "A = 1\nB = 4\n"})
    assert bisect(repo, mem).culprit.commit == again  # type: ignore[union-attr]


def test_block_moved_elsewhere_holds_like_drift_says(git_repo: Path) -> None:
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 9))
    commit(repo, "s", {"s.txt": body})
    mem = remember(repo, "lines 2-3", AnchorRef("s.txt", lines=(2, 3)))
    moved = "line 1\nline 4\nline 5\nline 6\nline 2\nline 3\nline 7\nline 8\n"
    commit(repo, "move block", {"s.txt": moved})
    result = bisect(repo, mem)
    verdict, _, where = judge(mem.anchors[0], moved.encode())
    assert verdict is Verdict.MOVED
    assert result.holds and result.anchors[0].lines_now == where == (5, 6)


def test_crlf_conversion_moves_but_does_not_break_lines(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "s", {"s.txt": "a\nb\nc\n"})
    mem = remember(repo, "b", AnchorRef("s.txt", lines=(2, 2)))
    commit(repo, "crlf", {"s.txt": b"a\r\nb\r\nc\r\n"})
    assert bisect(repo, mem).holds


# -- workspaces, errors, progress -------------------------------------------------------------

def test_workspace_in_a_subfolder_of_the_repo(git_repo: Path) -> None:
    repo = git_repo
    ws = repo / "services" / "api"
    commit(repo, "api", {"services/api/app.py": "X = 1\nY = 2\n", "top.txt": "t\n"})
    mem = remember(ws, "Y is two", AnchorRef("app.py", lines=(2, 2)))
    assert mem.anchors[0].path == "app.py"
    broke = commit(repo, "y3", {"services/api/app.py": "X = 1\nY = 3\n"})
    assert bisect(ws, mem).culprit.commit == broke  # type: ignore[union-attr]
    report = drift_at(ws, [mem], "HEAD~1")
    assert [r.drift for r in report.results] == [Drift.FRESH]
    git(repo, "mv", "services/api/app.py", "services/api/main.py")
    commit(repo, "rename", {})
    log_steps = log(ws, mem).steps
    assert log_steps[-1].renamed_to is None  # it was already broken: no rename lookup needed
    fresh = remember(ws, "X is one", AnchorRef("main.py", lines=(1, 1)))
    git(repo, "mv", "services/api/main.py", "services/api/entry.py")
    commit(repo, "rename again", {})
    result = bisect(ws, fresh)
    assert result.holds and result.anchors[0].path_now == "entry.py"  # workspace-relative, followed


def test_not_a_git_repo(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("x\n")
    mem = Memory(id=new_id(), content="x", anchors=(take(os.path.realpath(plain), AnchorRef("f.txt")),))
    with pytest.raises(HistoryError, match="not in a git repository"):
        bisect(plain, mem)
    with pytest.raises(HistoryError, match="not in a git repository"):
        drift_at(plain, [mem], "HEAD")
    assert history_facts(plain, mem, Drift.FRESH) is None


def test_anchor_without_commit_or_with_an_unknown_one(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "f", {"f.txt": "x\n"})
    ref = take(os.path.realpath(repo), AnchorRef("f.txt"))
    mem = Memory(id=new_id(), content="x", anchors=(ref,))
    with pytest.raises(HistoryError, match="has no commit"):
        bisect(repo, mem)
    ghost = Memory(id=new_id(), content="x", anchors=(AnchorRef("f.txt", sha256=ref.sha256, commit="f" * 40),))
    with pytest.raises(HistoryError, match="not in this repository"):
        log(repo, ghost)


def test_progress_reaches_the_total(token_repo: dict) -> None:
    calls: list[tuple[int, int]] = []
    bisect(token_repo["repo"], token_repo["jwts"], progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1] == (6, 6)  # five commits and the working tree
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))


def test_many_commits_walk(git_repo: Path) -> None:
    """A few hundred first-parent commits through fast-import: the walk stays one stream."""
    repo = git_repo
    body = [f"line {i}" for i in range(1, 41)]
    stream: list[bytes] = []

    def blob(text: str) -> bytes:
        data = text.encode()
        return b"data %d\n" % len(data) + data + b"\n"

    for n in range(300):
        if n == 250:
            body[body.index("line 30")] = "line 30 changed"
        elif n:
            body.insert(0, f"header {n}") if n % 3 == 0 else body.append(f"footer {n}")
        msg = f"commit {n}"
        stream.append(b"commit refs/heads/main\n")
        stream.append(b"committer T <t@e> %d +0000\n" % (1_700_000_000 + n * 60))
        stream.append(b"data %d\n%s\n" % (len(msg), msg.encode()))
        stream.append(b"M 100644 inline big.txt\n" + blob("\n".join(body) + "\n"))

    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(stream), check=True)
    git(repo, "checkout", "-q", "-f", "main")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    data = git(repo, "show", f"{first}:big.txt").encode()
    ref = AnchorRef("big.txt", sha256=hashlib.sha256(data).hexdigest(), lines=(29, 31), commit=first)
    ref = AnchorRef(**{**ref.to_dict(), "lines": (29, 31),
                       "content_hash": text_hash(narrowed_text(ref, data)[0])})
    result = bisect(repo, Memory(id=new_id(), content="line 30", anchors=(ref,)))
    culprit = result.culprit
    assert culprit is not None and culprit.subject == "commit 250"
    assert culprit.lines_before == (29 + 83, 31 + 83)  # 83 headers landed above by then
    assert len(result.touches) == 249


def test_hunk_geometry() -> None:
    span = (5, 7)
    assert Hunk(4, 0, 5, 2).above(span) and not Hunk(4, 0, 5, 2).hits(span)  # insert after 4
    assert Hunk(5, 0, 6, 1).hits(span)  # insert between 5 and 6
    assert not Hunk(7, 0, 8, 1).hits(span) and not Hunk(7, 0, 8, 1).above(span)  # after 7
    assert Hunk(7, 2, 7, 0).hits(span)
    assert Hunk(1, 4, 1, 0).above(span) and not Hunk(1, 4, 1, 0).hits(span)
    assert Hunk(1, 5, 1, 0).hits(span)
    assert Hunk(9, 1, 9, 1).header == "@@ -9 +9 @@"
    assert Hunk(9, 0, 10, 3).header == "@@ -9,0 +10,3 @@"


def test_symbol_broken_by_syntax_elsewhere_is_found_by_the_full_check(git_repo: Path) -> None:
    """An unclosed string above the class names nothing and misses the class, yet hides the
    method: the carried verdict is checked against a full parse, and the walk redone."""
    repo = git_repo
    commit(repo, "issuer", {"auth/issuer.py": ISSUER_PY})
    mem = remember(repo, "tokens expire after a day", AnchorRef("auth/issuer.py", symbol="TokenIssuer.issue"))
    broken = ISSUER_PY.replace("import time\n", 'import time\nBROKEN = """\n')
    culprit = commit(repo, "unclosed string", {"auth/issuer.py": broken})
    commit(repo, "helper returns 3", {"auth/issuer.py": broken.replace("return 1", "return 3")})
    result = bisect(repo, mem)
    assert result.culprit is not None and result.culprit.commit == culprit
    assert result.culprit.verdict is Verdict.SYMBOL_MISSING
    # Same, but the next step edits inside the method: the flip is checked against its parent.
    commit(repo, "edit inside", {"auth/issuer.py": broken.replace("86400", "60")})
    assert bisect(repo, mem).culprit.commit == culprit  # type: ignore[union-attr]


def test_symbol_walk_agrees_with_judge_at_every_step(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "issuer", {"auth/issuer.py": ISSUER_PY})
    mem = remember(repo, "issue", AnchorRef("auth/issuer.py", symbol="TokenIssuer.issue"))
    versions = [
        ISSUER_PY.replace("import time\n", "import time\nimport os\n"),
        ISSUER_PY.replace("import time\n", "import time\nimport os\n").replace("class TokenIssuer", "class Issuer"),
        ISSUER_PY.replace("import time\n", "import os\n"),
        ISSUER_PY.replace("def helper", "def helper2"),
    ]
    hashes = [commit(repo, f"v{i}", {"auth/issuer.py": v}) for i, v in enumerate(versions)]
    steps = log(repo, mem).steps
    assert [s.commit for s in steps] == hashes
    for step, text in zip(steps, versions):
        assert step.verdict is judge(mem.anchors[0], text.encode())[0]
    assert steps[1].verdict is Verdict.SYMBOL_MISSING and steps[1].invalidates
    assert steps[2].restores


def test_describe_and_empty_cases(token_repo: dict) -> None:
    repo, cs = token_repo["repo"], token_repo["commits"]
    text = bisect(repo, token_repo["expiry"]).describe()
    assert text.splitlines()[0] == f"culprit: {short(repo, cs[3])} 2026-08-04 Test Author  raise token expiry"
    assert "-EXPIRY_HOURS = 24" in text and "1 earlier step touched" in text
    bare = Memory(id=new_id(), content="no anchors")
    assert bisect(repo, bare).holds and bisect(repo, bare).to_dict()["culprit"] is None
    assert "no anchors" in bisect(repo, bare).describe()
    assert log(repo, token_repo["expiry"]).to_dict()["steps"][0]["anchor"] == "auth/token.py:7"


def test_repository_without_commits(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(HistoryError, match="no commits yet"):
        drift_at(empty, [], "HEAD")


def test_progress_bar_draws_only_on_long_walks_in_a_terminal(token_repo: dict) -> None:
    import io

    from rich.console import Console

    from anchorfs.history import progress_bar

    buf = io.StringIO()
    with progress_bar(min_steps=1, console=Console(file=buf, force_terminal=True, width=80)) as cb:
        bisect(token_repo["repo"], token_repo["jwts"], progress=cb)
    assert "walking history" in buf.getvalue()
    quiet = io.StringIO()
    with progress_bar(min_steps=1000, console=Console(file=quiet, force_terminal=True)) as cb:
        bisect(token_repo["repo"], token_repo["jwts"], progress=cb)
    piped = io.StringIO()
    with progress_bar(min_steps=1, console=Console(file=piped, force_terminal=False)) as cb:
        bisect(token_repo["repo"], token_repo["jwts"], progress=cb)
    assert quiet.getvalue() == "" and piped.getvalue() == ""


# -- blobs over the size bound (issue 15 item 9) -----------------------------------------------

SMALL_BOUND = 4096


@pytest.fixture
def bounded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size bound lowered to a few KiB; the sizes of every blob the walk read."""
    import anchorfs.history as history_mod
    from anchorfs.history import walk as history_at, follow as history_follow, patch as history_patch, repo as history_repo, tracker as history_tracker

    for mod in (history_at, history_follow, history_patch, history_repo, history_tracker):  # every module of history that reads the bound
        monkeypatch.setattr(mod, "MAX_FILE_BYTES", SMALL_BOUND)
    read: list[int] = []
    real_get = history_mod._Blobs.get

    def get(self: object, spec: str) -> bytes | None:
        data = real_get(self, spec)  # type: ignore[arg-type]
        if data is not None:
            read.append(len(data))
        return data

    monkeypatch.setattr(history_mod._Blobs, "get", get)
    return read


def _lines_file(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


@pytest.mark.parametrize("kind", ["lines", "symbol", "file"])
def test_a_blob_over_the_bound_is_never_read_and_is_unknown(git_repo: Path, bounded: list[int], kind: str) -> None:
    repo = git_repo
    small = "def keep():\n    return 1\n\n" + _lines_file(20)
    commit(repo, "small", {"data.py": small})
    ref = {"lines": AnchorRef("data.py", lines=(1, 2)), "symbol": AnchorRef("data.py", symbol="keep"),
           "file": AnchorRef("data.py")}[kind]
    mem = remember(repo, "keep returns 1", ref)
    big = small + "# " + "x" * (SMALL_BOUND * 16) + "\n"  # the anchored text untouched, far over the bound
    grown = commit(repo, "grow the file past the bound", {"data.py": big})

    result = bisect(repo, mem)
    assert max(bounded, default=0) <= SMALL_BOUND  # the big blob was never read, only sized
    hist = result.anchors[0]
    assert hist.verdict is Verdict.UNREADABLE
    assert not result.holds and result.unknown and result.culprit is None
    assert result.to_dict()["holds"] is False and result.to_dict()["unknown"] is True
    assert result.describe().startswith("unknown: ") and "too large" in result.describe()
    steps = log(repo, mem).steps
    assert [(s.commit, s.verdict) for s in steps] == [(grown, Verdict.UNREADABLE)]  # no working-tree step
    assert "too large" in steps[0].detail and not steps[0].invalidates

    report = drift_at(repo, [mem], "HEAD")
    assert report.results[0].drift is Drift.UNKNOWN
    assert report.results[0].checks[0].verdict is Verdict.UNREADABLE
    assert "too large" in report.results[0].checks[0].detail
    assert drift_at(repo, [mem], "HEAD~1").results[0].drift is Drift.FRESH
    assert max(bounded, default=0) <= SMALL_BOUND


def test_a_step_over_the_bound_then_back_under_it_holds(git_repo: Path, bounded: list[int]) -> None:
    repo = git_repo
    small = _lines_file(30)
    commit(repo, "small", {"notes.txt": small})
    mem = remember(repo, "line 5 is five", AnchorRef("notes.txt", lines=(5, 5)))
    commit(repo, "vendor a huge blob", {"notes.txt": small + "z" * (SMALL_BOUND * 4) + "\n"})
    commit(repo, "drop it again", {"notes.txt": "top\n" + small})
    result = bisect(repo, mem)
    assert result.holds and not result.unknown and result.culprit is None
    steps = log(repo, mem).steps
    assert [s.verdict for s in steps] == [Verdict.UNREADABLE, Verdict.MOVED]
    assert result.anchors[0].lines_now == (6, 6)
    assert max(bounded) <= SMALL_BOUND


def test_a_working_tree_file_over_the_bound_is_unknown(git_repo: Path, bounded: list[int]) -> None:
    repo = git_repo
    commit(repo, "small", {"notes.txt": _lines_file(10)})
    mem = remember(repo, "line 2 is two", AnchorRef("notes.txt", lines=(2, 2)))
    (repo / "notes.txt").write_text(_lines_file(10) + "y" * (SMALL_BOUND * 4) + "\n")
    result = bisect(repo, mem)
    assert result.unknown and not result.holds and result.culprit is None
    last = result.anchors[0].steps[-1]
    assert last.commit == WORKING_TREE and last.verdict is Verdict.UNREADABLE


def test_a_revision_with_spaces_is_an_unknown_revision(token_repo: dict) -> None:
    repo = token_repo["repo"]
    for rev in ("HEAD x", "HEAD  x", "HEAD:auth/token.py x", "HEAD\tx"):
        with pytest.raises(HistoryError, match="unknown revision"):
            drift_at(repo, [token_repo["expiry"]], rev)
    with pytest.raises(HistoryError, match="unknown revision"):
        drift_at(repo, [token_repo["expiry"]], "HEAD:auth/token.py")  # a blob, not a commit
