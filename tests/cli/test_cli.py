"""The CLI contract: JSON keys (DESIGN.md), `--root` / `--json` on either side of the command,
and exit codes checked through a real process: 0 ok, 1 anchorfs error (one line, no traceback),
2 usage (the command line's shape: an unknown choice, empty text), 90 stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import git

import anchorfs
from anchorfs.cli.commands import EXIT_STALE, cli

USERS_PY = '''class UserRepo:
    def getUserById(self, uid):
        return self.rows[uid]


def helper():
    return 1
'''

MEMORY_KEYS = {"id", "content", "kind", "status", "anchors", "tags", "author", "recorded_at", "valid_from",
               "valid_until", "supersedes", "superseded_by", "reason"}
ANCHOR_KEYS = {"path", "sha256", "symbol", "lines", "commit"}
HIT_KEYS = {"id", "content", "score", "similarity", "drift", "status", "envelope", "anchors"}
CHECK_KEYS = {"path", "symbol", "lines", "verdict", "detail"}


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "src").mkdir()
    (git_repo / "src" / "users.py").write_text(USERS_PY)
    (git_repo / "notes.txt").write_text("one\ntwo\nthree\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "initial")
    anchorfs.init(git_repo)
    return git_repo


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_json(*args: str, code: int = 0) -> Any:
    result = run(*args)
    assert result.exit_code == code, result.output + result.stderr
    return json.loads(result.stdout)


def proc(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point, as a user's shell runs it."""
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "anchorfs", *args],
        cwd=cwd, env=full, capture_output=True, text=True, timeout=120,
    )


def assert_one_error_line(p: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert p.returncode == 1, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("anchorfs: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


# --------------------------------------------------------------------------- JSON contract


def test_init_json(tmp_path: Path) -> None:
    data = run_json("init", "--root", str(tmp_path), "--json")
    assert data["root"] == str(tmp_path.resolve())
    assert data["mcp"] is None
    assert (tmp_path / ".anchorfs").is_dir()


def test_record_and_show_json(repo: Path) -> None:
    r = str(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    rec = run_json("--root", r, "--json", "record", "getUserById reads the replica", "--kind", "decision",
                   "--tag", "db", "--tag", "perf", "--anchor", "src/users.py#UserRepo.getUserById",
                   "--anchor", "notes.txt:2-3", "--author", "ana")
    assert MEMORY_KEYS <= set(rec)
    assert (rec["content"], rec["kind"], rec["status"], rec["tags"], rec["author"]) == (
        "getUserById reads the replica", "decision", "active", ["db", "perf"], "ana")
    assert len(rec["id"]) == 26
    sym, lines = rec["anchors"]
    for a in (sym, lines):
        assert ANCHOR_KEYS <= set(a)
        assert a["commit"] == head
        assert len(a["sha256"]) == 64
    assert (sym["path"], sym["symbol"], sym["lines"]) == ("src/users.py", "UserRepo.getUserById", None)
    assert (lines["path"], lines["symbol"], lines["lines"]) == ("notes.txt", None, [2, 3])

    shown = run_json("--root", r, "--json", "show", rec["id"])
    assert {k: v for k, v in shown.items() if k not in ("drift", "checks", "last_handed")} == rec
    assert (shown["drift"], [c["verdict"] for c in shown["checks"]]) == ("fresh", ["fresh", "fresh"])
    assert shown["last_handed"] is None  # no agent was handed it yet (`list --unused`)
    assert run_json("--root", r, "--json", "show", rec["id"][:10]) == shown


def test_list_query_drift_supersede_json(repo: Path) -> None:
    r = str(repo)
    a = run_json("--root", r, "--json", "record", "helper returns one", "--anchor", "src/users.py#helper")
    b = run_json("--root", r, "--json", "record", "the notes have three lines", "--anchor", "notes.txt")
    c = run_json("--root", r, "--json", "record", "an unanchored note about helper")

    listed = run_json("--root", r, "--json", "list")
    assert list(listed) == ["memories"]
    assert [m["id"] for m in listed["memories"]] == [c["id"], b["id"], a["id"]]
    for m in listed["memories"]:
        assert MEMORY_KEYS <= set(m) and "drift" in m
    assert [m["drift"] for m in listed["memories"]] == ["unanchored", "fresh", "fresh"]
    assert [m["id"] for m in run_json("--root", r, "--json", "list", "--limit", "1")["memories"]] == [c["id"]]

    hits = run_json("--root", r, "--json", "query", "helper")["hits"]
    assert {h["id"] for h in hits} == {a["id"], b["id"], c["id"]}
    for h in hits:
        assert HIT_KEYS <= set(h)
        assert h["drift"] == "fresh" and h["status"] == "active"
        assert isinstance(h["score"], float) and isinstance(h["similarity"], float)
        assert h["envelope"].startswith("[")
        for ch in h["anchors"]:
            assert CHECK_KEYS <= set(ch)
    top = hits[0]
    assert top["id"] == a["id"]
    assert top["anchors"] == [{**top["anchors"][0], "path": "src/users.py", "symbol": "helper", "lines": None,
                               "verdict": "fresh"}]
    assert len(run_json("--root", r, "--json", "query", "helper", "-k", "1")["hits"]) == 1

    report = run_json("--root", r, "--json", "drift")
    assert {"checked", "stale", "unknown", "fresh", "memories"} <= set(report)
    assert (report["checked"], report["stale"], report["unknown"], report["fresh"]) == (2, 0, 0, 2)
    for md in report["memories"]:
        assert {"id", "drift", "anchors"} <= set(md)

    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    report = run_json("--root", r, "--json", "drift", code=EXIT_STALE)
    assert (report["checked"], report["stale"], report["unknown"], report["fresh"]) == (2, 1, 0, 1)
    by_id = {md["id"]: md for md in report["memories"]}
    assert by_id[a["id"]]["drift"] == "stale"
    assert by_id[a["id"]]["anchors"][0]["verdict"] == "changed"
    assert CHECK_KEYS <= set(by_id[a["id"]]["anchors"][0])
    assert [m["id"] for m in run_json("--root", r, "--json", "list", "--drift", "stale")["memories"]] == [a["id"]]

    new = run_json("--root", r, "--json", "supersede", a["id"], "helper returns two", "--reason", "changed")
    assert MEMORY_KEYS <= set(new)
    assert (new["supersedes"], new["status"], new["reason"]) == (a["id"], "active", "changed")
    assert [(x["path"], x["symbol"]) for x in new["anchors"]] == [("src/users.py", "helper")]
    assert run_json("--root", r, "--json", "show", a["id"])["status"] == "superseded"
    assert run_json("--root", r, "--json", "show", a["id"])["superseded_by"] == new["id"]
    report = run_json("--root", r, "--json", "drift")  # the stale one was superseded: exit 0 again
    assert report["stale"] == 0


def test_human_output_is_not_json(repo: Path) -> None:
    r = str(repo)
    result = run("--root", r, "record", "plain text memory", "--anchor", "notes.txt")
    assert result.exit_code == 0
    assert result.stdout.startswith("recorded ") and "(1 anchor)" in result.stdout
    result = run("--root", r, "drift")
    assert result.exit_code == 0
    assert "checked 1: 0 stale, 0 unknown, 1 fresh" in result.stdout


# --------------------------------------------------------------------------- --root / --json placement


@pytest.mark.parametrize(
    "layout",
    [
        ["--root", "{r}", "--json", "show", "{id}"],
        ["show", "{id}", "--root", "{r}", "--json"],
        ["--json", "show", "{id}", "--root", "{r}"],
        ["--root", "{r}", "show", "--json", "{id}"],
        ["show", "--root", "{r}", "{id}", "--json"],
    ],
)
def test_root_and_json_before_or_after_the_command(repo: Path, layout: list[str]) -> None:
    with anchorfs.open(repo) as ws:
        m = ws.record("placement does not matter")
    args = [a.format(r=str(repo), id=m.id) for a in layout]
    assert run_json(*args)["id"] == m.id


def test_the_workspace_is_found_from_the_cwd_and_the_env(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anchorfs.open(repo) as ws:
        m = ws.record("found without --root")
    monkeypatch.chdir(repo / "src")
    assert run_json("--json", "show", m.id)["id"] == m.id
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("ANCHORFS_ROOT", str(repo))
    assert run_json("show", m.id, "--json")["id"] == m.id


# --------------------------------------------------------------------------- exit codes, real process


def test_exit_1_is_one_error_line_without_traceback(repo: Path, tmp_path: Path) -> None:
    r = str(repo)
    assert_one_error_line(proc("--root", r, "record", "x", "--anchor", "src/nope.py"),
                          "anchor file 'src/nope.py' does not exist")
    assert_one_error_line(proc("--root", r, "record", "x", "--anchor", "../outside.txt"),
                          "resolves outside the workspace")
    assert_one_error_line(proc("--root", r, "record", "x", "--anchor", "src/users.py#Nope"),
                          "'Nope' not found in src/users.py")
    assert_one_error_line(proc("--root", r, "show", "zzzzzzzz"), "no memory 'zzzzzzzz'")
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    assert_one_error_line(proc("list", cwd=nowhere), "no anchorfs workspace")
    assert_one_error_line(proc("--root", str(nowhere), "list"), "not an anchorfs workspace")
    (repo / ".anchorfs.toml").write_text("[search]\nk = 'ten'\n")
    assert_one_error_line(proc("--root", r, "list"), "search.k must be int")
    assert not (repo / ".anchorfs" / "ledger.jsonl").exists()


def test_exit_2_on_usage_errors(repo: Path) -> None:
    r = str(repo)
    for args in (["bogus"], ["--root", r, "record"], ["--root", r, "query", "x", "-k", "0"],
                 ["--root", r, "list", "--status", "sideways"], ["--root", r, "record", "x", "--nope"],
                 ["record", "   ", "--root", r], ["--root", r, "record", "x", "--kind", "fact"]):
        p = proc(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert "Usage:" in p.stderr and "Traceback" not in p.stderr
        assert "anchorfs: error:" not in p.stderr


def test_an_ascii_or_a_closed_stdout_never_ends_in_a_traceback(repo: Path) -> None:
    r = str(repo)
    content = "naïve … \U0001f680 helper"
    with anchorfs.open(repo) as ws:
        ws.record(content, anchors=["src/users.py"])
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    p = proc("--json", "drift", "--root", r, env={"PYTHONIOENCODING": "ascii"})
    assert (p.returncode, p.stderr) == (EXIT_STALE, "")
    assert p.stdout.isascii() and json.loads(p.stdout)["memories"][0]["content"] == content
    p = proc("drift", "--root", r, env={"PYTHONIOENCODING": "ascii"})
    assert (p.returncode, p.stderr) == (EXIT_STALE, "")
    assert "na\\u00efve \\u2026" in p.stdout
    closed = subprocess.run([sys.executable, "-m", "anchorfs", "drift", "--root", r], stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: os.close(1), timeout=120)  # `anchorfs drift >&-`
    assert (closed.returncode, closed.stderr) == (EXIT_STALE, "")


def test_exit_0_ok_and_90_when_drift_finds_a_stale_memory(repo: Path) -> None:
    r = str(repo)
    with anchorfs.open(repo) as ws:  # recorded and checked here: the first process stays cheap
        memory = ws.record("helper returns one", anchors=["src/users.py#helper"])
        ws.drift()
    p = proc("drift", "--root", r)
    assert (p.returncode, p.stderr) == (0, "")
    assert "checked 1: 0 stale, 0 unknown, 1 fresh" in p.stdout
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    p = proc("drift", "--root", r, "--json")
    assert p.returncode == EXIT_STALE == 90, p.stderr
    report = json.loads(p.stdout)
    assert (report["checked"], report["stale"]) == (1, 1)
    assert report["memories"][0]["id"] == memory.id
    assert report["memories"][0]["anchors"][0]["verdict"] == "changed"
    assert p.stderr == ""
