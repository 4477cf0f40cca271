"""The MCP server: every tool through the SDK's in-process client, and one real stdio session."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import anchorfs
from anchorfs.mcp import INSTRUCTIONS, WRITE_TOOLS, build_server, mcp_config, write_mcp_config
from anchorfs.workspace import Workspace

TOKEN = """class TokenIssuer:
    def issue(self, user):
        return sign(user, hours=24)

    def revoke(self, token):
        return None
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    (root / "README.md").write_text("hello\n")
    anchorfs.init(root)
    return root


def session(root: Path, fn: Callable[[Client], Awaitable[Any]], *, read_only: bool = False) -> Any:
    async def main() -> Any:
        async with Client(build_server(root, read_only=read_only)) as client:
            return await fn(client)

    return asyncio.run(main())


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fails(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_record_edit_recall_stale_supersede_recall_fresh(root: Path) -> None:
    async def flow(c: Client) -> None:
        m = (await ok(c, "remember", {
            "content": "token expiry is 24 hours", "kind": "constraint", "tags": ["auth"],
            "anchors": ["auth/token.py#TokenIssuer.issue"],
        }))["memory"]
        assert m["kind"] == "constraint" and m["tags"] == ["auth"]
        [anchor] = m["anchors"]
        assert anchor["path"] == "auth/token.py" and anchor["symbol"] == "TokenIssuer.issue"
        assert len(anchor["sha256"]) == 64  # taken by anchorfs, never by the agent

        hits = (await ok(c, "recall", {"query": "token expiry"}))["hits"]
        assert hits[0]["id"] == m["id"] and hits[0]["drift"] == "fresh"
        assert hits[0]["envelope"].startswith("[fresh · anchored")

        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
        out = await ok(c, "recall", {"query": "token expiry"})
        assert out["count"] == 1
        [h] = out["hits"]
        assert h["id"] == m["id"] and h["drift"] == "stale"
        assert h["anchors"][0]["verdict"] == "changed"
        assert h["anchors"][0]["detail"] == "auth/token.py#TokenIssuer.issue changed"
        assert h["envelope"].startswith("[STALE · auth/token.py#TokenIssuer.issue changed since")

        new = (await ok(c, "supersede", {"id": m["id"][:8], "content": "token expiry is 12 hours",
                                         "reason": "issue() now signs for 12h"}))["memory"]
        assert new["supersedes"] == m["id"] and new["status"] == "active"
        assert new["anchors"][0]["symbol"] == "TokenIssuer.issue"  # inherited, re-taken on today's code

        hits = (await ok(c, "recall", {"query": "token expiry"}))["hits"]
        assert [x["id"] for x in hits] == [new["id"]]
        assert hits[0]["drift"] == "fresh" and hits[0]["content"] == "token expiry is 12 hours"

        past = (await ok(c, "recall", {"query": "token expiry", "include_superseded": True}))["hits"]
        old = next(x for x in past if x["id"] == m["id"])
        assert old["status"] == "superseded" and old["superseded_by"] == new["id"]

    session(root, flow)
    # the server kept no state of its own: the workspace holds the whole chain
    with anchorfs.open(root) as ws:
        [head] = ws.list()
        assert head.content == "token expiry is 12 hours"
        assert [(e.op, e.memory.status) for e in ws.history(head.id)] == [
            ("record", "active"), ("supersede", "active"), ("supersede", "superseded")]


def test_context_tool_returns_markdown_and_structure(root: Path) -> None:
    async def flow(c: Client) -> None:
        stale = (await ok(c, "remember", {"content": "token expiry is 24 hours",
                                          "anchors": ["auth/token.py:3"]}))["memory"]
        fresh = (await ok(c, "remember", {"content": "token revoke does nothing yet",
                                          "anchors": ["auth/token.py#TokenIssuer.revoke"]}))["memory"]
        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=1"))
        result = await c.call_tool("context", {"task": "token expiry and revoke", "budget": 2000})
        assert not result.is_error
        text = result.content[0].text
        data = result.structured_content
        assert data["markdown"] == text
        assert data["fresh"] == [fresh["id"]] and data["stale"] == [stale["id"]]
        assert text.index("token revoke") < text.index("Warning") < text.index("token expiry is 24")
        assert "What changed: auth/token.py:3 changed." in text
        assert data["tokens"] <= data["budget"] == 2000
        assert "budget" in await fails(c, "context", {"task": "x", "budget": 5})

    session(root, flow)


def test_check_drift_all_and_one(root: Path) -> None:
    async def flow(c: Client) -> None:
        a = (await ok(c, "remember", {"content": "readme greets", "anchors": ["README.md"]}))["memory"]
        b = (await ok(c, "remember", {"content": "issue signs", "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        (root / "README.md").unlink()
        report = await ok(c, "check_drift", {})
        assert (report["checked"], report["stale"], report["fresh"]) == (2, 1, 1)
        by_id = {m["id"]: m for m in report["memories"]}
        assert by_id[a["id"]]["drift"] == "stale" and by_id[a["id"]]["anchors"][0]["detail"] == "README.md deleted"
        one = await ok(c, "check_drift", {"id": b["id"]})
        assert one["checked"] == 1 and one["fresh"] == 1
        assert one["memories"][0]["envelope"].startswith("[fresh")
        assert "no memory" in await fails(c, "check_drift", {"id": "zzzzzzzz"})

    session(root, flow)


def test_retract_and_reanchor(root: Path) -> None:
    async def flow(c: Client) -> None:
        m = (await ok(c, "remember", {"content": "issue signs for 24h", "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        (root / "auth" / "token.py").write_text(TOKEN.replace("sign(user", "sign( user"))
        assert (await ok(c, "check_drift", {"id": m["id"]}))["stale"] == 1
        re = (await ok(c, "reanchor", {"id": m["id"], "reason": "re-read issue(): still 24h"}))["memory"]
        assert re["id"] == m["id"] and re["verified_at"] is not None
        assert (await ok(c, "check_drift", {"id": m["id"]}))["fresh"] == 1
        gone = (await ok(c, "retract", {"id": m["id"], "reason": "wrong"}))["memory"]
        assert gone["status"] == "retracted"
        assert (await ok(c, "recall", {"query": "issue signs"}))["hits"] == []
        assert "retracted" in await fails(c, "retract", {"id": m["id"]})

    session(root, flow)


def test_errors_are_one_clear_line_for_the_agent(root: Path) -> None:
    async def flow(c: Client) -> None:
        assert "missing.py" in await fails(c, "remember", {"content": "x", "anchors": ["missing.py"]})
        msg = await fails(c, "remember", {"content": "x", "anchors": ["auth/token.py#Nope"]})
        assert "Nope" in msg
        assert "workspace" in await fails(c, "remember", {"content": "x", "anchors": ["../outside.py"]})
        assert await fails(c, "remember", {"content": "x", "kind": "rumour"})
        assert "no memory" in await fails(c, "supersede", {"id": "abcdef", "content": "y"})
        # nothing was written by the failed calls
        assert (await ok(c, "check_drift", {}))["checked"] == 0

    session(root, flow)
    with anchorfs.open(root) as ws:
        assert ws.list() == []


def test_tools_teach_the_discipline(root: Path) -> None:
    async def flow(c: Client) -> dict[str, Any]:
        return {t.name: t for t in (await c.list_tools()).tools}

    tools = session(root, flow)
    expected = {"remember", "recall", "context", "check_drift", "supersede", "retract", "reanchor"}
    assert expected <= set(tools)
    assert ("bisect" in tools) == hasattr(Workspace, "bisect")
    assert "lines it rests on" in INSTRUCTIONS and "supersede" in INSTRUCTIONS
    assert "symbol" in tools["remember"].description and "`supersede`" in tools["remember"].description
    assert "re-read" in tools["recall"].description and "stale" in tools["recall"].description
    assert "rather than" in tools["supersede"].description or "Prefer" in tools["supersede"].description
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["remember"].annotations.destructive_hint is False
    assert "sha256" not in json.dumps(tools["remember"].input_schema)  # the agent never supplies a hash
    assert tools["remember"].input_schema["properties"]["kind"]["enum"][0] == "decision"
    assert tools["recall"].output_schema["required"] == ["count", "hits"]


def test_read_only_removes_the_writing_tools(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("readme greets", anchors=["README.md"])

    async def flow(c: Client) -> set[str]:
        names = {t.name for t in (await c.list_tools()).tools}
        assert (await ok(c, "recall", {"query": "readme"}))["hits"][0]["id"] == m.id
        await fails(c, "remember", {"content": "x"})
        await fails(c, "retract", {"id": m.id})
        return names

    names = session(root, flow, read_only=True)
    assert names.isdisjoint(WRITE_TOOLS)
    assert {"recall", "context", "check_drift"} <= names
    with anchorfs.open(root) as ws:
        assert ws.get(m.id).status == "active"


class _BisectingWorkspace(Workspace):
    """Stands in for `Workspace.bisect` until the SDK has it, calling the same history module."""

    def bisect(self, memory_id: str) -> Any:
        from anchorfs.history import bisect

        return bisect(self.root, self.get(memory_id))


def test_bisect_tool_names_the_culprit(git_repo: Path) -> None:
    from conftest import git

    (git_repo / "token.py").write_text(TOKEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "token")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        m = ws.record("expiry is 24h", anchors=["token.py#TokenIssuer.issue"])
    (git_repo / "token.py").write_text(TOKEN.replace("24", "12"))
    git(git_repo, "commit", "-qam", "shorter tokens")
    ws = anchorfs.open(git_repo) if hasattr(Workspace, "bisect") else _BisectingWorkspace(git_repo.resolve())

    async def main() -> dict[str, Any]:
        async with Client(build_server(workspace=ws)) as c:
            assert "bisect" in {t.name for t in (await c.list_tools()).tools}
            out = await ok(c, "bisect", {"id": m.id})
            assert "no memory" in await fails(c, "bisect", {"id": "zzzzzzzz"})
            return out

    result = asyncio.run(main())["result"]
    assert result["id"] == m.id
    assert result["culprit"]["subject"] == "shorter tokens"


def test_server_outside_a_workspace_fails_fast(tmp_path: Path) -> None:
    with pytest.raises(anchorfs.WorkspaceError):
        build_server(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "anchorfs.cli", "mcp", "--root", str(tmp_path)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"anchorfs: error: {tmp_path} is not an anchorfs workspace (no .anchorfs/); run `anchorfs init`"
    ]


def test_real_stdio_session(root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "anchorfs.cli", "mcp", "--root", str(root)],
        env={"HOME": os.environ["HOME"], "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]},
    )

    async def main() -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        async with Client(params, read_timeout_seconds=60) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            m = await ok(c, "remember", {"content": "readme says hello", "anchors": ["README.md"]})
            (root / "README.md").write_text("goodbye\n")
            hits = await ok(c, "recall", {"query": "readme hello"})
            return names, m, hits

    names, m, hits = asyncio.run(main())
    assert "remember" in names and "context" in names
    assert hits["hits"][0]["id"] == m["memory"]["id"]
    assert hits["hits"][0]["drift"] == "stale"
    with anchorfs.open(root) as ws:  # the subprocess wrote through the same ledger
        assert ws.get(m["memory"]["id"]).content == "readme says hello"


# -- .mcp.json -------------------------------------------------------------------------------

def test_write_mcp_config_keeps_other_servers(root: Path) -> None:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "extra": 1}))
    path = write_mcp_config(root)
    data = json.loads(path.read_text())
    assert data["extra"] == 1 and data["mcpServers"]["other"] == {"command": "x"}
    entry = data["mcpServers"]["anchorfs"]
    assert entry == mcp_config(root)
    assert entry["args"][-3:] == ["mcp", "--root", str(root.resolve())]
    assert os.path.isabs(entry["command"])
    write_mcp_config(root)  # twice is harmless
    assert json.loads(path.read_text()) == data


def test_init_mcp_writes_a_config_that_starts_the_server(tmp_path: Path) -> None:
    target = tmp_path / "proj"
    target.mkdir()
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli", "init", "--mcp", "--root", str(target)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((target / ".mcp.json").read_text())["mcpServers"]["anchorfs"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                   env={"HOME": os.environ["HOME"]})

    async def main() -> set[str]:
        async with Client(params, read_timeout_seconds=60) as c:
            return {t.name for t in (await c.list_tools()).tools}

    assert "recall" in asyncio.run(main())


def test_write_mcp_config_refuses_a_broken_file(root: Path) -> None:
    (root / ".mcp.json").write_text("{not json")
    with pytest.raises(anchorfs.InputError):
        write_mcp_config(root)
    assert (root / ".mcp.json").read_text() == "{not json"
