"""What a person sees (issue 38): `list`, `query`, `history`, `ledger`, `drift --all` and `show`
run in a real terminal (a detached tmux pane, 80 and 120 columns, TERM=xterm-256color, colour on)
and read back with `capture-pane`: every row on one line of the screen (the terminal wrapped
nothing, `capture-pane -J` joins no line), long cells cut with `…`, STALE in another colour than
fresh. A warm server's screen is the in-process one."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git

import anchorfs
from anchorfs.cli import server

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (./scripts/test.sh installs it)")

LONG_PATH = "src/auth/tokens/issuer_with_a_rather_long_module_name.py"
ISSUER = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"
LONG = ("Session tokens expire after 24 hours unless the user ticks remember me, in which case they last thirty "
        "days and are refreshed on every request the browser makes")
END = "@@screen-done"
SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], dict[str, str]]]:
    """A git workspace: one long fresh memory on a long path, four stale ones recorded in one
    instant, one superseded; (root, the environment its commands run in, the ids by role)."""
    top = tmp_path_factory.mktemp("screens")
    root, home = top / "repo", top / "home"
    (root / "src" / "auth" / "tokens").mkdir(parents=True)
    home.mkdir()
    (root / LONG_PATH).write_text(ISSUER)
    (root / "src" / "retry.py").write_text("RETRIES = 3\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_") and k not in ("COLUMNS", "LINES",
                                                                                              "NO_COLOR", "TMUX")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
               GIT_CONFIG_NOSYSTEM="1", ANCHORFS_SERVE_AUTO="0", TERM="xterm-256color")
    with pytest.MonkeyPatch.context() as mp:  # the per-test isolation runs after a module fixture
        for key in ("HOME", "XDG_CACHE_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
            mp.setenv(key, env[key])
        for key in [k for k in os.environ if k.startswith("ANCHORFS_")]:
            mp.delenv(key)
        anchorfs.init(root)
        with anchorfs.open(root) as ws:
            fresh = ws.record(LONG, kind="constraint", anchors=[f"{LONG_PATH}#TokenIssuer.issue"])
            stale = ws.record_many([{"content": f"fact {i}: the retry module reads RETRIES at import",
                                     "anchors": ["src/retry.py:1"]} for i in range(4)])
            old = ws.record("We deploy on fridays")
            new = ws.supersede(old.id, "We deploy on thursdays, never on fridays",
                               reason="the friday freeze the whole team agreed after the incident review")
        (root / "src" / "retry.py").write_text("RETRIES = 5\n")
        git(root, "commit", "-qam", "more retries")
    yield root, env, {"fresh": fresh.id, "old": old.id, "new": new.id, **{f"stale{i}": m.id for i, m in enumerate(stale)}}
    server.stop(root)


def screen(root: Path, env: dict[str, str], width: int, *args: str) -> tuple[str, str, str]:
    """`anchorfs ARGS` in a detached tmux pane `width` columns wide: (the screen as text, as tmux
    joins the lines it wrapped, with colour escapes). The tmux server is this call's alone."""
    assert TMUX is not None
    sock = f"anchorfs-test-{uuid.uuid4().hex[:12]}"
    tmux = [TMUX, "-L", sock, "-f", os.devnull]
    cmd = shlex.join([sys.executable, "-m", "anchorfs", "--root", str(root), *args])
    try:
        subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "50",
                        f"TERM=xterm-256color {cmd}; echo {END}; exec sleep 120"], env=env, check=True, timeout=30)
        deadline = time.monotonic() + 120
        while True:
            plain = subprocess.run([*tmux, "capture-pane", "-p"], env=env, capture_output=True, text=True,
                                   check=True).stdout
            if END in plain or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert END in plain, plain
        joined, coloured = (subprocess.run([*tmux, "capture-pane", "-p", flag], env=env, capture_output=True,
                                           text=True, check=True).stdout for flag in ("-J", "-e"))
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True, check=False)
    cut = [text[:text.index(END)].rstrip("\n") for text in (plain, joined, coloured)]
    return cut[0], cut[1], cut[2]


def _colour_of(coloured: str, word: str) -> str:
    """The escape sequences just before `word`'s first appearance (empty: not coloured)."""
    m = re.search(rf"((?:{SGR.pattern})+){re.escape(word)}", coloured)
    return m.group(1) if m else ""


def _check_fits(plain: str, joined: str, width: int) -> list[str]:
    lines = plain.splitlines()
    assert all(len(line) <= width for line in lines)
    assert lines == [line.rstrip() for line in joined.splitlines()], f"the terminal wrapped a line:\n{plain}"
    return lines


def _row(lines: list[str], memory_id: str) -> str:
    """The one screen line that names this memory by its short id (6 characters or more)."""
    found = [line for line in lines if any(len(w) >= 6 and memory_id.startswith(w) for w in line.split())]
    assert len(found) == 1, (memory_id, lines)
    return found[0]


@pytest.mark.parametrize("width", [80, 120])
def test_list_drift_and_ledger_keep_each_row_on_one_line_cut_with_an_ellipsis(
        workspace: tuple[Path, dict[str, str], dict[str, str]], width: int) -> None:
    root, env, ids = workspace
    for args, verdict in ((["list"], "drift"), (["drift", "--all"], "drift"), (["ledger"], "op")):
        plain, joined, coloured = screen(root, env, width, *args)
        lines = _check_fits(plain, joined, width)
        assert lines[0].split()[:2] in (["id", "kind"], ["id", "drift"], ["at", "op"]), plain
        assert set(lines[1]) <= {"-", " "}
        if verdict == "drift":
            for key, word in (("fresh", "fresh"), *((f"stale{i}", "stale") for i in range(4))):
                assert word in _row(lines, ids[key]).split(), (args, plain)  # its id and its verdict, one line
        else:
            assert "supersede" in _row(lines, ids["new"]) and "record" in _row(lines, ids["stale0"])
        assert "…" in plain  # the long memory (and, at 80, the ledger's times) cut, never wrapped
        assert LONG not in plain
        if args[0] == "list":
            stale, fresh = _colour_of(coloured, "stale"), _colour_of(coloured, "fresh")
            assert stale and fresh and stale != fresh, coloured


def test_drift_colours_stale_apart_from_fresh(workspace: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    root, env, _ = workspace
    coloured = screen(root, env, 80, "drift", "--all")[2]
    stale, fresh = _colour_of(coloured, "stale"), _colour_of(coloured, "fresh")
    assert stale and fresh and stale != fresh, coloured


@pytest.mark.parametrize("width", [80, 120])
def test_query_history_and_show_fit_the_terminal(workspace: tuple[Path, dict[str, str], dict[str, str]],
                                                 width: int) -> None:
    root, env, ids = workspace
    plain, joined, coloured = screen(root, env, width, "query", "retry module RETRIES import")
    lines = _check_fits(plain, joined, width)
    for i in range(4):  # each hit's first line: its score, its id and its verdict
        row = _row(lines, ids[f"stale{i}"])
        assert re.match(r"\d\.\d{3}  ", row) and "[STALE" in row, plain
    assert all(line[0].isdigit() or line[0] == " " for line in lines[1:-1] if line), plain  # continued lines indented
    assert _colour_of(coloured, "[STALE") != ""

    plain, joined, _ = screen(root, env, width, "history", ids["new"])
    lines = _check_fits(plain, joined, width)
    assert "supersede" in _row(lines, ids["new"]) and "{+thursdays, never on+}" in plain.replace("\n", " ")

    plain, joined, coloured = screen(root, env, width, "show", ids["fresh"])
    lines = _check_fits(plain, joined, width)
    assert ids["fresh"].startswith(lines[0].split()[0]) and "drift: fresh" in lines[0]
    assert all(line.startswith("  ") for line in lines[1:]), plain  # every field, and what continues it, indented
    assert " ".join(" ".join(lines).split()).count(LONG) == 1  # the whole text, wrapped by words
    assert _colour_of(coloured, "[fresh") != ""


def test_a_served_screen_is_the_in_process_one_at_120_columns(
        workspace: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    """The warm server fits the caller's terminal, not its own (it has none), and colours as the caller would."""
    root, env, ids = workspace
    alone = screen(root, {**env, server.NO_SERVER_ENV: "1"}, 120, "list")
    subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "serve", "--detach"], env=env, check=True,
                   capture_output=True, timeout=120)
    try:
        info = server.ping(root)
        assert info is not None
        served = screen(root, env, 120, "list")
        plain = screen(root, {**env, "NO_COLOR": "1"}, 120, "list")[2]
        after = server.ping(root)
        assert after is not None and after["served"] >= info["served"] + 1
    finally:
        server.stop(root)
    assert served == alone
    assert "…" in served[0] and "stale" in served[0]
    assert SGR.search(served[2]) and not SGR.search(plain)  # NO_COLOR is the caller's, served or not
