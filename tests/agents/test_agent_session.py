"""Issue 39: a scripted agent session, driven as Claude Code drives anchorfs (the official MCP client
over stdio, the hook commands fed its JSON, git's own commit): memory arrives when a file is opened,
once; an edit that stales it is named with the next step; the gate refuses the commit until the
memory is settled. `scripts/bench_agent_session.py` runs the same session and prints each step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_agent_session import run_session  # noqa: E402  (the bench's own session, checked here)


def test_memory_arrives_at_each_point_of_action_bounded_and_once(tmp_path: Path) -> None:
    steps = {s.name: s for s in run_session(tmp_path / "repo")}
    assert [s.code for s in steps.values()] == [0, 0, 0, 0, 1, 0, 0]
    memory = steps["MCP remember"].said
    opened = steps["open the file (PreToolUse)"].said
    assert opened.startswith("anchorfs: 1 memory rests on auth/token.py, 0 stale") and "[fresh · anchored" in opened
    assert "access tokens live 24 hours" in opened and len(opened) <= 1500  # hook.file_chars
    assert steps["open it again (PreToolUse)"].said == ""  # told once per file per session
    edited = steps["edit it (PostToolUse)"].said
    assert "made 1 memory stale" in edited and "`reanchor`" in edited and "`supersede`" in edited
    assert len(edited) <= 2000  # hook.edit_chars
    refused = steps["commit (pre-commit gate)"].said
    assert refused.startswith("anchorfs: this commit would make 1 memory stale:")
    assert "auth/token.py#TokenIssuer.issue changed" in refused and "--no-verify" in refused
    mid = json.loads(memory)["memory"]["id"]  # named by its shortest unique prefix then (a successor since may share it)
    assert any(len(w) >= 6 and mid.startswith(w) for w in refused.split())
    assert "superseded" not in steps["commit again"].said and steps["commit again"].code == 0
