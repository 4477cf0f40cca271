"""History follows the anchored content across renames (issue 18), and bisect says what broke,
once (issue 17): real git repositories built by each test, real anchors taken on them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner
from conftest import git

import anchorfs
from anchorfs.anchor.anchors import take
from anchorfs.cli.commands import cli
from anchorfs.history import WORKING_TREE, bisect, drift_at, log
from anchorfs.core.model import AnchorRef, Drift, Memory, Verdict, new_id

SESSION_PY = '''"""Session helpers."""
import os


class SessionStore:
    """Where sessions live."""

    def __init__(self, url):
        self.url = url

    def get(self, key):
        return self.url + key


def expiry_seconds():
    return 3600


def helper():
    return os.getcwd()
'''

EXPIRY_LINES = (15, 16)  # def expiry_seconds(): / return 3600
_day = [0]


def commit(repo: Path, message: str, files: dict[str, str | None] | None = None) -> str:
    """Write (None: delete) files, commit with a fixed date, return the hash."""
    for rel, content in (files or {}).items():
        if content is None:
            git(repo, "rm", "-q", rel)
            continue
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(content)
        git(repo, "add", rel)
    _day[0] += 1
    when = f"2026-09-{_day[0] % 28 + 1:02d}T10:00:00+00:00"
    git(repo, "commit", "-q", "--allow-empty", "-m", message, env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
    return git(repo, "rev-parse", "HEAD").strip()


def remember(root: Path, *refs: AnchorRef) -> Memory:
    head = git(root, "rev-parse", "HEAD").strip()
    anchors = tuple(take(os.path.realpath(root), ref, commit=head) for ref in refs)
    return Memory(id=new_id(), content="a claim about sessions", anchors=anchors)


def base(repo: Path) -> tuple[str, Memory, Memory, Memory]:
    """The module, committed, and three memories on it: lines, a symbol, the whole file."""
    c0 = commit(repo, "add sessions", {"src/session.py": SESSION_PY, "README.md": "hi\n"})
    lines = remember(repo, AnchorRef("src/session.py", lines=EXPIRY_LINES))
    symbol = remember(repo, AnchorRef("src/session.py", symbol="SessionStore.get"))
    whole = remember(repo, AnchorRef("src/session.py"))
    return c0, lines, symbol, whole


# -- renames: followed, never a culprit -----------------------------------------------------------

def test_git_mv_r100_is_a_moved_step_and_no_culprit(git_repo: Path) -> None:
    repo = git_repo
    c0, lines, symbol, whole = base(repo)
    git(repo, "mv", "src/session.py", "src/sessions.py")
    renamed = commit(repo, "rename session to sessions")
    later = commit(repo, "append a helper", {"src/sessions.py": SESSION_PY + "\n\ndef more():\n    return 1\n"})
    for mem in (lines, symbol, whole):
        steps = log(repo, mem).steps
        assert steps[0].commit == renamed
        assert steps[0].verdict is Verdict.MOVED
        assert steps[0].path_now == "src/sessions.py" and steps[0].renamed_to == "src/sessions.py"
        assert "now at src/sessions.py" in steps[0].detail
        result = bisect(repo, mem)
        if mem is whole:  # the whole file changed after its rename: that commit broke it
            assert result.culprit is not None and result.culprit.commit == later
            assert result.culprit.path == "src/sessions.py" and result.culprit.cause == "changed"
            continue
        assert result.holds and result.culprit is None
        assert result.anchors[0].path_now == "src/sessions.py"
        assert result.anchors[0].verdict is Verdict.MOVED  # relative to the anchor, as drift says
        # the walk went on in the new file: the later commit is a step, in place, not a move
        assert [s.commit for s in steps] == [renamed, later]
        assert steps[1].verdict is Verdict.FRESH and steps[1].path == "src/sessions.py"
        assert steps[1].path_now is None
    assert log(repo, lines).steps[0].lines_after == EXPIRY_LINES
    at = drift_at(repo, [lines, symbol], "HEAD")
    assert [r.drift for r in at.results] == [Drift.FRESH, Drift.FRESH]
    assert [(c.verdict, c.path_now) for r in at.results for c in r.checks] == [
        (Verdict.MOVED, "src/sessions.py"), (Verdict.MOVED, "src/sessions.py")]
    assert drift_at(repo, [lines], c0).results[0].checks[0].verdict is Verdict.FRESH


def test_rename_with_small_edits_elsewhere_in_the_file(git_repo: Path) -> None:
    repo = git_repo
    _, lines, symbol, whole = base(repo)
    git(repo, "mv", "src/session.py", "src/store.py")
    edited = SESSION_PY.replace('"""Session helpers."""', '"""Session helpers (the store)."""') + "\nVERSION = 2\n"
    renamed = commit(repo, "rename and touch up", {"src/store.py": edited})
    status = git(repo, "show", "-M", "--name-status", "--format=", "HEAD").split()[0]
    assert status.startswith("R") and status != "R100"  # a rename with edits, as git sees it
    for mem in (lines, symbol):
        result = bisect(repo, mem)
        assert result.holds, result.describe()
        assert result.anchors[0].path_now == "src/store.py"
        step = log(repo, mem).steps[0]
        assert step.commit == renamed and step.verdict is Verdict.MOVED and step.path_now == "src/store.py"
    assert bisect(repo, lines).anchors[0].lines_now == EXPIRY_LINES
    # the whole file's bytes did change in that step: it is the culprit, found at the new path
    culprit = bisect(repo, whole).culprit
    assert culprit is not None and culprit.commit == renamed and culprit.cause == "changed"
    assert culprit.path_now == "src/store.py" and "renamed to src/store.py" in culprit.detail
    assert culprit.hunk is not None and culprit.hunk.lines == (
        '-"""Session helpers."""', '+"""Session helpers (the store)."""')


def test_directory_move(git_repo: Path) -> None:
    repo = git_repo
    _, lines, symbol, _ = base(repo)
    commit(repo, "more", {"src/other.py": "X = 1\n"})
    git(repo, "mv", "src", "lib")
    moved = commit(repo, "src/ becomes lib/")
    for mem in (lines, symbol):
        result = bisect(repo, mem)
        assert result.holds and result.anchors[0].path_now == "lib/session.py"
        assert [(s.commit, s.verdict, s.path_now) for s in log(repo, mem).steps] == [
            (moved, Verdict.MOVED, "lib/session.py")]
    at = drift_at(repo, [symbol], "HEAD").results[0].checks[0]
    assert at.verdict is Verdict.MOVED and at.path_now == "lib/session.py" and at.lines_now == (11, 12)


def test_file_split_moves_the_function_to_a_new_file_unchanged(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "add sessions", {"src/session.py": SESSION_PY})
    expiry = remember(repo, AnchorRef("src/session.py", symbol="expiry_seconds"))
    get = remember(repo, AnchorRef("src/session.py", symbol="SessionStore.get"))
    rest = SESSION_PY.replace("def expiry_seconds():\n    return 3600\n\n\n", "")
    split = commit(repo, "split expiry into its own module",
                   {"src/session.py": rest, "src/expiry.py": "def expiry_seconds():\n    return 3600\n"})
    result = bisect(repo, expiry)
    assert result.holds, result.describe()
    assert result.anchors[0].path_now == "src/expiry.py" and result.anchors[0].lines_now == (1, 2)
    step = log(repo, expiry).steps[0]
    assert (step.commit, step.verdict, step.path_now, step.renamed_to) == (split, Verdict.MOVED, "src/expiry.py", None)
    assert step.hunks == ()  # a move carries no culprit hunk
    assert bisect(repo, get).holds and bisect(repo, get).anchors[0].path_now is None
    # later, a true edit in the new file is the culprit
    edit = commit(repo, "shorter sessions", {"src/expiry.py": "def expiry_seconds():\n    return 60\n"})
    culprit = bisect(repo, expiry).culprit
    assert culprit is not None and culprit.commit == edit and culprit.path == "src/expiry.py"
    assert culprit.hunk is not None and culprit.hunk.lines == ("-    return 3600", "+    return 60")


def test_a_true_edit_after_a_rename_is_the_culprit(git_repo: Path) -> None:
    repo = git_repo
    _, lines, symbol, _ = base(repo)
    git(repo, "mv", "src/session.py", "src/sessions.py")
    renamed = commit(repo, "rename")
    edited = SESSION_PY.replace("return 3600", "return 7200").replace("return self.url + key",
                                                                      "return self.url + '/' + key")
    edit = commit(repo, "longer sessions, slashed keys", {"src/sessions.py": edited})
    for mem, headline in ((lines, ("-    return 3600", "+    return 7200")),
                          (symbol, ("-        return self.url + key", "+        return self.url + '/' + key"))):
        result = bisect(repo, mem)
        culprit = result.culprit
        assert culprit is not None and culprit.commit == edit, result.describe()
        assert culprit.cause == "changed" and culprit.path == "src/sessions.py"
        assert culprit.hunk is not None and culprit.hunk.lines == headline
        assert [(s.commit, s.verdict) for s in result.touches] == [(renamed, Verdict.MOVED)]
        assert "in src/sessions.py" in result.describe()
    at = drift_at(repo, [lines], "HEAD").results[0]
    assert at.drift is Drift.STALE and at.checks[0].path_now == "src/sessions.py"
    assert drift_at(repo, [lines], renamed).results[0].drift is Drift.FRESH


def test_deleted_for_good_is_still_the_culprit(git_repo: Path) -> None:
    repo = git_repo
    _, lines, _, _ = base(repo)
    gone = commit(repo, "drop sessions", {"src/session.py": None, "src/unrelated.py": "def other():\n    pass\n"})
    culprit = bisect(repo, lines).culprit
    assert culprit is not None and culprit.commit == gone and culprit.cause == "deleted"
    assert culprit.path_now is None and culprit.renamed_to is None


def test_uncommitted_renames_are_followed(git_repo: Path) -> None:
    repo = git_repo
    _, lines, symbol, _ = base(repo)
    git(repo, "mv", "src/session.py", "src/staged.py")  # in the index only
    for mem in (lines, symbol):
        result = bisect(repo, mem)
        assert result.holds and result.anchors[0].path_now == "src/staged.py"
        last = log(repo, mem).steps[-1]
        assert last.commit == WORKING_TREE and last.verdict is Verdict.MOVED and last.path_now == "src/staged.py"
    os.rename(repo / "src/staged.py", repo / "src/plain_mv.py")  # untracked, never added
    result = bisect(repo, lines)
    assert result.holds and result.anchors[0].path_now == "src/plain_mv.py"
    (repo / "src/plain_mv.py").write_text(SESSION_PY.replace("return 3600", "return 1"))
    culprit = bisect(repo, lines).culprit
    assert culprit is None or culprit.commit == WORKING_TREE  # not found intact: lost in the working tree
    assert not bisect(repo, lines).holds


# -- bisect says what broke, once --------------------------------------------------------------------

STRUCT_PY = "".join(f"C{i} = {i}\n" for i in range(1, 11)) + '''

class Config:
    host = "localhost"
    port = 8080
    debug = False


def tail():
    return 1
'''


def test_the_headline_hunk_is_the_one_inside_the_anchored_span(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "config", {"cfg.py": STRUCT_PY})
    mem = remember(repo, AnchorRef("cfg.py", symbol="Config"))
    # one commit: ten lines above the class go (a hunk outside it), a field inside changes,
    # and a line below changes (another hunk outside)
    edited = STRUCT_PY.split("\n\nclass")[0].replace("C3 = 3\n", "")
    edited = "".join(f"C{i} = {i}\n" for i in (1, 2)) + "\n\nclass" + STRUCT_PY.split("\n\nclass")[1]
    edited = edited.replace("port = 8080", "port = 9090").replace("return 1", "return 2")
    broke = commit(repo, "drop constants, move the port, bump tail", {"cfg.py": edited})
    culprit = bisect(repo, mem).culprit
    assert culprit is not None and culprit.commit == broke
    assert culprit.hunk is not None and culprit.hunk.lines == ("-    port = 8080", "+    port = 9090")
    assert all(h.hits(culprit.lines_before or (0, 0)) for h in culprit.hunks)  # nothing outside it


def test_a_memory_with_two_anchors_broken_in_two_commits_names_the_first(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "add sessions", {"src/session.py": SESSION_PY})
    mem = remember(repo, AnchorRef("src/session.py", lines=EXPIRY_LINES),
                   AnchorRef("src/session.py", symbol="SessionStore.get"))
    first = commit(repo, "slash keys", {"src/session.py": SESSION_PY.replace("self.url + key", "self.url + '/' + key")})
    second = commit(repo, "longer sessions", {"src/session.py": SESSION_PY.replace(
        "self.url + key", "self.url + '/' + key").replace("return 3600", "return 7200")})
    result = bisect(repo, mem)
    assert result.culprit is not None and result.culprit.commit == first
    assert result.culprit_anchor == mem.anchors[1]
    d = result.to_dict()
    assert d["culprit"]["anchor"] == "src/session.py#SessionStore.get"
    assert [(b["anchor"], b["commit"]) for b in d["broken"]] == [
        ("src/session.py#SessionStore.get", first), ("src/session.py:15-16", second)]
    text = result.describe()
    assert "src/session.py#SessionStore.get" in text.splitlines()[1]
    assert "broke first of 2 broken anchors; then src/session.py:15-16 at" in text


def test_bisect_json_carries_each_hunk_once(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "add sessions", {"src/session.py": SESSION_PY})
    # two anchors broken by the very same hunk, and a touch before it
    mem = remember(repo, AnchorRef("src/session.py", lines=(11, 12)),
                   AnchorRef("src/session.py", symbol="SessionStore.get"))
    commit(repo, "header", {"src/session.py": "# header\n" + SESSION_PY})
    commit(repo, "slash keys", {"src/session.py": "# header\n" + SESSION_PY.replace("self.url + key", "self.url + '/' + key")})
    out = json.dumps(bisect(repo, mem).to_dict())
    assert out.count("+        return self.url + '/' + key") == 1
    assert out.count("-        return self.url + key") == 1
    assert len(out) < 5000  # two anchors' metadata; the hunk once
    d = json.loads(out)
    assert d["culprit"]["hunk"]["header"] == "@@ -13 +13 @@" and d["culprit"]["more_hunks"] == []
    assert all("hunk" not in a["culprit"] for a in d["anchors"])  # each entry names its hunks' headers
    assert [a["culprit"]["hunk_headers"] for a in d["anchors"]] == [["@@ -13 +13 @@"], ["@@ -13 +13 @@"]]
    logged = json.dumps(log(repo, mem).to_dict())
    assert logged.count("+        return self.url + '/' + key") == 2  # one step per anchor, once each


# -- the CLI -------------------------------------------------------------------------------------

def test_cli_log_reports_the_rename_as_moved_with_its_path_and_nothing_else_as_moved(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "add sessions", {"src/session.py": SESSION_PY})
    anchorfs.init(repo)
    with anchorfs.open(repo) as ws:
        mid = ws.record("sessions expire after an hour", anchors=["src/session.py:15-16"]).id
    commit(repo, "header", {"src/session.py": "# header\n" + SESSION_PY})
    commit(repo, "below", {"src/session.py": "# header\n" + SESSION_PY + "\nX = 1\n"})
    git(repo, "mv", "src/session.py", "src/sessions.py")
    commit(repo, "rename")
    runner = CliRunner()
    r = runner.invoke(cli, ["--root", str(repo), "log", mid])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.strip()]
    assert rows[0] == "src/session.py:15-16:"
    moved = [line for line in rows if " moved " in line]
    assert len(moved) == 2  # the header (15-16 -> 16-17) and the rename (to src/sessions.py)
    assert any("16-17" in line and "-> src/sessions.py" in line for line in moved)
    assert any(" fresh " in line and "below" in line for line in rows)
    r = runner.invoke(cli, ["--root", str(repo), "bisect", mid])
    assert r.exit_code == 0 and "the memory holds" in r.output and "now in src/sessions.py" in r.output
    r = runner.invoke(cli, ["--root", str(repo), "at", "HEAD"])
    assert r.exit_code == 0, r.output
    assert "src/sessions.py" in r.output


def test_moved_only_when_the_step_moved_the_text(git_repo: Path) -> None:
    repo = git_repo
    body = "".join(f"line {i}\n" for i in range(1, 101))
    commit(repo, "long", {"big.txt": body})
    mem = remember(repo, AnchorRef("big.txt", lines=(64, 75)))
    below = commit(repo, "edit below", {"big.txt": body.replace("line 90\n", "LINE 90\n")})
    body = body.replace("line 90\n", "LINE 90\n")
    above = commit(repo, "insert above", {"big.txt": "new\n" + body})
    again = commit(repo, "edit below again", {"big.txt": "new\n" + body.replace("line 99\n", "LINE 99\n")})
    steps = log(repo, mem).steps
    assert [(s.commit, s.verdict, s.lines_before, s.lines_after) for s in steps] == [
        (below, Verdict.FRESH, (64, 75), (64, 75)),   # identical in place: not a move
        (above, Verdict.MOVED, (64, 75), (65, 76)),
        (again, Verdict.FRESH, (65, 76), (65, 76)),   # still where the last move left it
    ]
    hist = bisect(repo, mem).anchors[0]
    assert hist.verdict is Verdict.MOVED and hist.lines_now == (65, 76)  # relative to the anchor, as drift says


def test_deleted_then_brought_back_under_another_name_holds_as_drift_says(git_repo: Path) -> None:
    repo = git_repo
    _, lines, symbol, _ = base(repo)
    gone = commit(repo, "drop sessions for now", {"src/session.py": None})
    commit(repo, "unrelated", {"README.md": "hello\n"})
    back = commit(repo, "sessions are back", {"src/auth/sessions.py": SESSION_PY})
    for mem in (lines, symbol):
        result = bisect(repo, mem)
        assert result.holds and result.culprit is None, result.describe()
        assert result.anchors[0].path_now == "src/auth/sessions.py"
        steps = log(repo, mem).steps
        assert [(s.commit, s.verdict, s.invalidates, s.restores) for s in steps] == [
            (gone, Verdict.DELETED, True, False), (back, Verdict.MOVED, False, True)]
        assert steps[-1].path_now == "src/auth/sessions.py"
