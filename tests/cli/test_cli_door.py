"""Issue 16, the CLI door: every input honoured as documented or refused in one line, with the
exit-code rule (2 usage, 1 anchorfs error, 90 stale) and nothing written on refusal.

Commands run in this process through `anchorfs.cli.commands.main`, the real entry (exit code, stdout
and stderr as a shell sees them); real files, real git repos, real LanceDB.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import click
import pytest
from conftest import git, shown

import anchorfs
from anchorfs.cli.commands import EXIT_STALE, cli, main

USERS_PY = '''class UserRepo:
    def getUserById(self, uid):
        return self.rows[uid]


def helper():
    return 1
'''

README = Path(__file__).resolve().parents[2] / "README.md"
CLI_DOC = README.parent / "docs" / "cli.md"


class Ran(NamedTuple):
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `anchorfs ARGS` as the console script does; `stdin` bytes feed `record -`."""

    def run(*args: str, stdin: bytes | None = None) -> Ran:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        else:  # pragma: no cover - main always exits
            code = 0
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "src").mkdir()
    (git_repo / "src" / "users.py").write_text(USERS_PY)
    (git_repo / "notes.txt").write_text("one\ntwo\nthree\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "initial")
    anchorfs.init(git_repo)
    return git_repo


def ledger_bytes(root: Path) -> bytes:
    path = root / ".anchorfs" / "ledger.jsonl"
    return path.read_bytes() if path.exists() else b""


def one_error(ran: Ran, fragment: str) -> None:
    assert ran.code == 1, ran
    lines = ran.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("anchorfs: error: "), ran.err
    assert fragment in lines[0], ran.err
    assert ran.out == ""


def usage_error(ran: Ran, fragment: str) -> None:
    assert ran.code == 2, ran
    assert "Usage:" in ran.err and fragment in ran.err, ran.err
    assert "anchorfs: error:" not in ran.err and ran.out == ""


# --------------------------------------------------------------------------- demo --keep


def test_demo_refuses_a_folder_that_is_not_empty_and_touches_nothing(cli_run: Any, git_repo: Path) -> None:
    (git_repo / "auth").mkdir()
    token = git_repo / "auth" / "token.py"
    token.write_text("MY_WORK = 1\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "mine")
    token.write_text("MY_WORK = 2  # uncommitted\n")
    before = git(git_repo, "log", "--oneline")
    for option in ("--keep", "--root"):
        one_error(cli_run("demo", option, str(git_repo)), "is not empty")
    assert token.read_text() == "MY_WORK = 2  # uncommitted\n"
    assert git(git_repo, "log", "--oneline") == before
    assert not (git_repo / ".anchorfs").exists() and not (git_repo / "config").exists()
    usage_error(cli_run("demo", "--root", str(git_repo), "--keep", str(git_repo / "other")), "give one")


def test_demo_root_is_where_the_demo_runs_and_is_kept(cli_run: Any, tmp_path: Path) -> None:
    where = tmp_path / "demo-here"
    ran = cli_run("demo", "--root", str(where), "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["root"] == str(where) and data["successor"]
    assert (where / ".anchorfs" / "ledger.jsonl").is_file() and (where / "auth" / "token.py").is_file()


# --------------------------------------------------------------------------- reindex --embedder


def test_reindex_with_e5_is_remembered_and_a_forced_mismatch_names_the_setting(
    cli_run: Any, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = str(repo)
    a = cli_run("--root", r, "--json", "record", "helper returns one", "--anchor", "src/users.py#helper").json()
    cli_run("--root", r, "record", "user rows are read by getUserById", "--anchor", "src/users.py#UserRepo")
    ran = cli_run("--root", r, "--json", "reindex", "--embedder", "e5")
    assert ran.code == 0 and ran.err == "", ran
    assert ran.json() == {"memories": 2, "embedder": "e5", "next_embedder": "e5"}

    hits = cli_run("--root", r, "--json", "query", "what does helper return")
    assert hits.code == 0, hits.err  # the next command reads the store's embedder: no mismatch
    assert hits.json()["hits"][0]["id"] == a["id"]
    assert cli_run("--root", r, "record", "a third memory, embedded by e5").code == 0
    assert cli_run("--root", r, "--json", "reindex").json()["embedder"] == "e5"  # kept, not reset

    monkeypatch.setenv("ANCHORFS_EMBEDDER", "hashing")  # a choice that disagrees: still one clear line
    ran = cli_run("--root", r, "query", "helper")
    one_error(ran, "embedder =")
    assert "ANCHORFS_EMBEDDER=e5" in ran.err and "reindex --embedder hashing" in ran.err
    monkeypatch.delenv("ANCHORFS_EMBEDDER")

    (repo / ".anchorfs.toml").write_text('embedder = "hashing"\n')
    ran = cli_run("--root", r, "reindex", "--embedder", "e5")  # done as asked, and the conflict said
    assert ran.code == 0 and "reindexed 3 memories with the e5 embedder" in ran.out
    assert "warning" in ran.err and 'embedder = "e5"' in ran.err
    assert cli_run("--root", r, "--json", "reindex").json()["embedder"] == "hashing"  # the config's choice
    (repo / ".anchorfs.toml").unlink()
    assert cli_run("--root", r, "--json", "query", "helper").json()["hits"]


# --------------------------------------------------------------------------- paths from the cwd


def test_anchor_paths_resolve_against_the_current_folder_first(
    cli_run: Any, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "src" / "notes.txt").write_text("src notes\n")
    monkeypatch.chdir(repo / "src")
    m = cli_run("--json", "record", "helper returns one", "--anchor", "users.py#helper",
                "--anchor", "notes.txt:1", "--anchor", "../notes.txt").json()
    assert [(a["path"], a["symbol"], a["lines"]) for a in m["anchors"]] == [
        ("src/users.py", "helper", None), ("src/notes.txt", None, [1, 1]), ("notes.txt", None, None)]
    # a path that names nothing here but does from the root keeps its root-relative meaning
    n = cli_run("--json", "record", "the repo notes", "--anchor", "src/users.py#UserRepo").json()
    assert n["anchors"][0]["path"] == "src/users.py"
    before = ledger_bytes(repo)
    one_error(cli_run("record", "x", "--anchor", "nope.py"), "'src/nope.py' does not exist")  # shown as resolved
    one_error(cli_run("record", "x", "--anchor", "../../outside.txt"), "resolves outside the workspace")
    assert ledger_bytes(repo) == before

    re_ = cli_run("--json", "reanchor", m["id"], "--to", "users.py:5-6").json()
    assert [(a["path"], a["lines"]) for a in re_["anchors"]] == [("src/users.py", [5, 6])]
    sup = cli_run("--json", "supersede", n["id"], "rows by id", "--anchor", "users.py#UserRepo.getUserById").json()
    assert [(a["path"], a["symbol"]) for a in sup["anchors"]] == [("src/users.py", "UserRepo.getUserById")]
    monkeypatch.chdir(repo)  # at the root nothing changes
    assert cli_run("--json", "record", "root notes", "--anchor", "notes.txt").json()["anchors"][0]["path"] == "notes.txt"


# --------------------------------------------------------------------------- stdin and --file


def test_record_reads_stdin_and_files(cli_run: Any, repo: Path, tmp_path: Path) -> None:
    r = str(repo)
    m = cli_run("--root", r, "--json", "record", "-", "--anchor", "notes.txt",
                stdin="first line\nsecond line — ünïcode\n".encode()).json()
    assert m["content"] == "first line\nsecond line — ünïcode"
    long_text = "token expiry rules. " * 1500  # 30,000 characters: a long text from a file
    path = tmp_path / "memory.md"
    path.write_text(long_text + "\n", encoding="utf-8")
    m = cli_run("--root", r, "--json", "record", "--file", str(path), "--kind", "decision").json()
    assert (m["content"], m["kind"]) == (long_text, "decision")

    before = ledger_bytes(repo)
    usage_error(cli_run("--root", r, "record", "text", "--file", str(path)), "not two of them")
    usage_error(cli_run("--root", r, "record"), "Missing argument 'TEXT'")
    usage_error(cli_run("--root", r, "record", "--file", str(tmp_path / "missing.md")), "does not exist")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9\n")
    one_error(cli_run("--root", r, "record", "--file", str(bad)), "is not UTF-8 text")
    one_error(cli_run("--root", r, "record", "-", stdin=b"\n  \n"), "needs content")
    assert ledger_bytes(repo) == before


# --------------------------------------------------------------------------- exit codes


def test_exit_codes_follow_one_rule(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    m = cli_run("--root", r, "--json", "record", "helper returns one", "--anchor", "src/users.py#helper").json()
    before = ledger_bytes(repo)
    usage = [  # the shape of the command line: click refuses it, exit 2
        (["query", "x", "-k", "0"], "-k"),
        (["list", "--limit", "0"], "--limit"),
        (["record", "x", "--kind", "bogus"], "'bogus' is not one of"),
        (["supersede", m["id"], "new text", "--kind", "bogus"], "'bogus' is not one of"),
        (["ledger", "--since", "yesterday"], "bad time 'yesterday'"),
        (["query", "x", "--as-of", "garbage"], "bad time 'garbage'"),
        (["query", ""], "empty text"),
        (["query", "   "], "empty text"),
        (["record", ""], "empty text"),
        (["supersede", m["id"], " "], "empty text"),
        (["list", "--drift", "sideways"], "'sideways' is not one of"),
        (["list", "--status", "sideways"], "'sideways' is not one of"),
    ]
    for args, fragment in usage:
        usage_error(cli_run("--root", r, *args), fragment)
    found = [  # what anchorfs finds doing the work: exit 1, one line
        (["show", "zzzzzzzz"], "no memory 'zzzzzzzz'"),
        (["record", "x", "--anchor", "src/users.py#Nope"], "'Nope' not found"),
        (["revert", m["id"]], "nothing to revert"),
        (["at", "no-such-rev"], "no-such-rev"),
    ]
    for args, fragment in found:
        one_error(cli_run("--root", r, *args), fragment)
    assert ledger_bytes(repo) == before
    ok = cli_run("--root", r, "--json", "ledger", "--since", "7d")
    assert ok.code == 0 and len(ok.json()["entries"]) == 1
    assert cli_run("--root", r, "--json", "query", "helper", "--as-of", "2099-01-01").code == 0


# --------------------------------------------------------------------------- revert, short ids


def test_revert_of_the_successor_undoes_the_supersede(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    old = cli_run("--root", r, "--json", "record", "helper returns one", "--anchor", "src/users.py#helper").json()
    new = cli_run("--root", r, "--json", "supersede", old["id"], "helper returns two").json()
    ran = cli_run("--root", r, "revert", new["id"])
    assert ran.code == 0, ran.err
    assert ran.out.strip() == f"{shown(repo, old['id'])} is active again; its successor {shown(repo, new['id'])} is retracted"
    assert cli_run("--root", r, "--json", "show", old["id"]).json()["status"] == "active"
    assert cli_run("--root", r, "--json", "show", new["id"]).json()["status"] == "retracted"
    newer = cli_run("--root", r, "--json", "supersede", old["id"], "helper returns three").json()
    back = cli_run("--root", r, "--json", "revert", old["id"])  # the old id works as well
    assert (back.code, back.json()["id"], back.json()["status"]) == (0, old["id"], "active")
    assert cli_run("--root", r, "--json", "show", newer["id"]).json()["status"] == "retracted"


def test_short_id_prefixes(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    a = cli_run("--root", r, "--json", "record", "first memory").json()
    assert cli_run("--root", r, "--json", "show", a["id"][:2]).json()["id"] == a["id"]
    assert cli_run("--root", r, "--json", "show", a["id"][:8].upper()).json()["id"] == a["id"]
    one_error(cli_run("--root", r, "show", a["id"][:1]), "2+ characters")
    b = cli_run("--root", r, "--json", "record", "second memory").json()
    ran = cli_run("--root", r, "show", a["id"][:2])  # ids start with their minute: these two share it
    one_error(ran, "ambiguous")
    assert a["id"] in ran.err and b["id"] in ran.err
    common = os.path.commonprefix([a["id"], b["id"]])
    assert cli_run("--root", r, "--json", "show", b["id"][:len(common) + 1]).json()["id"] == b["id"]


# --------------------------------------------------------------------------- init --nested


def test_init_inside_a_workspace_refuses_unless_nested(
    cli_run: Any, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = repo / "src"
    one_error(cli_run("init", "--root", str(sub)), f"inside the anchorfs workspace at {repo.resolve()}")
    monkeypatch.chdir(sub)
    one_error(cli_run("init"), "--nested")
    assert not (sub / ".anchorfs").exists()
    ran = cli_run("--json", "init", "--nested")
    assert ran.code == 0 and ran.json()["root"] == str(sub.resolve())
    assert (sub / ".anchorfs").is_dir()
    assert cli_run("init").code == 0  # already a workspace: init stays idempotent
    assert cli_run("init", "--root", str(repo)).code == 0  # the parent itself is no problem


# --------------------------------------------------------------------------- at, show, ledger, list


def test_at_exits_90_like_drift_when_stale(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    cli_run("--root", r, "record", "helper returns one", "--anchor", "src/users.py#helper")
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing changes")
    ran = cli_run("--root", r, "at", "HEAD")
    assert ran.code == 0 and "0 stale" in ran.out, ran
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    git(repo, "commit", "-q", "-am", "helper returns two")
    ran = cli_run("--root", r, "at", "HEAD")
    assert ran.code == EXIT_STALE and "1 stale" in ran.out, ran
    ran = cli_run("--root", r, "--json", "at", "HEAD")
    assert ran.code == EXIT_STALE and ran.json()["stale"] == 1


def test_show_checks_drift_now_and_says_when_an_anchor_was_taken_on_uncommitted_changes(
    cli_run: Any, repo: Path
) -> None:
    r = str(repo)
    (repo / "notes.txt").write_text("one\ntwo\nthree\nfour (not committed)\n")
    m = cli_run("--root", r, "--json", "record", "the notes", "--anchor", "notes.txt",
                "--anchor", "src/users.py#helper").json()
    assert [a["dirty"] for a in m["anchors"]] == [True, False]
    shown = cli_run("--root", r, "--json", "show", m["id"]).json()
    assert shown["drift"] == "fresh" and [c["verdict"] for c in shown["checks"]] == ["fresh", "fresh"]
    text = cli_run("--root", r, "show", m["id"]).out
    assert "drift: fresh" in text
    assert text.count("(taken on uncommitted changes)") == 1
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    shown = cli_run("--root", r, "--json", "show", m["id"]).json()  # no drift pass ran: show checks itself
    assert shown["drift"] == "stale" and [c["verdict"] for c in shown["checks"]] == ["fresh", "changed"]
    text = cli_run("--root", r, "show", m["id"]).out
    assert "drift: stale" in text and "now changed" in text
    plain = cli_run("--root", r, "--json", "record", "no anchors here").json()
    assert cli_run("--root", r, "--json", "show", plain["id"]).json()["drift"] == "unanchored"


def test_ledger_lists_content_with_the_ids(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    a = cli_run("--root", r, "--json", "record", "helper returns one " + "x" * 100).json()
    cli_run("--root", r, "supersede", a["id"], "helper returns two", "--reason", "fixed")
    out = cli_run("--root", r, "ledger").out
    lines = out.splitlines()
    assert lines[0].split() == ["at", "op", "actor", "memory", "status", "content", "reason"]
    sup = [line for line in lines if " supersede " in line]
    assert len(sup) == 2  # one row per memory the entry wrote
    assert any("helper returns two" in line and "fixed" in line for line in sup)
    with anchorfs.open(repo) as ws:
        shown = ws.short_ids([a["id"]])[a["id"]]  # ids as a person types them back
    assert any(f" {shown} " in line and "superseded" in line and "helper returns one" in line for line in sup)
    assert "x" * 100 not in out and "…" in out  # shortened


def test_list_shows_drift_for_every_memory(cli_run: Any, repo: Path) -> None:
    r = str(repo)
    fresh = cli_run("--root", r, "--json", "record", "the notes", "--anchor", "notes.txt").json()
    stale = cli_run("--root", r, "--json", "record", "helper returns one", "--anchor", "src/users.py#helper").json()
    plain = cli_run("--root", r, "--json", "record", "no anchors").json()
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    assert cli_run("--root", r, "drift").code == EXIT_STALE
    listed = {m["id"]: m["drift"] for m in cli_run("--root", r, "--json", "list").json()["memories"]}
    assert listed == {fresh["id"]: "fresh", stale["id"]: "stale", plain["id"]: "unanchored"}
    rows = {line.split()[0]: line.split()[3] for line in cli_run("--root", r, "list").out.splitlines()[2:]}
    with anchorfs.open(repo) as ws:
        assert {ws.get(shown).id: drift for shown, drift in rows.items()} == listed  # ids typed back
    for drift, ids in (("fresh", [fresh["id"]]), ("stale", [stale["id"]]), ("unanchored", [plain["id"]]),
                       ("unknown", [])):
        got = [m["id"] for m in cli_run("--root", r, "--json", "list", "--drift", drift).json()["memories"]]
        assert got == ids, drift


# --------------------------------------------------------------------------- every command


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name, cmd in sorted(group.commands.items()):
        out.append(((*prefix, name), cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
    return out


def _option_names(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}


def test_every_command_takes_root_and_json_as_the_docs_say() -> None:
    readme = CLI_DOC.read_text()
    assert "Every command takes `--root DIR` and `--json`" in readme
    commands = _commands(cli)
    assert len(commands) >= 25
    for path, cmd in commands:
        assert {"--root", "--json"} <= _option_names(cmd), path
        if not isinstance(cmd, click.Group):  # every command a user can run is in the command line's doc
            assert re.search(rf"anchorfs {' '.join(path)}\b", readme), path


def test_no_command_accepts_an_option_it_ignores(cli_run: Any, repo: Path, tmp_path: Path) -> None:
    r = str(repo)
    usage_error(cli_run("mcp", "--json", "--root", r), "--json does not apply to mcp")
    ran = cli_run("hook", "--root", r, "--json", "install")  # the group takes them too
    assert ran.code == 0 and ran.json()["changed"] is True
    ran = cli_run("--json", "hook", "install", "--root", r)
    assert ran.code == 0 and ran.json()["changed"] is False
    ran = cli_run("hook", "--root", r, "uninstall")
    assert ran.code == 0 and ran.out.startswith("removed from")
    elsewhere = tmp_path / "not-a-workspace"
    elsewhere.mkdir()
    one_error(cli_run("hook", "--root", str(elsewhere), "install"), "not an anchorfs workspace")
