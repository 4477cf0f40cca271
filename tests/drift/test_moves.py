"""Renamed and moved code is followed, not called stale (issue 18).

Every case runs twice: in a real git repository built by the test (rename detection since the
anchor's commit) and in a plain folder (files the hash cache never hashed are the new ones).
For each: the drift verdict and `path_now`, the query envelope, and what `reanchor` takes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from conftest import git

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.core import __version__
from anchorfs.core.errors import AnchorError, SymbolNotFoundError
from anchorfs.core.model import Drift, Verdict
from anchorfs.drift.hashcache import HashCache
from anchorfs.drift.manifest import MANIFEST_VERSION

TOKEN = """import jwt


class TokenIssuer:
    def issue(self, user):
        return jwt.encode(user)


def expiry_hours():
    return 24


def helper():
    return 1
"""

# A header of its own, so the split-off file's bytes are not the old file's.
SPLIT_OFF = """import jwt


def expiry_hours():
    return 24
"""


def make(tmp_path: Path, files: dict[str, str], *, use_git: bool) -> Path:
    root = tmp_path / ("repo" if use_git else "plain")
    root.mkdir()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if use_git:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "initial")
    anchorfs.init(root)
    return root


def move(root: Path, old: str, new: str, *, use_git: bool) -> None:
    (root / new).parent.mkdir(parents=True, exist_ok=True)
    if use_git:
        git(root, "mv", old, new)
    else:
        os.rename(root / old, root / new)


def checks(ws: anchorfs.Workspace, m: anchorfs.Memory) -> list[tuple[Verdict, str | None, tuple[int, int] | None]]:
    return [(c.verdict, c.path_now, c.lines_now) for c in ws.check(m).checks]


def envelope_of(ws: anchorfs.Workspace, text: str, memory_id: str) -> str:
    hits = {h.memory.id: h for h in ws.query(text, k=10)}
    return hits[memory_id].envelope


GITS = pytest.mark.parametrize("use_git", [True, False], ids=["git", "plain"])


@GITS
def test_a_renamed_file_keeps_every_kind_of_anchor_fresh(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"src/auth/token.py": TOKEN, "src/other.py": "X = 1\n"}, use_git=use_git)
    with anchorfs.open(root) as ws:
        whole = ws.record("the token module signs with jwt", anchors=["src/auth/token.py"])
        sym = ws.record("issue encodes the user", anchors=["src/auth/token.py#TokenIssuer.issue"])
        lines = ws.record("tokens expire after 24 hours", anchors=["src/auth/token.py:9-10"])
        move(root, "src/auth/token.py", "src/auth/tokens.py", use_git=use_git)  # R100

        report = ws.drift()
        assert report.count(Drift.STALE) == 0 and report.count(Drift.FRESH) == 3
        new = "src/auth/tokens.py"
        assert checks(ws, whole) == [(Verdict.MOVED, new, None)]
        assert checks(ws, sym) == [(Verdict.MOVED, new, (5, 6))]
        assert checks(ws, lines) == [(Verdict.MOVED, new, (9, 10))]
        row = ws.check(lines).checks[0].to_dict()
        assert row["verdict"] == "moved" and row["path_now"] == new and row["lines_now"] == [9, 10]
        env = envelope_of(ws, "tokens expire after 24 hours", lines.id)
        assert env.startswith("[fresh") and "now at src/auth/tokens.py" in env, env

        for m in (whole, sym, lines):  # reanchor follows by itself
            again = ws.reanchor(m.id)
            assert [a.path for a in again.anchors] == [new]
            assert again.anchors[0].symbol == m.anchors[0].symbol and again.anchors[0].lines == m.anchors[0].lines
            assert checks(ws, again) == [(Verdict.FRESH, None, m.anchors[0].lines)]


@GITS
def test_a_rename_with_small_edits_elsewhere_keeps_narrowed_anchors_and_stales_the_whole_file(
        tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=use_git)
    with anchorfs.open(root) as ws:
        whole = ws.record("the token module is final", anchors=["token.py"])
        sym = ws.record("issue encodes the user", anchors=["token.py#TokenIssuer.issue"])
        lines = ws.record("tokens expire after 24 hours", anchors=["token.py:9-10"])
        move(root, "token.py", "tokens.py", use_git=use_git)
        edited = "import os\n" + TOKEN.replace("return 1", "return 2")  # a line above, an edit below
        (root / "tokens.py").write_text(edited)

        assert checks(ws, sym) == [(Verdict.MOVED, "tokens.py", (6, 7))]
        assert checks(ws, lines) == [(Verdict.MOVED, "tokens.py", (10, 11))]
        assert ws.check(lines).checks[0].detail == "token.py:9-10 now at tokens.py lines 10-11"
        gone = ws.check(whole)
        assert gone.drift is Drift.STALE  # the file's bytes changed: a whole-file anchor's contract
        if use_git:  # git paired the files: the changed file is named
            assert (gone.checks[0].verdict, gone.checks[0].path_now) == (Verdict.CHANGED, "tokens.py")
            assert gone.checks[0].detail == "token.py renamed to tokens.py and changed"
        else:
            assert gone.checks[0].verdict is Verdict.DELETED
        assert envelope_of(ws, "issue encodes the user", sym.id).startswith("[fresh")
        assert ws.reanchor(lines.id).anchors[0].spec == "tokens.py:10-11"


@GITS
def test_a_directory_move_is_followed(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"pkg/token.py": TOKEN, "pkg/util.py": "def helper():\n    return 3\n"}, use_git=use_git)
    with anchorfs.open(root) as ws:
        sym = ws.record("issue encodes the user", anchors=["pkg/token.py#TokenIssuer.issue"])
        util = ws.record("the util helper returns three", anchors=["pkg/util.py"])
        if use_git:
            (root / "lib").mkdir()
            git(root, "mv", "pkg", "lib/pkg")
        else:
            (root / "lib").mkdir()
            shutil.move(str(root / "pkg"), str(root / "lib" / "pkg"))
        assert checks(ws, sym) == [(Verdict.MOVED, "lib/pkg/token.py", (5, 6))]
        assert checks(ws, util) == [(Verdict.MOVED, "lib/pkg/util.py", None)]
        assert ws.drift().count(Drift.STALE) == 0
        assert "now at lib/pkg/util.py" in envelope_of(ws, "util helper returns three", util.id)
        assert ws.reanchor(sym.id).anchors[0].spec == "lib/pkg/token.py#TokenIssuer.issue"


@GITS
def test_a_function_split_off_into_a_new_file_unchanged_is_moved(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=use_git)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py#expiry_hours"])
        (root / "expiry.py").write_text(SPLIT_OFF)
        (root / "token.py").write_text(TOKEN.replace("def expiry_hours():\n    return 24\n\n\n", ""))
        if use_git:
            git(root, "add", "expiry.py")
        assert checks(ws, m) == [(Verdict.MOVED, "expiry.py", (4, 5))]
        assert ws.check(m).drift is Drift.FRESH
        assert "now at expiry.py" in envelope_of(ws, "tokens expire after 24 hours", m.id)
        assert ws.reanchor(m.id).anchors[0].spec == "expiry.py#expiry_hours"


@GITS
def test_a_function_moved_within_its_file(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=use_git)
    with anchorfs.open(root) as ws:
        lines = ws.record("tokens expire after 24 hours", anchors=["token.py:9-10"])
        sym = ws.record("helper returns one", anchors=["token.py#helper"])
        body = "def expiry_hours():\n    return 24\n\n\n"
        (root / "token.py").write_text(TOKEN.replace(body, "").replace("import jwt\n\n\n", "import jwt\n\n\n" + body))
        got = ws.check(lines).checks[0]
        assert (got.verdict, got.lines_now, got.path_now) == (Verdict.MOVED, (4, 5), None)
        assert got.detail == "token.py:9-10 now at lines 4-5"
        # a symbol's place is its name: found under it, unchanged, it is fresh, at its lines now
        s = ws.check(sym).checks[0]
        assert (s.verdict, s.lines_now) == (Verdict.FRESH, (13, 14))
        assert s.detail == "token.py#helper unchanged at lines 13-14; the file changed elsewhere"
        assert "now at lines 4-5" in envelope_of(ws, "tokens expire after 24 hours", lines.id)
        assert ws.reanchor(lines.id).anchors[0].spec == "token.py:4-5"


@GITS
def test_a_true_edit_after_a_rename_is_stale(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=use_git)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py#expiry_hours"])
        move(root, "token.py", "tokens.py", use_git=use_git)
        (root / "tokens.py").write_text(TOKEN.replace("return 24", "return 12"))
        md = ws.check(m)
        assert md.drift is Drift.STALE
        c = md.checks[0]
        assert (c.verdict, c.path_now) == (Verdict.CHANGED, "tokens.py")
        if use_git:
            assert c.detail == "token.py#expiry_hours now at tokens.py changed"
        else:  # no git to pair the files: the same symbol, other text, in a file new since is the trace
            assert c.detail == ("token.py#expiry_hours changed: token.py gone, expiry_hours found with other "
                                "text in tokens.py")
        assert envelope_of(ws, "tokens expire after 24 hours", m.id).startswith("[STALE")
        assert ws.reanchor(m.id).anchors[0].spec == "tokens.py#expiry_hours"  # re-verified at the new path


@GITS
def test_a_file_gone_without_a_trace_is_deleted_and_reanchor_asks_where(tmp_path: Path, use_git: bool) -> None:
    root = make(tmp_path, {"token.py": TOKEN, "other.py": "X = 1\n"}, use_git=use_git)
    with anchorfs.open(root) as ws:
        m = ws.record("the token module is final", anchors=["token.py"])
        if use_git:
            git(root, "rm", "-q", "token.py")
        else:
            (root / "token.py").unlink()
        assert checks(ws, m) == [(Verdict.DELETED, None, None)]
        with pytest.raises(AnchorError, match="not found elsewhere; give its new place with --to SPEC"):
            ws.reanchor(m.id)
        assert ws.get(m.id).anchors == m.anchors  # nothing written on refusal


@GITS
def test_a_missing_symbol_names_the_same_body_elsewhere_and_to_takes_one(
        tmp_path: Path, use_git: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=use_git)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py#expiry_hours"])
        (root / "token.py").write_text(TOKEN.replace("def expiry_hours", "def token_ttl_hours"))
        (root / "ttl.py").write_text("def ttl():\n    return 24\n")  # a new file, same body
        assert checks(ws, m) == [(Verdict.SYMBOL_MISSING, None, None)]  # a rename is a change
        with pytest.raises(SymbolNotFoundError) as err:
            ws.reanchor(m.id)
        assert err.value.candidates == ("token.py#token_ttl_hours", "ttl.py#ttl")
        assert "take one with --to SPEC" in str(err.value) and "\n" not in str(err.value)

    monkeypatch.chdir(root)
    out = CliRunner().invoke(cli, ["reanchor", m.id, "--to", "token.py#token_ttl_hours", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["anchors"][0]["symbol"] == "token_ttl_hours"
    with anchorfs.open(root) as ws:
        assert ws.check(ws.get(m.id)).drift is Drift.FRESH


def test_the_cli_reanchor_follows_a_rename_and_drift_json_names_path_now(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=True)
    with anchorfs.open(root) as ws:
        m = ws.record("issue encodes the user", anchors=["token.py#TokenIssuer.issue"])
    git(root, "mv", "token.py", "auth.py")
    monkeypatch.chdir(root)
    runner = CliRunner()
    out = runner.invoke(cli, ["drift", "--json"])
    assert out.exit_code == 0, out.output  # not 90: nothing is stale
    assert json.loads(out.output)["stale"] == 0
    out = runner.invoke(cli, ["query", "issue encodes the user", "--json"])
    assert out.exit_code == 0, out.output
    hit = json.loads(out.output)["hits"][0]
    anchor = hit["anchors"][0]
    assert (hit["drift"], anchor["verdict"], anchor["path_now"], anchor["lines_now"]) == ("fresh", "moved", "auth.py", [5, 6])
    assert "now at auth.py" in hit["envelope"]
    out = runner.invoke(cli, ["reanchor", m.id, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["anchors"][0]["path"] == "auth.py"


# -- found moves outlive the process (the manifest keeps them) ----------------------------------

FRESH_PASS = """
import json, sys, anchorfs
with anchorfs.open(sys.argv[1]) as ws:
    print(json.dumps({r.memory.id: r.to_dict() for r in ws.drift().memories}))
"""


def fresh_drift(root: Path) -> dict[str, dict]:
    """A whole drift pass in a new process, as every CLI run is: memory id -> row."""
    here = str(Path(anchorfs.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-P", "-c", FRESH_PASS, str(root)], cwd=root,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=here))
    assert out.returncode == 0, out.stderr
    rows: dict[str, dict] = json.loads(out.stdout)
    return rows


def moved_from(root: Path) -> frozenset[str]:
    return HashCache(root / ".anchorfs" / "manifest.json").moved_from()


def test_a_new_process_takes_the_move_an_earlier_one_found_without_searching_again(tmp_path: Path) -> None:
    """After a `git mv`, the first pass finds the move through git and keeps it in the manifest;
    a later process re-verifies it there: here git is gone and a copy of the bytes sits where a
    search would look first (`a/token.py` sorts before `moved/token.py`), yet the answer is the
    move found, not a new search's."""
    root = make(tmp_path, {"token.py": TOKEN, "other.py": "X = 1\n"}, use_git=True)
    with anchorfs.open(root) as ws:
        m = ws.record("the token module signs with jwt", anchors=["token.py"])
    move(root, "token.py", "moved/token.py", use_git=True)
    row = fresh_drift(root)[m.id]
    assert (row["drift"], row["anchors"][0]["verdict"], row["anchors"][0]["path_now"]) == ("fresh", "moved", "moved/token.py")
    assert moved_from(root) == {"token.py"}

    shutil.rmtree(root / ".git")
    (root / "a").mkdir()
    (root / "a" / "token.py").write_text(TOKEN)
    row = fresh_drift(root)[m.id]
    assert (row["anchors"][0]["verdict"], row["anchors"][0]["path_now"]) == ("moved", "moved/token.py"), row["anchors"][0]["detail"]


def test_a_kept_move_whose_target_changed_is_judged_again(tmp_path: Path) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=True)
    with anchorfs.open(root) as ws:
        m = ws.record("the token module signs with jwt", anchors=["token.py"])
        sym = ws.record("issue encodes the user", anchors=["token.py#TokenIssuer.issue"])
    move(root, "token.py", "moved/token.py", use_git=True)
    rows = fresh_drift(root)
    assert [rows[i]["anchors"][0]["verdict"] for i in (m.id, sym.id)] == ["moved", "moved"]
    (root / "moved" / "token.py").write_text(TOKEN.replace("return jwt.encode(user)", "return jwt.encode(user, key)"))
    rows = fresh_drift(root)
    assert [(rows[i]["drift"], rows[i]["anchors"][0]["verdict"], rows[i]["anchors"][0]["path_now"])
            for i in (m.id, sym.id)] == [("stale", "changed", "moved/token.py")] * 2
    assert moved_from(root) == frozenset()  # nothing kept that no longer holds


def test_a_kept_move_whose_source_came_back_is_judged_in_place(tmp_path: Path) -> None:
    root = make(tmp_path, {"token.py": TOKEN}, use_git=False)
    with anchorfs.open(root) as ws:
        m = ws.record("the token module signs with jwt", anchors=["token.py"])
    shutil.copy(root / "token.py", root / "copy.py")
    (root / "token.py").unlink()
    assert fresh_drift(root)[m.id]["anchors"][0]["path_now"] == "copy.py"
    assert moved_from(root) == {"token.py"}
    (root / "token.py").write_text(TOKEN)
    row = fresh_drift(root)[m.id]
    assert (row["drift"], row["anchors"][0]["verdict"], row["anchors"][0]["path_now"]) == ("fresh", "fresh", None)
    assert moved_from(root) == frozenset()


@pytest.mark.parametrize("target", ["link/token.py", ".anchorfs/token.py", "token.py"],
                         ids=["symlinked-folder-out", "state-folder", "itself"])
def test_a_crafted_kept_move_never_makes_a_path_outside_be_read(tmp_path: Path, target: str) -> None:
    """A manifest with right CRCs whose move points out of the workspace (through a symlinked
    folder), into `.anchorfs/`, or at the anchor's own path: the copy there has the anchored
    bytes, and still the anchor is `deleted`: every kept path goes through the drift pass's guard."""
    root = make(tmp_path, {"token.py": TOKEN}, use_git=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token.py").write_text(TOKEN)
    (root / "link").symlink_to(outside)
    (root / ".anchorfs" / "token.py").write_text(TOKEN)
    with anchorfs.open(root) as ws:
        m = ws.record("the token module signs with jwt", anchors=["token.py"])
    (root / "token.py").unlink()
    ref = m.anchors[0]
    listed = orjson.dumps([[f"{ref.spec}\n{ref.sha256}", "token.py", target, ref.sha256, True]])
    body = orjson.dumps({})
    folder = os.lstat(root / ".anchorfs")
    head = orjson.dumps({"format": "anchorfs.manifest", "version": MANIFEST_VERSION,
                         "owner": [__version__, folder.st_dev, folder.st_ino], "crc32": zlib.crc32(body),
                         "moves": orjson.Fragment(listed), "moves_crc32": zlib.crc32(listed)})
    (root / ".anchorfs" / "manifest.json").write_bytes(head[:-1] + b',"entries":' + body + b"}")
    assert HashCache(root / ".anchorfs" / "manifest.json").moved_from() == {"token.py"}  # the lead is read
    row = fresh_drift(root)[m.id]
    assert (row["drift"], row["anchors"][0]["verdict"], row["anchors"][0]["path_now"]) == ("stale", "deleted", None)


# -- lines split off into a new file; a rename and an edit without git --------------------------

@GITS
def test_lines_split_off_into_a_new_file_while_the_old_file_stays_are_moved(tmp_path: Path, use_git: bool) -> None:
    """A line anchor's text leaves its file (which stays, edited) for a new file: looked for in
    the files new since (git: added or untracked; no git: changed after the anchor), `moved`."""
    root = make(tmp_path, {"token.py": TOKEN, "old.py": "def expiry_hours():\n    return 24\n"}, use_git=use_git)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py:9-10"])
        other = ws.record("helper returns one", anchors=["token.py:13-14"])
        (root / "expiry.py").write_text(SPLIT_OFF)
        (root / "token.py").write_text(TOKEN.replace("def expiry_hours():\n    return 24\n\n\n", ""))
        if use_git:
            git(root, "add", "expiry.py")
        c = ws.check(m).checks[0]
        assert (c.verdict, c.path_now, c.lines_now) == (Verdict.MOVED, "expiry.py", (4, 5))
        assert c.detail == "token.py:9-10 now at expiry.py lines 4-5"  # not old.py: that copy was already there
        assert ws.check(m).drift is Drift.FRESH
        assert "now at expiry.py" in envelope_of(ws, "tokens expire after 24 hours", m.id)
        assert checks(ws, other) == [(Verdict.MOVED, None, (9, 10))]  # moved up within its own file
        (root / "expiry.py").write_text(SPLIT_OFF.replace("24", "12"))  # and a true edit is a change
        assert checks(ws, m) == [(Verdict.CHANGED, None, None)]
        assert ws.check(m).drift is Drift.STALE


def test_lines_gone_with_no_new_file_anywhere_stay_changed_without_reading_old_files(tmp_path: Path) -> None:
    """Without git only files changed since the anchor are searched: the same lines in a file
    that was already there are a copy, not where the text went."""
    root = make(tmp_path, {"token.py": TOKEN, "copy.py": TOKEN}, use_git=False)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py:9-10"])
        (root / "token.py").write_text(TOKEN.replace("return 24", "return 12"))
        assert checks(ws, m) == [(Verdict.CHANGED, None, None)]


@pytest.mark.parametrize("edit_in_place", [True, False], ids=["edited-in-place", "rewritten"])
def test_without_git_a_rename_and_an_edit_is_changed_naming_the_new_path(tmp_path: Path, edit_in_place: bool) -> None:
    """No git to pair the files: a file renamed by the file system keeps its inode (the hash
    cache saw it at the old path), and a symbol found under its name with other text in a file
    new since is a trace too. Either is positive evidence of where it went: `changed` with that
    `path_now`, still stale, never `deleted`; a file gone with no trace is `deleted`."""
    root = make(tmp_path, {"token.py": TOKEN, "other.py": "X = 1\n"}, use_git=False)
    with anchorfs.open(root) as ws:
        whole = ws.record("the token module is final", anchors=["token.py"])
        sym = ws.record("tokens expire after 24 hours", anchors=["token.py#expiry_hours"])
        gone = ws.record("the other module sets X", anchors=["other.py"])
        assert ws.drift().count(Drift.FRESH) == 3  # the hash cache has seen both files where they were
        os.rename(root / "token.py", root / "tokens.py")
        edited = TOKEN.replace("return 24", "return 12")
        if edit_in_place:
            with open(root / "tokens.py", "r+") as f:
                f.write(edited)
        else:  # an editor writing a new file over it: the inode is new, the symbol still names it
            (root / "tokens.py.tmp").write_text(edited)
            os.replace(root / "tokens.py.tmp", root / "tokens.py")
        (root / "other.py").unlink()

        w = ws.check(whole).checks[0]
        if edit_in_place:
            assert (w.verdict, w.path_now, w.detail) == (Verdict.CHANGED, "tokens.py",
                                                         "token.py renamed to tokens.py and changed")
        else:  # no inode, no symbol to go by: nothing says where it went
            assert (w.verdict, w.path_now) == (Verdict.DELETED, None)
        s = ws.check(sym).checks[0]
        assert (s.verdict, s.path_now) == (Verdict.CHANGED, "tokens.py")
        assert ws.check(whole).drift is ws.check(sym).drift is Drift.STALE
        assert checks(ws, gone) == [(Verdict.DELETED, None, None)]
        assert ws.reanchor(sym.id).anchors[0].spec == "tokens.py#expiry_hours"


def test_lines_found_nowhere_are_not_searched_again_until_git_the_file_or_the_ttl_says_so(tmp_path: Path) -> None:
    """The search for lines gone from a file still there keeps its empty answer by the hash
    cache's rules: while that file hashes the same, git's index keeps its stat and the TTL runs.
    A new untracked file is seen once the TTL is over; a `git add` at once."""
    from anchorfs.drift import DriftChecker

    root = make(tmp_path, {"token.py": TOKEN}, use_git=True)
    with anchorfs.open(root) as ws:
        m = ws.record("tokens expire after 24 hours", anchors=["token.py:9-10"])
    (root / "token.py").write_text(TOKEN.replace("def expiry_hours():\n    return 24\n\n\n", ""))
    now = [1_000_000.0]
    cache = HashCache(root / ".anchorfs" / "manifest.json", ttl=300, clock=lambda: now[0])
    real = os.path.realpath(root)

    def verdict() -> tuple[Verdict, str | None]:
        c = DriftChecker(real, cache).check(m).checks[0]
        return c.verdict, c.path_now

    assert verdict() == (Verdict.CHANGED, None)
    (root / "expiry.py").write_text(SPLIT_OFF)  # untracked: git's index is the same
    now[0] += 299
    assert verdict() == (Verdict.CHANGED, None)  # the kept answer, within the TTL
    now[0] += 2
    assert verdict() == (Verdict.MOVED, "expiry.py")  # past it: searched again, found

    (root / "expiry.py").unlink()
    (root / "token.py").write_text(TOKEN.replace("def expiry_hours():\n    return 24\n\n\n", "# gone\n"))
    assert verdict() == (Verdict.CHANGED, None)  # the file changed: searched again, nothing
    (root / "split.py").write_text(SPLIT_OFF)
    git(root, "add", "split.py")  # the index moved: searched again at once
    assert verdict() == (Verdict.MOVED, "split.py")




# -- issue 37, item 2: a common line found in another file is no evidence of a move

def test_a_common_line_found_in_another_new_file_is_not_a_move(tmp_path: Path) -> None:
    from conftest import git

    root = tmp_path / "go"
    root.mkdir()
    (root / "rng.go").write_text('package rng\n\nimport "math/rand"\n\nfunc Roll() int { return rand.Intn(6) }\n')
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "rng")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        common = ws.record("rng uses math/rand", anchors=["rng.go:3"])
        distinct = ws.record("Roll rolls a die", anchors=["rng.go:5"])
    (root / "rng.go").write_text('package rng\n\nimport "crypto/rand"\n\nfunc Other() int { return 4 }\n')
    (root / "dice.go").write_text('package dice\n\nimport "math/rand"\n\nfunc Roll() int { return rand.Intn(6) }\n')
    with anchorfs.open(root) as ws:
        got = {md.memory.id: md.checks[0] for md in ws.drift().memories}
    assert got[common.id].verdict.value == "changed" and got[common.id].path_now is None
    assert (got[distinct.id].verdict.value, got[distinct.id].path_now) == ("moved", "dice.go")
