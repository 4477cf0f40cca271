"""A newcomer's first hour (issue 38): what a person types back, what `init --for` wires, and
the small refusals a serious tool makes in one line, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import git
from hypothesis import given
from hypothesis import strategies as st

import anchorfs
from anchorfs.cli.commands import main
import anchorfs.agents.digest
from anchorfs.core.model import new_id, short_ids

Run = Callable[..., tuple[int, str, str]]
GIT_DIR = os.path.dirname(shutil.which("git") or "/usr/bin/git")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("TTL = 24\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02 binary\n" * 10)
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "start")
    anchorfs.init(tmp_path)
    return tmp_path


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """`anchorfs --root ROOT ARGS` as the console script runs it: (exit code, stdout, stderr)."""

    def invoke(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        try:
            main(["--root", str(root), *args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def ledger_lines(root: Path) -> int:
    ledger = root / ".anchorfs" / "ledger.jsonl"
    return len(ledger.read_bytes().splitlines()) if ledger.exists() else 0


def test_ids_made_in_one_instant_differ_in_their_first_8_characters_and_still_sort_by_time() -> None:
    ids = [new_id() for _ in range(500)]  # one import: all in the same few milliseconds
    assert len({i[:8] for i in ids}) == len(ids)
    assert ids == sorted(ids)  # made later, sorts later (within a process)
    assert all(len(i) == 26 for i in ids)


def test_memories_recorded_together_are_shown_by_an_8_character_prefix(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        made = ws.record_many([{"content": f"fact number {i}"} for i in range(20)])
        for m in made:
            assert ws.get(m.id[:8]).id == m.id


@given(st.lists(st.text("0123abc", min_size=1, max_size=9), min_size=1, max_size=40, unique=True), st.data())
def test_a_shown_id_is_its_shortest_unique_prefix_of_6_or_more(everyone: list[str], data: st.DataObject) -> None:
    shown = data.draw(st.lists(st.sampled_from(everyone), unique=True))
    short = short_ids(shown, everyone)
    for mid, cut in short.items():
        assert mid.startswith(cut) and (len(cut) >= 6 or cut == mid)
        assert [o for o in everyone if o.startswith(cut) and o != mid] == [] or cut == mid  # types back to it
        if len(cut) > 6:  # one character less would name another too
            assert any(o.startswith(cut[:-1]) for o in everyone if o != mid)


def test_list_query_history_and_the_digest_show_ids_a_person_types_back(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        made = ws.record_many([{"content": f"fact number {i} about the ttl", "anchors": ["a.py"]} for i in range(15)])
        ws.supersede(made[0].id, "fact number 0 about the ttl, corrected")
        digest = anchorfs.agents.digest.digest(ws)
    listed = [line.split()[0] for line in run(root, "list")[1].splitlines()[2:]]
    queried = [line.split()[3] for line in run(root, "query", "fact number ttl", "--all")[1].splitlines()
               if "(relevance" in line]
    history = run(root, "history", made[0].id)[1]
    for shown in (listed, queried, [line.split()[1] for line in digest.splitlines() if line.startswith("- ")]):
        assert shown and all(6 <= len(i) < 26 for i in shown), shown
        with anchorfs.open(root) as ws:
            assert {ws.get(i).id for i in shown} <= {m.id for m in ws.list(status=None)}
            assert len({ws.get(i).id for i in shown}) == len(shown)
    assert made[0].id not in history and made[0].id[:6] in history


def test_the_mcp_server_is_part_of_the_install() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("mcp") for d in project["dependencies"])


def test_init_for_claude_names_this_install_when_anchorfs_is_not_on_path(root: Path, tmp_path: Path, run: Run) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    code, out, err = run(root, "init", "--for", "claude", env={"PATH": f"{empty}:{GIT_DIR}"})
    assert code == 0
    command = json.loads((root / ".mcp.json").read_text())["mcpServers"]["anchorfs"]["command"]
    assert os.path.isabs(command) and os.access(command, os.X_OK)
    hooks = json.loads((root / ".claude" / "settings.json").read_text())["hooks"]
    assert hooks["SessionStart"][0]["hooks"][0]["command"].startswith(command.split()[0])
    said = [line for line in (out + err).splitlines() if "not on PATH" in line]
    assert len(said) == 1 and command in said[0]


def test_init_for_claude_stays_portable_when_anchorfs_is_on_path(root: Path, tmp_path: Path, run: Run) -> None:
    here = tmp_path / "bin"
    here.mkdir()
    (here / "anchorfs").symlink_to(Path(sys.executable).with_name("anchorfs"))
    code, out, err = run(root, "init", "--for", "claude", env={"PATH": f"{here}:{GIT_DIR}"})
    assert code == 0 and "not on PATH" not in out + err
    assert json.loads((root / ".mcp.json").read_text())["mcpServers"]["anchorfs"]["command"] == "anchorfs"
    before = (root / ".mcp.json").read_text()
    code, out, err = run(root, "init", "--mcp", env={"PATH": f"{here}:{GIT_DIR}"})  # the old flag, again
    assert code == 0 and (root / ".mcp.json").read_text() == before  # the portable entry is kept


def test_context_with_empty_text_is_a_usage_error_like_query(root: Path, run: Run) -> None:
    assert run(root, "query", "")[0] == 2
    assert run(root, "context", "")[0] == 2


@pytest.mark.parametrize("command", [["query"], ["context"]])
def test_a_query_past_2000_characters_is_refused_in_one_line(root: Path, command: list[str], run: Run) -> None:
    code, out, err = run(root, *command, "word " * 401)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "2,000 characters" in err
    with anchorfs.open(root) as ws, pytest.raises(anchorfs.InputError):
        ws.query("x" * 2001)


@pytest.mark.parametrize("spec", [".git/HEAD", ".git/config", "blob.bin:1"])
def test_gits_own_files_and_lines_of_a_binary_file_are_no_anchors(root: Path, spec: str, run: Run) -> None:
    before = ledger_lines(root)
    code, out, err = run(root, "record", "a claim", "--anchor", spec)
    assert code == 1 and len(err.strip().splitlines()) == 1, (out, err)
    assert ledger_lines(root) == before


def test_a_whole_binary_file_is_still_an_anchor(root: Path, run: Run) -> None:
    """Its SHA-256 says when it changed as for any file (a model's weights, a logo)."""
    assert run(root, "record", "the logo", "--anchor", "blob.bin")[0] == 0


def test_supersede_with_the_same_text_is_refused_and_points_to_reanchor(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("TTL is 24 hours", anchors=["a.py:1"])
    before = ledger_lines(root)
    code, out, err = run(root, "supersede", m.id, "TTL is 24 hours")
    assert code == 1 and "reanchor" in err and len(err.strip().splitlines()) == 1
    assert ledger_lines(root) == before


def test_log_of_an_unanchored_memory_says_so(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("we deploy on fridays")
    code, out, _ = run(root, "log", m.id)
    assert code == 0 and "no anchors" in out


def test_hook_install_names_every_hook_it_installs(root: Path, run: Run) -> None:
    code, out, _ = run(root, "hook", "install")
    assert code == 0
    for name in ("post-commit", "post-checkout", "post-merge", "post-rewrite"):
        assert name in out


def test_one_memory_reads_the_same_in_every_surface(root: Path, run: Run) -> None:
    """query, context, show, export and the session digest: one envelope, git's facts added after it."""
    from anchorfs.agents.digest import digest

    with anchorfs.open(root) as ws:
        m = ws.record("TTL is 24 hours", anchors=["a.py:1"])
    (root / "a.py").write_text("TTL = 48\n")
    git(root, "commit", "-qam", "longer sessions")
    commit = git(root, "rev-parse", "HEAD~1").strip()[:7]
    head = f"[STALE · a.py:1 changed · anchored {m.recorded_at.date().isoformat()} at {commit}"
    with anchorfs.open(root) as ws:
        hit = ws.query("TTL hours")[0]
        block = ws.context("TTL hours").markdown
        ws.export_to(root / "CLAUDE.md")
        said = digest(ws)
    changed = git(root, "rev-parse", "HEAD").strip()[:7]
    assert hit.envelope.startswith(head + f" · changed in {changed} ")  # git's fact, after the common part
    surfaces = {"query": run(root, "query", "TTL hours")[1], "context": block, "show": run(root, "show", m.id)[1],
                "export": (root / "CLAUDE.md").read_text(), "digest": said}
    for name, text in surfaces.items():
        assert head in text, (name, text)


def test_help_groups_commands_by_task_and_hides_internal_ones(run: Run, root: Path) -> None:
    from anchorfs.cli.base import SECTIONS
    from anchorfs.cli.commands import cli as group

    code, out, _ = run(root, "--help")
    assert code == 0
    titles = [title for title, _ in SECTIONS]
    assert [line.rstrip(":") for line in out.splitlines() if line.rstrip(":") in titles] == titles
    assert "merge-ledger" not in out  # git runs it, not a person
    shown = {name for _, names in SECTIONS for name in names}
    visible = {name for name, cmd in group.commands.items() if not cmd.hidden}
    assert shown == visible  # every command a person can run is in exactly one section
    assert sum(len(names) for _, names in SECTIONS) == len(shown)
    readme = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert all(f"anchorfs {name}" in readme for name in shown)  # and documented
    assert group.context_settings["show_default"] is True  # every option with a default shows it
    assert "init --for claude" in out  # where to start


def test_query_shows_the_good_hits_and_counts_the_weak_ones(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        ws.record("token expiry is 24 hours for every session")
        for i in range(8):
            ws.record(f"deploys go out on friday afternoon, rotation {i}")
        weak = sum(h.weak for h in ws.query("token expiry"))
    assert weak > 0
    code, out, _ = run(root, "query", "token expiry")
    assert code == 0 and "token expiry is 24 hours" in out and "rotation" not in out
    assert f"{weak} weak match{'es' if weak > 1 else ''} left out (--all shows them)" in out
    assert run(root, "query", "token expiry", "--all")[1].count("rotation") == weak


def test_history_shows_what_a_supersede_changed_and_fits_80_columns(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        old = ws.record("session tokens expire after 24 hours unless the user ticks remember me")
        new = ws.supersede(old.id, "session tokens expire after 48 hours unless the user ticks remember me",
                           reason="raised")
    code, out, _ = run(root, "history", new.id, env={"COLUMNS": "80"})
    assert code == 0 and "[-24-]{+48+}" in out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_a_reverted_retract_does_not_keep_the_retract_reason(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("we deploy on fridays")
        ws.retract(m.id, reason="wrong, we stopped")
        ws.revert(m.id)
        assert ws.get(m.id).reason is None
    assert "wrong, we stopped" not in run(root, "show", m.id)[1]


def test_ledger_and_list_fit_80_columns(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("a long memory about how session tokens are issued, refreshed and revoked across services",
                      anchors=["a.py:1"])
    for args in (["ledger"], ["list"], ["history", m.id]):
        code, out, _ = run(root, *args, env={"COLUMNS": "80"})
        assert code == 0 and max(len(line) for line in out.splitlines()) <= 80, (args, out)
        assert "…" in out or args[0] == "history"


def _at_terminal(root: Path, *args: str, **env: str) -> str:
    """`anchorfs ARGS` with a terminal for its stdout, 100 columns: what a person sees."""
    import pty
    import select
    import subprocess

    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), *args], stdout=secondary,
                              stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "100", **env}, timeout=120)
        assert done.returncode in (0, 90), done.stderr
        out = b""
        while True:
            if not select.select([primary], [], [], 0.2)[0]:
                break
            out += os.read(primary, 65536)
        return out.decode()
    finally:
        os.close(secondary)
        os.close(primary)


def test_verdicts_are_coloured_at_a_terminal_and_never_in_a_pipe_or_under_no_color(root: Path, run: Run) -> None:
    with anchorfs.open(root) as ws:
        ws.record("ttl is a day", anchors=["a.py"])
        ws.record("the blob is binary", anchors=["blob.bin"])
    (root / "a.py").write_text("TTL = 12\n")
    red, green = "\x1b[31m\x1b[1mstale\x1b[0m", "\x1b[32m\x1b[1mfresh\x1b[0m"
    shown = _at_terminal(root, "list")
    assert red in shown and green in shown  # the drift column
    assert "\x1b[31m\x1b[1m[STALE\x1b[0m" in _at_terminal(root, "query", "ttl day")  # the envelope
    assert "\x1b[" not in _at_terminal(root, "list", NO_COLOR="1")
    assert "\x1b[" not in run(root, "list")[1]  # a pipe: plain text


def test_the_readme_reads_in_five_minutes_and_every_command_the_docs_show_exists() -> None:
    """Issue 38: a README of about 150 lines, the reference in docs/; every `anchorfs ...` shown
    in code there names a real command (a group's subcommand too), so no example is a typo."""
    import re

    import click

    from anchorfs.cli.commands import cli

    top = Path(__file__).parents[2]
    readme = (top / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    for doc in ("cli", "agents", "sdk", "team", "configuration", "architecture"):
        assert f"(docs/{doc}.md)" in readme and (top / "docs" / f"{doc}.md").is_file(), doc
    group = cli
    assert isinstance(group, click.Group)
    shown = 0
    for path in [top / "README.md", *sorted((top / "docs").glob("*.md"))]:
        text = path.read_text()
        blocks = "\n".join(re.findall(r"(?ms)^```(?:sh|bash|console)?\n(.*?)^```", text))
        code = re.findall(r"`anchorfs ([^`\n]+)`", text) + re.findall(r"(?m)^anchorfs (.+)$", blocks)
        for words in (re.findall(r"^(?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?", chunk)[0].split() for chunk in code
                      if re.match(r"[a-z]", chunk)):
            cmd = group.commands.get(words[0])
            assert cmd is not None, (path.name, words)
            if isinstance(cmd, click.Group) and len(words) > 1 and not words[1].startswith("-"):
                assert words[1] in cmd.commands or words[1] in ("--help",), (path.name, words)
            shown += 1
    assert shown > 40


def test_init_for_vscode_warns_when_git_ignores_what_it_wrote(root: Path, run: Run) -> None:
    """Issue 39: a `.vscode/` the repository ignores means the team never sees the MCP entry."""
    (root / ".gitignore").write_text(".vscode/\n")
    code, out, err = run(root, "init", "--for", "vscode")
    assert code == 0 and (root / ".vscode" / "mcp.json").is_file()
    assert [line for line in err.splitlines() if "git ignores" in line] == [
        f"warning: git ignores {root / '.vscode' / 'mcp.json'}: your team will never see it (see .gitignore)"]
    (root / ".gitignore").write_text("")
    code, out, err = run(root, "init", "--for", "vscode")
    assert code == 0 and "git ignores" not in err


def test_every_commands_help_shows_an_example_that_parses() -> None:
    """Issue 38: `--help` for people: an example in each command's help, one a person can type as shown."""
    import shlex

    import click

    from anchorfs.cli.base import EXAMPLES, SECTIONS
    from anchorfs.cli.commands import cli

    shown = {name for _, names in SECTIONS for name in names}
    assert set(EXAMPLES) == shown  # every command a person sees has one
    for name, example in EXAMPLES.items():
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        help_text = command.get_help(click.Context(command, info_name=name))
        assert f"\n  Example: {example}\n" in help_text + "\n", name  # one line, never rewrapped
        words = shlex.split(example.split(" || ")[0])
        assert words[:2] == ["anchorfs", name]
        with command.make_context(name, words[2:]) as ctx:  # its options and arguments parse
            assert ctx.params is not None
