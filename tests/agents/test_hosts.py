"""`anchorfs init --for HOST`: each host's config read back by its documented schema and the
server started from it as the host starts it; merging, refusals, rules blocks, Claude's hooks."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import anchorfs
from anchorfs.agents.hosts import (
    HOSTS,
    MCP_FILES,
    RULES_BEGIN,
    RULES_END,
    RULES_FILES,
    hook_command,
    setup,
    write_claude_hooks,
)

VENV_BIN = str(Path(sys.executable).parent)
TOKEN = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a person runs it with anchorfs installed on PATH (`init --for` checks that)."""
    env = {**os.environ, "PATH": os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])}
    return subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", *args], capture_output=True, text=True,
                          check=False, cwd=cwd, timeout=120, env=env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("token expiry is 24 hours", kind="constraint", anchors=["auth/token.py#TokenIssuer.issue"])
    return root


def _stdio_entry(host: str, root: Path) -> dict[str, Any]:
    """The server entry read back as the host's documentation describes its file."""
    path = root / MCP_FILES[host]
    if host == "codex":
        entry = tomllib.loads(path.read_text())["mcp_servers"]["anchorfs"]  # [mcp_servers.NAME]
        assert set(entry) <= {"command", "args", "env", "cwd", "startup_timeout_sec", "tool_timeout_sec", "enabled"}
    else:
        data = json.loads(path.read_text())
        entry = data["servers" if host == "vscode" else "mcpServers"]["anchorfs"]
        assert entry["type"] == "stdio"  # VS Code requires it; Claude Code and Cursor accept it
        assert set(entry) <= {"type", "command", "args", "env", "envFile"}
    assert isinstance(entry["command"], str) and isinstance(entry["args"], list)
    assert all(isinstance(a, str) for a in entry["args"])
    return entry


def _start_and_check(command: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """Start the server as a host does (command resolved on PATH, args, working directory) and
    call one tool over stdio with the MCP client."""
    path = os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])
    resolved = shutil.which(command, path=path)
    assert resolved is not None, f"{command} not on PATH"
    params = StdioServerParameters(command=resolved, args=args, cwd=str(cwd),
                                   env={"HOME": os.environ["HOME"], "PATH": path})

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=60) as c:
            result = await c.call_tool("check_drift", {})
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

    return asyncio.run(main())


def test_every_host_config_parses_by_its_schema_and_starts_the_server(project: Path) -> None:
    proc = cli("init", "--for", "all", "--root", str(project))
    assert proc.returncode == 0, proc.stderr
    for host in HOSTS:
        entry = _stdio_entry(host, project)
        # portable: no path, no root but the host's own variable for its folder (VS Code's `${workspaceFolder}`)
        assert entry["command"] == "anchorfs" and entry["args"] == (
            ["mcp", "--root", "${workspaceFolder}"] if host == "vscode" else ["mcp"])
        # the host's working directory is the project (Codex's: wherever the session is, here a
        # subfolder: the server finds the workspace above it, as git finds .git); VS Code's from elsewhere
        cwd = project / "auth" if host == "codex" else project.parent if host == "vscode" else project
        out = _start_and_check(entry["command"], [a.replace("${workspaceFolder}", str(project)) for a in entry["args"]],
                               cwd=cwd)
        assert (out["checked"], out["fresh"], out["stale"]) == (1, 1, 0), host  # this workspace's memory
    assert str(project) not in "".join((project / MCP_FILES[h]).read_text() for h in HOSTS)


def test_absolute_form_names_this_install_and_the_root(project: Path) -> None:
    proc = cli("init", "--for", "codex", "--for", "vscode", "--absolute", "--root", str(project))
    assert proc.returncode == 0, proc.stderr
    for host in ("codex", "vscode"):
        entry = _stdio_entry(host, project)
        assert os.path.isabs(entry["command"])
        assert entry["args"][-3:] == ["mcp", "--root", str(project.resolve())]
    # (that form starts the server from any folder: tests/agents/test_mcp.py starts it from .mcp.json)
    assert cli("init", "--absolute", "--root", str(project)).returncode == 2  # --absolute needs --for


def test_existing_configs_are_merged_and_twice_changes_nothing(project: Path) -> None:
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text(json.dumps(
        {"inputs": [{"id": "k", "type": "promptString"}], "servers": {"other": {"type": "stdio", "command": "x"}}}))
    (project / ".codex").mkdir()
    (project / ".codex" / "config.toml").write_text(
        '# my codex settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\nargs = ["y"]\n'
        '\n[mcp_servers.anchorfs]\ncommand = "old"\nstartup_timeout_sec = 30\n')
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"anchorfs": {"command": "old", "env": {"A": "1"}}}}))
    written = setup(project, ["all"])
    assert all(w.changed for w in written)
    vscode = json.loads((project / ".vscode" / "mcp.json").read_text())
    assert vscode["inputs"] == [{"id": "k", "type": "promptString"}]
    assert vscode["servers"]["other"] == {"type": "stdio", "command": "x"}
    codex_text = (project / ".codex" / "config.toml").read_text()
    assert codex_text.startswith('# my codex settings\nmodel = "o3"\n')  # comments and order kept
    codex = tomllib.loads(codex_text)
    assert codex["model"] == "o3" and codex["mcp_servers"]["other"] == {"command": "x", "args": ["y"]}
    assert codex["mcp_servers"]["anchorfs"] == {"command": "anchorfs", "args": ["mcp"], "startup_timeout_sec": 30}
    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]["anchorfs"]
    assert claude == {"command": "anchorfs", "env": {"A": "1"}, "type": "stdio", "args": ["mcp"]}
    before = {w.path: w.path.read_bytes() for w in written}
    assert not any(w.changed for w in setup(project, ["all"]))
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("rel,content", [
    (".cursor/mcp.json", "{not json"),
    (".codex/config.toml", "[mcp_servers\ncommand = 1\n"),
    (".claude/settings.json", '{"hooks": []}'),
    (".vscode/mcp.json", '{"servers": 3}'),
])
def test_a_broken_file_is_refused_in_one_line_and_nothing_is_written(project: Path, rel: str, content: str) -> None:
    (project / rel).parent.mkdir(parents=True, exist_ok=True)
    (project / rel).write_text(content)
    before = sorted(p.relative_to(project) for p in project.rglob("*") if ".anchorfs" not in p.parts)
    proc = cli("init", "--for", "all", "--root", str(project))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("anchorfs: error: ") and rel.split("/")[-1] in proc.stderr
    assert (project / rel).read_text() == content
    after = sorted(p.relative_to(project) for p in project.rglob("*") if ".anchorfs" not in p.parts)
    assert after == before  # no other host's file was written either


def test_a_linked_config_or_a_folder_leading_out_is_refused(project: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text('{"mcpServers": {}}\n')
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").symlink_to(victim)
    proc = cli("init", "--for", "cursor", "--root", str(project))
    assert proc.returncode == 1 and "symbolic link" in proc.stderr
    assert victim.read_text() == '{"mcpServers": {}}\n'
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / ".vscode").symlink_to(outside)
    proc = cli("init", "--for", "vscode", "--root", str(project))
    assert proc.returncode == 1 and "outside the workspace" in proc.stderr
    assert list(outside.iterdir()) == []


def test_rules_block_is_written_once_and_updated_in_place(project: Path) -> None:
    claude_md = project / "CLAUDE.md"
    claude_md.write_text("# My project\n\nUse tabs.\n")
    setup(project, ["claude"])
    text = claude_md.read_text()
    assert text.startswith("# My project\n\nUse tabs.\n" + RULES_BEGIN + "\n")
    assert text.endswith(RULES_END + "\n") and text.count(RULES_BEGIN) == 1
    for word in ("Anchor narrowly", "STALE", "supersede", "retract", "Remember"):
        assert word in text
    # someone edits inside the block and adds text after it: the block is restored, the rest kept
    edited = text.replace("Anchor narrowly", "Anchor broadly") + "\nMore notes.\n"
    claude_md.write_text(edited)
    setup(project, ["claude"])
    again = claude_md.read_text()
    assert again == text + "\nMore notes.\n"
    assert setup(project, ["claude"])[-1].changed is False
    # cursor: a rule file with front matter; codex: AGENTS.md
    setup(project, ["cursor", "codex"])
    mdc = (project / RULES_FILES["cursor"]).read_text()
    assert mdc.startswith("---\ndescription: ") and "\nalwaysApply: true\n---\n" in mdc and RULES_BEGIN in mdc
    assert (project / "AGENTS.md").read_text().count(RULES_BEGIN) == 1


def test_rules_file_linked_inside_is_followed_outside_refused(project: Path, tmp_path: Path) -> None:
    (project / "AGENTS.md").write_text("# Agents\n")
    (project / "CLAUDE.md").symlink_to("AGENTS.md")
    setup(project, ["claude", "codex"])
    assert (project / "CLAUDE.md").is_symlink()
    assert (project / "AGENTS.md").read_text().count(RULES_BEGIN) == 1
    (project / "CLAUDE.md").unlink()
    outside = tmp_path / "notes.md"
    outside.write_text("mine\n")
    (project / "CLAUDE.md").symlink_to(outside)
    with pytest.raises(anchorfs.WorkspaceError, match="outside the workspace"):
        setup(project, ["claude"])
    assert outside.read_text() == "mine\n"


def test_a_block_without_its_end_marker_is_refused(project: Path) -> None:
    (project / "AGENTS.md").write_text(f"intro\n{RULES_BEGIN}\nhalf a block\n")
    with pytest.raises(anchorfs.InputError, match="has no"):
        setup(project, ["codex"])
    assert not (project / ".codex").exists()


def test_claude_hooks_are_merged_never_duplicated(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}
    settings.write_text(json.dumps({"permissions": {"allow": ["Read"]}, "hooks": {"PostToolUse": [mine]}}))
    assert write_claude_hooks(project).changed
    data = json.loads(settings.read_text())
    assert data["permissions"] == {"allow": ["Read"]}
    post = data["hooks"]["PostToolUse"]
    assert post[0] == mine
    assert post[1] == {"matcher": "Write|Edit|MultiEdit",
                       "hooks": [{"type": "command", "command": hook_command("post-edit", project), "timeout": 10}]}
    start = data["hooks"]["SessionStart"]
    assert start == [{"matcher": "startup|resume|clear|compact",
                      "hooks": [{"type": "command", "command": hook_command("session-start", project), "timeout": 10}]}]
    assert not write_claude_hooks(project).changed
    # switching to the absolute form replaces our entries in place
    assert write_claude_hooks(project, absolute=True).changed
    data = json.loads(settings.read_text())
    assert [g["hooks"][0]["command"] for g in data["hooks"]["SessionStart"]] == [
        hook_command("session-start", project, absolute=True)]
    assert len(data["hooks"]["PostToolUse"]) == 2
    assert f"--root {project.resolve()}" in data["hooks"]["PostToolUse"][1]["hooks"][0]["command"]


def test_doctor_checks_the_install_end_to_end_and_says_what_to_fix(project: Path) -> None:
    """Issue 38: on PATH, the workspace, each host file's command run as the host would, the hooks,
    the store; one line each, the fix under what fails, exit 1 then; `--json` too."""
    assert cli("init", "--for", "claude", "--for", "vscode", "--root", str(project)).returncode == 0
    proc = cli("doctor", "--root", str(project))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert all(line.startswith("ok   ") for line in lines) and len(lines) == 7, lines  # PATH, workspace, 2 hosts, hook, git, store
    assert "ok   claude: .mcp.json starts the server: anchorfs, version " in proc.stdout
    assert "ok   vscode: .vscode/mcp.json starts the server" in proc.stdout
    assert "ok   claude: the SessionStart hook runs: answered with the digest" in proc.stdout
    bare = {k: v for k, v in os.environ.items()}
    bare["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                   if not (Path(p) / "anchorfs").exists())  # a PATH without anchorfs on it
    (project / ".vscode" / "mcp.json").write_text("{ not json")
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "doctor", "--root", str(project), "--json"],
                          capture_output=True, text=True, timeout=120, env=bare, check=False)
    assert proc.returncode == 1 and proc.stderr == ""
    report = json.loads(proc.stdout)
    failed = {c["name"]: c for c in report["checks"] if not c["ok"]}
    assert not report["ok"] and set(failed) == {"anchorfs on PATH", "claude: .mcp.json starts the server",
                                                "claude: the SessionStart hook runs", "vscode: .vscode/mcp.json"}
    assert all(c["fix"] for c in failed.values()) and "--absolute" in failed["claude: .mcp.json starts the server"]["fix"]
    (project / ".anchorfs.toml").write_text("[hook\n")  # a broken config: its own line and fix, no traceback
    proc = cli("doctor", "--root", str(project))
    assert proc.returncode == 1 and proc.stderr == "" and "FIX  workspace: " in proc.stdout
