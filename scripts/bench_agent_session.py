#!/usr/bin/env python3
"""A scripted agent session (issue 39): what an agent is handed at each point of action, and how long
each step takes, driven as Claude Code drives anchorfs: the official MCP client over stdio for the
tools, the hook commands fed the JSON Claude Code sends, and git itself for the commit gate.

    .venv/bin/python scripts/bench_agent_session.py [--keep DIR]

Steps: remember (MCP) -> the agent opens the file (PreToolUse: its memories arrive) -> opens it
again (nothing: told once) -> edits it (PostToolUse: the stale memory named, with the next step)
-> commits (the gate refuses, naming it) -> reanchors (MCP) -> commits (passes). Each row gives the
characters handed to the model and the wall time; `tests/agents/test_agent_session.py` runs the
same session and checks every row against the caps (`hook.file_chars`, `hook.edit_chars`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

TOKEN = '''class TokenIssuer:
    def issue(self, user):
        return sign(user, hours=24)

    def revoke(self, token):
        return None
'''


class Step(NamedTuple):
    name: str
    said: str  # what the agent (or the person committing) was handed
    ms: float
    code: int = 0


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_AUTHOR_NAME="agent", GIT_AUTHOR_EMAIL="a@example.com",
               GIT_COMMITTER_NAME="agent", GIT_COMMITTER_EMAIL="a@example.com")
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False)


def _hook(root: Path, event: str, payload: dict[str, Any]) -> Step:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "hook", event], input=json.dumps(payload), cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)
    ms = (time.perf_counter() - start) * 1000
    said = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout.strip() else ""
    return Step(event, said, ms, proc.returncode)


def run_session(root: Path) -> list[Step]:
    """The session on a fresh git repo at `root` (created here); one Step per point of action."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    (root / "auth").mkdir(parents=True)
    token = root / "auth" / "token.py"
    token.write_text(TOKEN)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "token issuing")
    subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "init"], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "hook", "install", "--gate"], check=True,
                   capture_output=True)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "anchorfs")
    params = StdioServerParameters(command=sys.executable, args=["-m", "anchorfs", "mcp", "--root", str(root)],
                                   env=dict(os.environ), cwd=str(root))
    steps: list[Step] = []
    event = {"session_id": "bench", "cwd": str(root), "transcript_path": str(root / "t.jsonl")}

    async def tool(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
        start = time.perf_counter()
        result = await client.call_tool(name, args)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        steps.append(Step(f"MCP {name}", text, (time.perf_counter() - start) * 1000, int(result.is_error)))
        return result.structured_content or {}

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            mid = (await tool(client, "remember", {"content": "access tokens live 24 hours",
                                                   "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]["id"]
            read = {**event, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": str(token)}}
            steps.append(_hook(root, "pre-read", read)._replace(name="open the file (PreToolUse)"))
            steps.append(_hook(root, "pre-read", read)._replace(name="open it again (PreToolUse)"))
            token.write_text(TOKEN.replace("hours=24", "hours=12"))
            edit = {**event, "hook_event_name": "PostToolUse", "tool_name": "Edit",
                    "tool_input": {"file_path": str(token), "old_string": "hours=24", "new_string": "hours=12"}}
            steps.append(_hook(root, "post-edit", edit)._replace(name="edit it (PostToolUse)"))
            _git(root, "add", "-A")
            start = time.perf_counter()
            refused = _git(root, "commit", "-qm", "shorter tokens")
            steps.append(Step("commit (pre-commit gate)", refused.stderr, (time.perf_counter() - start) * 1000,
                              refused.returncode))
            await tool(client, "supersede", {"id": mid, "content": "access tokens live 12 hours", "reason": "shortened"})
            start = time.perf_counter()
            passed = _git(root, "commit", "-qm", "shorter tokens")
            steps.append(Step("commit again", passed.stderr, (time.perf_counter() - start) * 1000, passed.returncode))

    asyncio.run(main())
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--keep", metavar="DIR", help="run in DIR (new) and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp) / "repo"
        steps = run_session(root)
    print("| step | characters handed | exit | ms |\n|---|---:|---:|---:|")
    for s in steps:
        print(f"| {s.name} | {len(s.said):,} | {s.code} | {s.ms:.0f} |")


if __name__ == "__main__":
    main()
