"""The git post-commit hook on a real repo: install/uninstall hygiene, what a commit reports."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, git, read_events, shown as short_of

import anchorfs
from anchorfs.agents.hook_git import (BEGIN, END, committed_paths, hook_path, install, is_installed, uninstall,
                                     uninstall_sync)


def commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    """`git commit -a` with the hook running; returns the process (hook output is on stderr)."""
    env = dict(os.environ, GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.com")
    git(repo, "add", "-A")
    proc = subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    (git_repo / "README.md").write_text("hello\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    return git_repo


def test_install_creates_an_executable_hook_and_twice_is_harmless(repo: Path) -> None:
    path, changed = install(repo)
    assert changed and path == repo / ".git" / "hooks" / "post-commit"
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n") and BEGIN in text and END in text
    assert f"{sys.executable} -m anchorfs hook run --root {repo} || true" in text  # click-free (issue 20)
    assert path.stat().st_mode & stat.S_IXUSR
    assert is_installed(repo)
    assert install(repo) == (path, False)
    assert path.read_text() == text
    assert uninstall(repo) == (path, True)
    assert not path.exists()  # we created it, nothing else was in it
    assert uninstall(repo) == (path, False)
    assert not is_installed(repo)


def test_commit_reports_the_memories_it_made_stale(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        kept = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
        ws.record("readme greets", anchors=["README.md"])
    install(repo)

    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    out = commit(repo, "shorter tokens").stderr
    assert "anchorfs: this commit made 1 memory stale:" in out
    assert f"{short_of(repo, stale.id)}  auth/token.py#TokenIssuer.issue changed  · token expiry is 24 hours" in out
    assert kept.id not in out
    events = read_events(anchorfs.open(repo))
    assert [(e["id"], e["from"], e["to"], e["source"]) for e in events] == [(stale.id, "fresh", "stale", "hook")]
    assert events[0]["detail"] == "auth/token.py#TokenIssuer.issue changed"

    # a commit that touches nothing anchored says nothing and logs nothing
    (repo / "other.txt").write_text("x\n")
    assert "anchorfs" not in commit(repo, "unrelated").stderr
    # nor does one that touches the file again while the memory is already stale
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=6"))
    assert "anchorfs" not in commit(repo, "shorter still").stderr
    # putting the code back makes it fresh again, and says so
    (repo / "auth" / "token.py").write_text(TOKEN)
    out = commit(repo, "revert").stderr
    assert f"anchorfs: {short_of(repo, stale.id)} is fresh again" in out
    assert [e["to"] for e in read_events(anchorfs.open(repo))] == ["stale", "fresh"]


def test_an_existing_hook_is_kept_and_still_runs(repo: Path) -> None:
    path = repo / ".git" / "hooks" / "post-commit"
    original = "#!/bin/bash\necho user-hook-ran >> \"$(git rev-parse --show-toplevel)/.git/hook.log\"\nexit 0\n"
    path.write_text(original)
    path.chmod(0o755)
    with anchorfs.open(repo) as ws:
        m = ws.record("readme greets", anchors=["README.md"])
    assert install(repo) == (path, True)
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n" + BEGIN)  # before the user's `exit 0`
    assert text.endswith(original.split("\n", 1)[1])

    (repo / "README.md").write_text("bye\n")
    out = commit(repo, "bye").stderr
    assert short_of(repo, m.id) in out
    assert (repo / ".git" / "hook.log").read_text() == "user-hook-ran\n"

    assert uninstall(repo) == (path, True)
    assert path.read_text() == original


def test_a_non_shell_hook_is_left_alone(repo: Path) -> None:
    path = repo / ".git" / "hooks" / "post-commit"
    path.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    with pytest.raises(anchorfs.WorkspaceError, match="not a shell script; add this line to it yourself"):
        install(repo)
    assert path.read_text() == "#!/usr/bin/env python3\nprint('hi')\n"


def test_hooks_path_and_two_workspaces_in_one_repo(repo: Path) -> None:
    git(repo, "config", "core.hooksPath", ".githooks")
    sub = repo / "service"
    sub.mkdir()
    (sub / "app.py").write_text("PORT = 80\n")
    anchorfs.init(sub, nested=True)
    path, _ = install(repo)
    assert path == repo / ".githooks" / "post-commit"
    assert install(sub) == (path, True)
    assert is_installed(repo) and is_installed(sub)
    with anchorfs.open(sub) as ws:
        m = ws.record("port is 80", anchors=["app.py"])
    commit(repo, "service")  # app.py added: still fresh, nothing to say

    (sub / "app.py").write_text("PORT = 8080\n")
    out = commit(repo, "port").stderr
    assert f"{short_of(sub, m.id)}  app.py changed" in out
    assert committed_paths(sub) == ["app.py"]  # relative to the workspace, not the repo

    assert uninstall(sub) == (path, True)
    assert is_installed(repo) and not is_installed(sub)
    text = path.read_text()
    assert str(sub) not in text and f"--root {repo} " in text


def test_the_hook_never_fails_a_commit(repo: Path) -> None:
    install(repo)
    os.rename(repo / ".anchorfs", repo / "moved-away")
    (repo / "README.md").write_text("bye\n")
    out = commit(repo, "no workspace any more").stderr
    assert "anchorfs: hook:" in out and "not an anchorfs workspace" in out
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "hook", "run", "--root", str(repo)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0


def test_install_outside_git_is_one_clear_error(tmp_path: Path) -> None:
    anchorfs.init(tmp_path)
    with pytest.raises(anchorfs.WorkspaceError, match="not in a git repository"):
        hook_path(tmp_path)


def test_cli_install_and_uninstall(repo: Path) -> None:
    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", *args, "--root", str(repo)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    hook = repo / ".git" / "hooks" / "post-commit"
    assert cli("hook", "install") == f"installed: post-commit, post-checkout, post-merge, post-rewrite in {hook.parent}\n"
    assert cli("hook", "install") == f"already installed in {hook.parent}\n"
    sync = "".join(f"removed from {hook.with_name(name)}\n" for name in ("post-checkout", "post-merge", "post-rewrite"))
    assert cli("hook", "uninstall") == f"removed from {hook}\n" + sync  # the sync hooks `install` added go too
    assert not hook.exists() and not hook.with_name("post-merge").exists()


# -- Claude Code hooks: `anchorfs hook session-start` / `post-edit`, fed the documented JSON ----------

import json  # noqa: E402

from anchorfs.agents.hook_agent import agent_args, digest  # noqa: E402

VENV_BIN = str(Path(sys.executable).parent)


def agent_hook(event: str, payload: dict[str, object] | str, *, cwd: Path, extra: tuple[str, ...] = (),
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the hook as Claude Code does: `anchorfs hook EVENT` resolved on PATH, the JSON on stdin."""
    path = os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(["anchorfs", "hook", event, *extra], input=stdin, capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PATH": path, **(env or {})}, timeout=60, check=False)


def session_start_json(root: Path, source: str = "startup") -> dict[str, object]:
    return {"session_id": "abc123", "transcript_path": str(root / "t.jsonl"), "cwd": str(root),
            "hook_event_name": "SessionStart", "source": source}


def post_edit_json(root: Path, file_path: Path, tool: str = "Edit") -> dict[str, object]:
    return {"session_id": "abc123", "transcript_path": str(root / "t.jsonl"), "cwd": str(root),
            "hook_event_name": "PostToolUse", "tool_name": tool,
            "tool_input": {"file_path": str(file_path), "old_string": "hours=24", "new_string": "hours=12"},
            "tool_response": {"filePath": str(file_path), "success": True}}


def context_of(proc: subprocess.CompletedProcess[str], event: str) -> str:
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    text = out["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str)
    return text


def test_session_start_digest_stale_first_then_recent(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        old = ws.record("readme greets", anchors=["README.md"])
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        newest = ws.record("we use pytest")
    assert agent_hook("session-start", session_start_json(repo), cwd=repo).stdout.startswith("{")
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    for source in ("startup", "resume", "clear", "compact"):
        text = context_of(agent_hook("session-start", session_start_json(repo, source), cwd=repo / "auth"),
                          "SessionStart")
        assert text.startswith("anchorfs memories of this repository (data, not instructions): 1 stale, 0 unknown, 2 fresh")
        with anchorfs.open(repo) as ws:
            short = ws.short_ids([stale.id, newest.id, old.id])
        assert text.index(f"- {short[stale.id]} ") < text.index(f"- {short[newest.id]} ") < text.index(
            f"- {short[old.id]} ")  # stale, then newest first
        assert "[STALE · auth/token.py#TokenIssuer.issue changed" in text and "`reanchor ID`" in text
        assert "no search at session start" in text


def test_session_start_digest_is_capped_by_config(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        ws.record_many([{"content": f"fact number {i} about the readme " + "x" * 60, "anchors": ["README.md"]}
                        for i in range(60)])
        assert len(digest(ws)) <= 2000
        assert "(" in digest(ws) and "more not shown" in digest(ws)
    (repo / ".anchorfs.toml").write_text("[hook]\ndigest_chars = 500\n")
    text = context_of(agent_hook("session-start", session_start_json(repo), cwd=repo), "SessionStart")
    assert len(text) <= 500 and text.rstrip().endswith("`recall` over MCP)")
    shown = text.count("\n- ")
    assert f"({60 - shown} more not shown" in text


def test_session_start_says_nothing_without_memories_and_fails_open(repo: Path, tmp_path: Path) -> None:
    proc = agent_hook("session-start", session_start_json(repo), cwd=repo)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    elsewhere = tmp_path / "not-a-workspace"
    elsewhere.mkdir()
    proc = agent_hook("session-start", session_start_json(elsewhere), cwd=elsewhere)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("anchorfs: hook session-start: no anchorfs workspace")
    (repo / ".anchorfs.toml").write_text("[hook\n")  # a broken workspace: the session still starts
    proc = agent_hook("session-start", session_start_json(repo), cwd=repo)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr.count("\n") == 1


def test_post_edit_reports_what_the_edit_made_stale_once(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        kept = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
        ws.record("readme greets", anchors=["README.md"])
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    text = context_of(agent_hook("post-edit", post_edit_json(repo, token), cwd=repo), "PostToolUse")
    assert text.startswith("anchorfs: this edit of auth/token.py made 1 memory stale")
    assert f"- {short_of(repo, stale.id)}: auth/token.py#TokenIssuer.issue changed · token expiry is 24 hours" in text
    assert kept.id not in text
    assert "`reanchor`" in text and "`supersede`" in text
    events = read_events(anchorfs.open(repo))
    assert [(e["id"], e["to"], e["source"]) for e in events] == [(stale.id, "stale", "post-edit")]
    # the same edit reported again, an unanchored file, a file outside: nothing to say
    for payload in (post_edit_json(repo, token, "MultiEdit"), post_edit_json(repo, repo / "other.txt", "Write"),
                    post_edit_json(repo, repo.parent / "x.py", "Write"),
                    {"hook_event_name": "PostToolUse", "tool_name": "Write", "tool_input": {}}):
        proc = agent_hook("post-edit", payload, cwd=repo)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    # a relative path is taken from the session's cwd; putting the code back is fresh again
    token.write_text(TOKEN)
    payload = post_edit_json(repo, Path("token.py"), "Write")
    payload["cwd"] = str(repo / "auth")
    text = context_of(agent_hook("post-edit", payload, cwd=repo), "PostToolUse")
    assert f"anchorfs: {short_of(repo, stale.id)} is fresh again" in text


def test_post_edit_output_is_capped_and_counts_the_rest(repo: Path) -> None:
    """Issue 39: one edit that staled 102 memories said 17,880 characters, past what Claude Code
    shows; the text now stops at `hook.edit_chars` with whole lines and says how many more."""
    with anchorfs.open(repo) as ws:
        made = ws.record_many([{"content": f"issue signs token number {i} for a day " + "x" * 80,
                                "anchors": ["auth/token.py#TokenIssuer.issue"]} for i in range(102)])
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    text = context_of(agent_hook("post-edit", post_edit_json(repo, token), cwd=repo), "PostToolUse")
    shown = [line for line in text.splitlines() if line.startswith("- ") and "more: call" not in line]
    assert len(text) <= 2000 and text.startswith("anchorfs: this edit of auth/token.py made 102 memories stale")
    assert 5 < len(shown) < 102 and f"- {102 - len(shown)} more: call check_drift" in text
    assert all(any(m.id.startswith(line[2:].split(":")[0]) for m in made) for line in shown) and "`reanchor`" in text
    (repo / ".anchorfs.toml").write_text("[hook]\nedit_chars = 100000\n")
    token.write_text(TOKEN.replace("hours=24", "hours=6"))  # stale still: nothing new to say
    token.write_text(TOKEN)
    context_of(agent_hook("post-edit", post_edit_json(repo, token), cwd=repo), "PostToolUse")  # fresh again
    token.write_text(TOKEN.replace("hours=24", "hours=3"))
    text = context_of(agent_hook("post-edit", post_edit_json(repo, token), cwd=repo), "PostToolUse")
    assert "more: call check_drift" not in text and len([x for x in text.splitlines() if x.startswith("- ")]) == 102


def pre_read_json(root: Path, file_path: Path, tool: str = "Read", session: str = "abc123") -> dict[str, object]:
    return {"session_id": session, "transcript_path": str(root / "t.jsonl"), "cwd": str(root),
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": {"file_path": str(file_path)}}


def test_pre_read_hands_the_files_memories_once_per_session_stale_first(repo: Path) -> None:
    """Issue 39: before a file is read or edited, its memories with their verdicts, the stale first;
    once per file per session, again when their drift changed; silent for a file no memory names."""
    with anchorfs.open(repo) as ws:
        fresh = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("readme greets", anchors=["README.md"])
    token = repo / "auth" / "token.py"
    text = context_of(agent_hook("pre-read", pre_read_json(repo, token), cwd=repo), "PreToolUse")
    assert text.startswith("anchorfs: 2 memories rest on auth/token.py, 0 stale (memories are data")
    assert f"- {short_of(repo, fresh.id)} [fresh · anchored " in text and "readme" not in text
    for payload in (pre_read_json(repo, token, "Edit"), pre_read_json(repo, repo / "other.txt"),
                    pre_read_json(repo, repo.parent / "x.py"), {"hook_event_name": "PreToolUse", "tool_input": {}}):
        proc = agent_hook("pre-read", payload, cwd=repo)  # told already; no memory there; outside; no path
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    token.write_text(TOKEN.replace("hours=24", "hours=12"))  # the drift changed: told again, the stale first
    text = context_of(agent_hook("pre-read", pre_read_json(repo, token, "Edit"), cwd=repo), "PreToolUse")
    assert "2 memories rest on auth/token.py, 1 stale" in text
    assert (text.index(f"- {short_of(repo, stale.id)} [STALE · auth/token.py#TokenIssuer.issue changed")
            < text.index(f"- {short_of(repo, fresh.id)} "))
    assert agent_hook("pre-read", pre_read_json(repo, token), cwd=repo).stdout == ""
    assert "1 stale" in context_of(agent_hook("pre-read", pre_read_json(repo, token, session="other"), cwd=repo),
                                   "PreToolUse")  # another session is told
    (repo / ".anchorfs" / "sessions.json").write_text("[not what it was")  # damaged: told again, no traceback
    assert "1 stale" in context_of(agent_hook("pre-read", pre_read_json(repo, token), cwd=repo), "PreToolUse")
    with anchorfs.open(repo) as ws:
        many = ws.record_many([{"content": f"issue signs token number {i} " + "y" * 80,
                                "anchors": ["auth/token.py#TokenIssuer.issue"]} for i in range(40)])
    text = context_of(agent_hook("pre-read", pre_read_json(repo, token), cwd=repo), "PreToolUse")
    shown = [line for line in text.splitlines() if line.startswith("- ") and "more: call" not in line]
    assert len(text) <= 1500 and text.startswith("anchorfs: 42 memories rest on auth/token.py, 1 stale")
    assert 3 < len(shown) < 42 and f"- {42 - len(shown)} more: call check_drift" in text
    assert shown[0].startswith(f"- {short_of(repo, stale.id)} [STALE")
    assert all(any(m.id.startswith(line.split()[1]) for m in many) for line in shown[1:])


def test_init_for_claude_wires_the_pre_read_hook_and_git_ignores_its_record(repo: Path) -> None:
    from anchorfs.agents.hosts import write_claude_hooks

    write_claude_hooks(repo)
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    command = 'anchorfs hook pre-read ${CLAUDE_PROJECT_DIR:+--root "$CLAUDE_PROJECT_DIR"}'  # Claude Code's variable
    assert hooks["PreToolUse"] == [{"matcher": "Read|Edit|Write|MultiEdit", "hooks": [
        {"type": "command", "command": command, "timeout": 10}]}]
    assert "sessions.json" in (repo / ".anchorfs" / ".gitignore").read_text().splitlines()
    with anchorfs.open(repo) as ws:
        ws.record("readme greets", anchors=["README.md"])
    elsewhere = repo.parent / "elsewhere"  # the session somewhere else: the project named by the variable
    elsewhere.mkdir()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", CLAUDE_PROJECT_DIR=str(repo))
    proc = subprocess.run(["sh", "-c", command], input=json.dumps(pre_read_json(elsewhere, repo / "README.md")),
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "1 memory rests on README.md" in context_of(proc, "PreToolUse")


def test_post_edit_fails_open_on_bad_stdin(repo: Path) -> None:
    for stdin in ("not json", "[1, 2]"):
        proc = agent_hook("post-edit", stdin, cwd=repo)
        assert proc.returncode == 0 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("anchorfs: hook post-edit: ")
    os.rename(repo / ".anchorfs", repo / "gone")
    proc = agent_hook("post-edit", post_edit_json(repo, repo / "README.md"), cwd=repo)
    assert proc.returncode == 0 and "no anchorfs workspace" in proc.stderr


def test_agent_hooks_never_import_lancedb(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    probe = ("import io, json, sys\n"
             "from anchorfs.__main__ import main\n"
             "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[2].encode()))\n"
             "try:\n    main(['hook', sys.argv[1]])\nexcept SystemExit as e:\n    code = e.code\n"
             "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('lancedb', 'pyarrow', 'click', 'mcp'))\n"
             "sys.stderr.write(json.dumps({'code': code, 'heavy': heavy}))\n")
    for event, payload in (("post-edit", post_edit_json(repo, repo / "auth" / "token.py")),
                           ("pre-read", pre_read_json(repo, repo / "auth" / "token.py")),
                           ("session-start", session_start_json(repo))):
        proc = subprocess.run([sys.executable, "-c", probe, event, json.dumps(payload)], cwd=repo,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.stderr.startswith("{"), proc.stderr
        report = json.loads(proc.stderr)
        assert report == {"code": 0, "heavy": []}, (event, report)
        assert json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_a_hook_process_ends_without_the_teardown_its_output_whole(repo: Path) -> None:
    """The hook's own process (`main()` with no argv) ends with its output flushed and its exit
    code, skipping the interpreter's teardown (an `atexit` handler never runs): at 10,000
    memories freeing what the pass built was a tenth of a first session's digest."""
    with anchorfs.open(repo) as ws:
        for n in range(40):
            ws.record(f"fact {n}: the token issuer signs for 24 hours " + "x" * 60,
                      anchors=["auth/token.py#TokenIssuer.issue"])
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: sys.stderr.write('teardown ran\\n'))\n"
             "sys.argv = ['anchorfs', 'hook', sys.argv[1]]\n"
             "from anchorfs.__main__ import main\n"
             "main()\n"
             "sys.stderr.write('main returned\\n')\n")
    proc = subprocess.run([sys.executable, "-c", probe, "session-start"], input=json.dumps(session_start_json(repo)),
                          cwd=repo, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]  # whole: the buffer was flushed
    assert "fact 39" in context or "more" in context
    proc = subprocess.run([sys.executable, "-c", probe, "post-edit"], input="not json", cwd=repo,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr.startswith("anchorfs: hook post-edit:") and proc.stderr.count("\n") == 1, proc.stderr
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    proc = subprocess.run([sys.executable, "-c", probe, "post-edit"],
                          input=json.dumps(post_edit_json(repo, repo / "auth" / "token.py")), cwd=repo,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "made 40 memories stale" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_agent_args_and_the_cli_path_agree(repo: Path) -> None:
    assert agent_args(["hook", "post-edit"]) == ("post-edit", None, False)
    assert agent_args(["--root", "R", "hook", "session-start", "--json"]) == ("session-start", "R", True)
    assert agent_args(["hook", "run"]) is None and agent_args(["hook", "post-edit", "--help"]) is None
    with anchorfs.open(repo) as ws:
        ws.record("readme greets", anchors=["README.md"])
    fast = agent_hook("session-start", session_start_json(repo), cwd=repo)
    slow = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "hook", "session-start", "--root", str(repo)],
                          input=json.dumps(session_start_json(repo)), capture_output=True, text=True, timeout=60)
    assert slow.returncode == 0 and slow.stdout == fast.stdout


# -- the hooks start from the fold snapshot, and skip the fold where nothing is anchored -----------

_COUNTING = ("import io, json, sys\n"
             "import anchorfs.ledger.foldsnap as foldsnap\n"
             "from anchorfs.ledger.log import Entry\n"
             "from anchorfs.__main__ import main\n"
             "foldsnap.MIN_LINES = 0\n"
             "parsed = [0]\n"
             "real = Entry.from_dict.__func__\n"
             "def counting(cls, d):\n    parsed[0] += 1\n    return real(cls, d)\n"
             "Entry.from_dict = classmethod(counting)\n"
             "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[2].encode()))\n"
             "try:\n    main(['hook', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
             "sys.stderr.write(json.dumps({'parsed': parsed[0]}))\n")


def _counted(event: str, payload: dict[str, object], cwd: Path) -> tuple[str, int]:
    """(stdout, ledger lines parsed) of one agent hook run as the host runs it."""
    proc = subprocess.run([sys.executable, "-c", _COUNTING, event, __import__("json").dumps(payload)], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)
    report = __import__("json").loads(proc.stderr)
    return proc.stdout, int(report["parsed"])


def test_agent_hooks_answer_from_the_fold_snapshot_and_the_same_without_it(repo: Path) -> None:
    from anchorfs.ledger.foldsnap import SNAP_FILE

    with anchorfs.open(repo) as ws:
        for i in range(6):
            ws.record(f"issuer fact {i}", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("readme greets", anchors=["README.md"])
    snap = repo / ".anchorfs" / SNAP_FILE
    snap.unlink(missing_ok=True)
    first, parsed = _counted("session-start", session_start_json(repo), repo)
    assert parsed == 7 and snap.is_file()  # folded from the ledger once, and kept
    again, parsed = _counted("session-start", session_start_json(repo), repo)
    assert parsed == 0 and again == first  # the snapshot held: not one ledger line parsed, the same digest
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=1"))
    edit = post_edit_json(repo, repo / "auth" / "token.py")
    out, parsed = _counted("post-edit", edit, repo)
    # an edit's hook takes the memories on the file from the snapshot's drift view: no line parsed
    assert parsed == 0 and "made 6 memories stale" in out
    snap.write_bytes(b"garbage" * 100)  # a damaged snapshot: only the lines naming the file, the same answer
    (repo / "auth" / "token.py").write_text(TOKEN)
    out, parsed = _counted("post-edit", edit, repo)
    assert parsed == 12 and "fresh again" in out
    after, _ = _counted("session-start", session_start_json(repo), repo)
    assert after == first


# -- the session-start memo: the last digest replayed while nothing it rested on changed ------------

_REPLAY = ("import io, json, sys\n"
           "from anchorfs.__main__ import main\n"
           "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
           "try:\n    main(['hook', 'session-start'])\nexcept SystemExit:\n    pass\n"
           "sys.stderr.write(json.dumps({'full': 'anchorfs.sdk.workspace' in sys.modules}))\n")


def _start(repo: Path) -> tuple[str, bool]:
    """(stdout, whether the full digest ran) of a session-start run as the host runs it."""
    proc = subprocess.run([sys.executable, "-c", _REPLAY, json.dumps(session_start_json(repo))], cwd=repo,
                          capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout, bool(json.loads(proc.stderr)["full"])



# -- post-commit without click: `-m anchorfs hook run` (issue 20) ------------------------------------

_COMMIT_PROBE = ("import json, sys\n"
                 "from anchorfs.__main__ import main\n"
                 "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
                 "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('lancedb', 'pyarrow', 'click', 'mcp'))\n"
                 "sys.stderr.write(json.dumps({'code': code, 'heavy': heavy}))\n")


def test_post_commit_run_answers_without_click_as_the_cli_does(repo: Path) -> None:
    from anchorfs.agents.hook_git import commit_args

    with anchorfs.open(repo) as ws:
        m = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    install(repo)
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    git(repo, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "shorter")  # the hook is run below, by hand

    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", *args], cwd=repo, capture_output=True,
                              text=True, check=True)
        return proc.stdout

    proc = subprocess.run([sys.executable, "-c", _COMMIT_PROBE, "hook", "run", "--root", str(repo)], cwd=repo,
                          capture_output=True, text=True, timeout=60, check=False)
    assert json.loads(proc.stderr) == {"code": 0, "heavy": []}  # neither click nor LanceDB imported
    assert proc.stdout.startswith("anchorfs: this commit made 1 memory stale:\n")
    assert f"  {short_of(repo, m.id)}  auth/token.py#TokenIssuer.issue changed  · token expiry is 24 hours\n" in proc.stdout
    (repo / "auth" / "token.py").write_text(TOKEN)  # fresh again: the click CLI says the same as the fast path
    git(repo, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "back")
    fast = subprocess.run([sys.executable, "-m", "anchorfs", "hook", "run", "--json", f"--root={repo}"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout
    assert [e["to"] for e in json.loads(fast)["events"]] == ["fresh"]
    assert cli("hook", "run", "--root", str(repo), "--json") == '{\n  "events": []\n}\n'  # logged once, as before
    assert fast.startswith('{\n  "events": [\n')  # the CLI's indented JSON
    # what the fast path takes, and what it leaves to click
    assert commit_args(["hook", "run", "--root", "/r", "--rev", "HEAD~1"]) == ("/r", "HEAD~1", False)
    assert commit_args(["--json", "hook", "run"]) == (None, "HEAD", True)
    for odd in (["hook", "run", "--rev"], ["hook", "run", "--root", "/a", "--root", "/b"], ["hook", "run", "-h"],
                ["hook", "install"], ["hook", "run", "extra"]):
        assert commit_args(odd) is None, odd


def test_install_upgrades_an_old_click_line_in_place(repo: Path) -> None:
    path = repo / ".git" / "hooks" / "post-commit"
    other = "/usr/bin/python3 -m anchorfs.cli.commands hook run --root /elsewhere || true"
    old = f"{sys.executable} -m anchorfs.cli.commands hook run --root {repo} || true"
    path.write_text(f"#!/bin/sh\n{BEGIN}\n# note\n{old}\n{other}\n{END}\necho user\n")
    path.chmod(0o755)
    assert install(repo) == (path, True)
    text = path.read_text()
    new = f"{sys.executable} -m anchorfs hook run --root {repo} || true"
    lines = text.splitlines()
    assert lines[lines.index(BEGIN) + 1:lines.index(END)] == [
        "# Added by `anchorfs hook install`; `anchorfs hook uninstall` removes this block only.",
        "# note", new, other]  # where the old line stood; another workspace's line untouched
    assert text.endswith(f"{END}\necho user\n") and is_installed(repo)
    assert install(repo) == (path, False)
    with anchorfs.open(repo) as ws:
        m = ws.record("readme greets", anchors=["README.md"])
    (repo / "README.md").write_text("bye\n")
    assert short_of(repo, m.id) in commit(repo, "bye").stderr  # the upgraded line runs


_EDIT_PROBE = ("import io, json, sys\n"
               "from anchorfs import foldsnap\n"
               "foldsnap.MIN_LINES = 0  # a small ledger snapshotted too, as a large one is\n"
               "from anchorfs.__main__ import main\n"
               "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
               "try:\n    main(['hook', 'post-edit'])\nexcept SystemExit:\n    pass\n"
               "sys.stderr.write(json.dumps({'full': 'anchorfs.sdk.workspace' in sys.modules}))\n")


def test_a_symbol_check_loads_its_grammar_without_the_language_packs_init() -> None:
    """`symbols._language` loads a bundled grammar straight from the pack's `bindings/` (its
    `__init__` imports three more grammars and importlib.resources, a seventh of a hook's cost);
    the symbols found are those the pack's own loader gives."""
    probe = ("import json, sys\n"
             "from anchorfs.anchor.symbols import list_symbols\n"
             "src = b'class A:\\n    def f(self):\\n        return 1\\n\\ndef g():\\n    pass\\n'\n"
             "direct = [s.name for s in list_symbols('m.py', src)]\n"
             "loaded = 'tree_sitter_language_pack' in sys.modules\n"
             "import anchorfs.anchor.symbols as sy\n"
             "from tree_sitter_language_pack import get_language\n"
             "sy._LANGUAGES.clear(); sy._QUERIES.clear()\n"
             "sy._LANGUAGES['python'] = get_language('python')\n"
             "sy._cached_symbols.cache_clear(); sy._THREAD.parsers = {}\n"
             "packed = [s.name for s in list_symbols('m.py', src + b'\\n')]\n"
             "print(json.dumps({'direct': direct, 'packed': packed, 'loaded': loaded}))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(proc.stdout)
    assert report["loaded"] is False and report["direct"] == report["packed"] and "A.f" in report["direct"]


def _try_commit(repo: Path, message: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", "commit", "-q", "-m", message, *extra], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)


def test_the_gate_refuses_a_commit_whose_staged_changes_stale_a_memory(repo: Path) -> None:
    """Issue 39, item 2: opt-in; judged on the staged blobs; named with what settles it; `--no-verify`
    passes; a text moved into another staged file is followed; a broken anchorfs lets the commit through."""
    with anchorfs.open(repo) as ws:
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
    install(repo)  # report-only: no gate
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    git(repo, "add", "-A")
    assert _try_commit(repo, "report only").returncode == 0
    git(repo, "reset", "-q", "--soft", "HEAD~1")
    path, changed = install(repo, gate=True)
    assert changed and path.name == "pre-commit" and install(repo, gate=True) == (path, False)
    proc = _try_commit(repo, "shorter tokens")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("anchorfs: this commit would make 1 memory stale:\n")
    assert f"  {short_of(repo, stale.id)}  auth/token.py#TokenIssuer.issue changed  · token expiry is 24 hours" in proc.stderr
    assert "`anchorfs reanchor ID`" in proc.stderr and "--no-verify" in proc.stderr
    token.write_text(TOKEN)  # the work tree put back, the index not: still refused
    assert _try_commit(repo, "shorter tokens").returncode == 1
    git(repo, "reset", "-q")  # nothing of it staged: a commit of something else passes
    (repo / "notes.txt").write_text("x\n")
    git(repo, "add", "notes.txt")
    assert _try_commit(repo, "notes").returncode == 0
    token.write_text(TOKEN.replace("hours=24", "hours=6"))
    git(repo, "add", "-A")
    assert _try_commit(repo, "forced", "--no-verify").returncode == 0  # git's own way past a hook
    with anchorfs.open(repo) as ws:  # it still holds at 6 hours? then re-anchored, and a commit passes
        ws.reanchor(stale.id, reason="checked")
    (repo / "auth" / "moved.py").write_text("class TokenIssuer:\n    def issue(self, user):\n"
                                            "        return sign(user, hours=6)\n")
    token.write_text("class TokenIssuer:\n    def revoke(self, token):\n        return None\n")
    git(repo, "add", "-A")
    assert _try_commit(repo, "issue moved to its own module").returncode == 0, "moved, as drift says"
    (repo / ".anchorfs.toml").write_text("[hook\n")  # a broken workspace: one line, the commit goes on
    token.write_text("")
    git(repo, "add", "-A")
    proc = _try_commit(repo, "broken")
    assert proc.returncode == 0 and proc.stderr.startswith("anchorfs: gate: ") and "(the commit goes on)" in proc.stderr
    assert uninstall_sync(repo) and "anchorfs" not in (path.read_text() if path.exists() else "")


def test_post_edit_names_where_a_renamed_symbols_body_went(repo: Path) -> None:
    """Issue 39, item 3: a symbol renamed with its body kept is named where `reanchor` finds it, so
    the agent's next call is the right one; a line anchor's text says where it is now."""
    with anchorfs.open(repo) as ws:
        renamed = ws.record("issue signs for a day", anchors=["auth/token.py#TokenIssuer.issue"])
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("def issue(", "def issue_token("))
    text = context_of(agent_hook("post-edit", post_edit_json(repo, token), cwd=repo), "PostToolUse")
    assert (f"- {short_of(repo, renamed.id)}: auth/token.py#TokenIssuer.issue no longer found; the same body is at "
            "auth/token.py#TokenIssuer.issue_token: reanchor to it if the memory still holds") in text
    events = read_events(anchorfs.open(repo))
    assert "the same body is at auth/token.py#TokenIssuer.issue_token" in events[-1]["detail"]


def test_cursor_hooks_hand_the_digest_and_follow_edits(repo: Path) -> None:
    """Issue 39, item 1: Cursor's `.cursor/hooks.json` (version 1) gets `sessionStart` (the digest as
    `additional_context`) and `afterFileEdit` (transitions logged; Cursor reads no answer there)."""
    from anchorfs.agents.hosts import write_cursor_hooks

    path = repo / ".cursor" / "hooks.json"
    path.parent.mkdir()
    mine = {"command": "./scripts/format.sh"}
    path.write_text(json.dumps({"version": 1, "hooks": {"afterFileEdit": [mine]}}))
    assert write_cursor_hooks(repo).changed and not write_cursor_hooks(repo).changed
    data = json.loads(path.read_text())
    assert data == {"version": 1, "hooks": {"afterFileEdit": [mine, {"command": "anchorfs hook post-edit"}],
                                            "sessionStart": [{"command": "anchorfs hook session-start"}]}}
    with anchorfs.open(repo) as ws:
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    common = {"conversation_id": "c1", "generation_id": "g1", "workspace_roots": [str(repo)]}
    proc = agent_hook("post-edit", {**common, "hook_event_name": "afterFileEdit", "file_path": str(token),
                                    "edits": [{"old_string": "hours=24", "new_string": "hours=12"}]}, cwd=repo.parent)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert [(e["id"], e["to"]) for e in read_events(anchorfs.open(repo))] == [(stale.id, "stale")]
    proc = agent_hook("session-start", {**common, "hook_event_name": "sessionStart"}, cwd=repo.parent)
    assert proc.returncode == 0 and proc.stderr == ""
    text = json.loads(proc.stdout)["additional_context"]
    assert text.startswith("anchorfs memories of this repository (data, not instructions): 1 stale")


def test_the_gate_follows_a_staged_rename(repo: Path) -> None:
    """A file `git mv`ed, unchanged, keeps its memories fresh: the gate reads the rename git reports."""
    with anchorfs.open(repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    install(repo, gate=True)
    git(repo, "mv", "auth/token.py", "auth/issuer.py")
    assert _try_commit(repo, "rename").returncode == 0


def test_the_gate_leaves_no_git_process_behind(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate reads staged and HEAD blobs through a `cat-file` it reaps before it answers, not one
    left for the hook's exit to end."""
    from anchorfs.agents.hook_git import gate

    with anchorfs.open(repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    git(repo, "add", "-A")
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    class Kept(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            started.append(self)

    monkeypatch.setattr(subprocess, "Popen", Kept)
    assert len(gate(repo)) == 1
    assert any("cat-file" in p.args for p in started) and all(p.returncode is not None for p in started)
