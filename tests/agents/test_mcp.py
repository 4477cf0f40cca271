"""The MCP server: every tool through the SDK's in-process client, and one real stdio session."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import TOKEN

import anchorfs
from anchorfs.agents.mcp import INSTRUCTIONS, WRITE_TOOLS, build_server, mcp_config, write_mcp_config
from anchorfs.sdk.workspace import Workspace


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
        assert m["kind"] == "constraint" and m["tags"] == ["auth"] and m["status"] == "active"
        assert m["anchors"] == ["auth/token.py#TokenIssuer.issue"] and m["drift"] == "fresh"
        assert "sha256" not in json.dumps(m)  # taken by anchorfs, and kept from the agent

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
        assert h["envelope"].startswith("[STALE · auth/token.py#TokenIssuer.issue changed ·")

        new = (await ok(c, "supersede", {"id": m["id"][:8], "content": "token expiry is 12 hours",
                                         "reason": "issue() now signs for 12h"}))["memory"]
        assert new["supersedes"] == m["id"] and new["status"] == "active"
        assert new["anchors"] == ["auth/token.py#TokenIssuer.issue"]  # inherited, re-taken on today's code
        assert new["drift"] == "fresh"

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
        fresh = (await ok(c, "remember", {"content": "token revoke does not check expiry yet",
                                          "anchors": ["auth/token.py#TokenIssuer.revoke"]}))["memory"]
        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=1"))
        # A task both memories match well: this test is about the tool's shape; which memories a
        # task selects is tests/sdk/test_context.py's and tests/store/test_ranking.py's.
        result = await c.call_tool("context", {"task": "token expiry", "budget": 2000})
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
        # a comment is a token: the anchored code changed, the claim still holds
        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24)", "hours=24)  # 24h, see ADR-7"))
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
        # nothing sends the agent to a tool this server does not have
        texts = [c.instructions or ""] + [t.description or "" for t in (await c.list_tools()).tools]
        for absent in WRITE_TOOLS:
            assert not any(f"`{absent}`" in text for text in texts), absent
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
        [sys.executable, "-m", "anchorfs.cli.commands", "mcp", "--root", str(tmp_path)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"anchorfs: error: {tmp_path} is not an anchorfs workspace (no .anchorfs/); run `anchorfs init`"
    ]


def test_a_server_started_outside_a_workspace_finds_it_in_the_clients_roots(root: Path, tmp_path: Path) -> None:
    """Issue 39, item 5: started elsewhere (no --root, no ANCHORFS_ROOT), the server asks the client's
    roots (`roots/list`) at the first call; a client without roots gets one clear line, nothing written."""
    from mcp import types

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ANCHORFS_ROOT"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "anchorfs.cli.commands", "mcp"], env=env,
                                   cwd=str(elsewhere))

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{tmp_path / 'none'}"),
                                            types.Root(uri=f"file://{root / 'auth'}")])  # inside the workspace

    async def main() -> tuple[dict[str, Any], str]:
        # the initialize handshake, as hosts speak it today: the 2026-07-28 revision deprecates roots
        async with Client(params, read_timeout_seconds=60, list_roots_callback=roots, mode="legacy") as c:
            await c.get_prompt("reverify_stale")  # the first call may be a prompt: it finds the workspace too
            found = await ok(c, "remember", {"content": "readme says hello", "anchors": ["README.md"]})
        async with Client(params, read_timeout_seconds=60) as c:  # no roots to ask
            return found, await fails(c, "recall", {"query": "readme"})

    found, refused = asyncio.run(main())
    with anchorfs.open(root) as ws:
        assert ws.get(found["memory"]["id"]).content == "readme says hello"
    assert refused.startswith(f"no anchorfs workspace in the folder this server started in ({elsewhere})")
    assert not (elsewhere / ".anchorfs").exists()


def test_real_stdio_session(root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "anchorfs.cli.commands", "mcp", "--root", str(root)],
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
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "init", "--mcp", "--root", str(target)],
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


# -- issue 16: every input honoured or refused --------------------------------------------------

def _ledger(root: Path) -> bytes:
    path = root / ".anchorfs" / "ledger.jsonl"
    return path.read_bytes() if path.exists() else b""


def _readable(msg: str) -> None:
    """One sentence for an agent: no pydantic dump, no SDK prefix, one line."""
    assert msg and "\n" not in msg, msg
    for raw in ("validation error", "pydantic", "Arguments", "Error executing", "input_value", "type="):
        assert raw not in msg, msg


def test_every_schema_is_closed(root: Path) -> None:
    async def flow(c: Client) -> list[Any]:
        return (await c.list_tools()).tools

    tools = session(root, flow)
    assert {"show", "history", "revert"} <= {t.name for t in tools}
    for t in tools:
        assert t.input_schema["additionalProperties"] is False, t.name
    assert "revert" in WRITE_TOOLS


@pytest.mark.parametrize(("tool", "args", "meant"), [
    ("remember", {"content": "x", "paths": ["README.md"]}, "anchors"),
    ("remember", {"content": "x", "symbols": ["auth/token.py#TokenIssuer"]}, "anchors"),
    ("remember", {"content": "x", "evidence": "README.md"}, "anchors"),
    ("remember", {"content": "x", "anchor": "README.md"}, "anchors"),
    ("remember", {"content": "x", "file": "README.md"}, "anchors"),
    ("remember", {"text": "x"}, "content"),
    ("recall", {"query": "x", "limit": 3}, "k"),
    ("recall", {"query": "x", "top_k": 3}, "k"),
    ("recall", {"query": "x", "topK": 3}, "k"),
    ("recall", {"q": "x"}, "query"),
    ("recall", {"query": "x", "includeSuperseded": True}, "include_superseded"),
    ("context", {"task": "x", "max_tokens": 500}, "budget"),
    ("context", {"query": "x"}, "task"),
    ("check_drift", {"memory_id": "abcd"}, "id"),
    ("check_drift", {"k": 5}, "limit"),
])
def test_unknown_argument_names_the_parameter_meant(root: Path, tool: str, args: dict[str, Any], meant: str) -> None:
    before = _ledger(root)

    async def flow(c: Client) -> str:
        return await fails(c, tool, args)

    msg = session(root, flow)
    _readable(msg)
    [unknown] = [k for k in args if k != meant and k not in ("content", "query", "task")] or list(args)
    assert msg.startswith(f"unknown argument {unknown!r}; "), msg
    assert f"given as `{meant}`: " in msg
    assert _ledger(root) == before


def test_unknown_argument_message_as_the_issue_asks(root: Path) -> None:
    async def flow(c: Client) -> tuple[str, str]:
        return (await fails(c, "remember", {"content": "x", "paths": ["README.md"]}),
                await fails(c, "recall", {"query": "x", "wat": 1}))

    paths, wat = session(root, flow)
    assert paths == 'unknown argument \'paths\'; anchors are given as `anchors`: ["src/a.py#Cls.fn", "src/b.py:10-12"]'
    assert wat == "unknown argument 'wat'; `recall` takes `query`, `k`, `include_superseded`, `as_of`, `include_weak`"
    with anchorfs.open(root) as ws:
        assert ws.list() == []


@pytest.mark.parametrize(("tool", "args", "expected"), [
    ("recall", {"query": "x", "k": "ten"}, '`k` must be a whole number from 1 to 100; got "ten"'),
    ("recall", {"query": "x", "k": True}, "`k` must be a whole number from 1 to 100; got true"),
    ("recall", {"query": "x", "k": 0}, "`k` must be a whole number from 1 to 100; got 0"),
    ("recall", {"query": "x", "k": 2.5}, "`k` must be a whole number from 1 to 100; got 2.5"),
    ("recall", {"query": 5}, "`query` must be a string; got 5"),
    ("recall", {"query": "x", "include_superseded": "yes"}, '`include_superseded` must be true or false; got "yes"'),
    ("remember", {"content": "x", "anchors": "README.md"},
     '`anchors` must be a list of strings such as ["src/a.py#Cls.fn", "src/b.py:10-12"]; got "README.md"'),
    ("remember", {"content": "x", "anchors": [1]},
     '`anchors` must be a list of strings such as ["src/a.py#Cls.fn", "src/b.py:10-12"]; got [1]'),
    ("remember", {"content": "x", "tags": "auth"}, '`tags` must be a list of strings such as ["auth"]; got "auth"'),
    ("remember", {"content": None}, "`content` must be a string; got null"),
    ("remember", {"content": "x", "kind": 5},
     "`kind` must be one of decision, constraint, goal, preference, reference, summary, note; got 5"),
    ("remember", {}, '`remember` needs `content`; the memory\'s text is given as `content`: "token expiry is 24h"'),
    ("supersede", {"id": "abcd", "content": "y", "anchors": {"path": "README.md"}},
     '`anchors` must be a list of strings such as ["src/a.py#Cls.fn", "src/b.py:10-12"]; got {"path": "README.md"}'),
    ("check_drift", {"offset": -1}, "`offset` must be a whole number of at least 0; got -1"),
])
def test_wrong_types_are_refused_in_one_sentence(root: Path, tool: str, args: dict[str, Any], expected: str) -> None:
    async def flow(c: Client) -> str:
        return await fails(c, tool, args)

    msg = session(root, flow)
    _readable(msg)
    assert msg == expected
    assert _ledger(root) == b""


def test_whole_numbers_and_json_text_lists_are_honoured(root: Path) -> None:
    """JSON Schema's integer 2.0 is 2; a host that sends a list as JSON text means that list."""
    async def flow(c: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        m = await ok(c, "remember", {"content": "readme says hello", "anchors": '["README.md"]'})
        r = await ok(c, "recall", {"query": "readme hello", "k": 2.0})
        return m, r

    m, r = session(root, flow)
    assert m["memory"]["anchors"] == ["README.md"]
    assert r["count"] == 1


def test_results_are_compact_json_without_hashes(root: Path) -> None:
    async def flow(c: Client) -> list[Any]:
        out = []
        m = await c.call_tool("remember", {"content": "token expiry is 24 hours", "tags": ["auth"],
                                           "anchors": ["auth/token.py#TokenIssuer.issue"]})
        mid = m.structured_content["memory"]["id"]
        out.append(m)
        out.append(await c.call_tool("recall", {"query": "token expiry"}))
        out.append(await c.call_tool("check_drift", {"all": True}))
        out.append(await c.call_tool("show", {"id": mid}))
        out.append(await c.call_tool("history", {"id": mid}))
        out.append(await c.call_tool("reanchor", {"id": mid}))
        return out

    results = session(root, flow)
    for n, result in enumerate(results):
        assert not result.is_error, result.content
        [text] = result.content
        assert "sha256" not in text.text and "content_hash" not in text.text
        assert "sha256" not in json.dumps(result.structured_content)
        if n not in (1, 2):  # recall's and check_drift's text are the envelope format's (`_read_text`)
            assert text.text == json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)


def test_check_drift_lists_the_flagged_only_and_pages_on_request(root: Path) -> None:
    for n in range(6):
        (root / f"f{n}.py").write_text(f"x = {n}\n")
    with anchorfs.open(root) as ws:
        ids = [ws.record(f"file {n} sets x to {n}", anchors=[f"f{n}.py"]).id for n in range(6)]
        ws.record("an unanchored note")
    (root / "f1.py").write_text("x = 100\n")
    (root / "f4.py").unlink()

    async def flow(c: Client) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        default = await ok(c, "check_drift", {})
        pages = []
        offset: int | None = 0
        while offset is not None:
            page = await ok(c, "check_drift", {"all": True, "offset": offset, "limit": 4})
            pages.append(page)
            offset = page["next_offset"]
        assert "not both" in await fails(c, "check_drift", {"id": ids[0], "all": True})
        return default, pages

    default, pages = session(root, flow)
    assert (default["checked"], default["stale"], default["unknown"], default["fresh"]) == (6, 2, 0, 4)
    assert {m["id"] for m in default["memories"]} == {ids[1], ids[4]}
    assert default["listed"] == 2 and default["next_offset"] is None
    by_id = {m["id"]: m for m in default["memories"]}
    assert by_id[ids[1]] == {"id": ids[1], "drift": "stale", "content": "file 1 sets x to 1",
                             "anchors": [{"anchor": "f1.py", "verdict": "changed", "detail": "f1.py changed"}]}
    assert [len(p["memories"]) for p in pages] == [4, 2]
    assert [p["offset"] for p in pages] == [0, 4]
    assert sorted(m["id"] for p in pages for m in p["memories"]) == sorted(ids)
    fresh = next(m for p in pages for m in p["memories"] if m["id"] == ids[0])
    assert fresh["anchors"] == [{"anchor": "f0.py", "verdict": "fresh"}]


def test_check_drift_answer_stays_small_on_many_memories(root: Path) -> None:
    """The issue's 192k characters at 516 memories: a default answer now lists only the flagged."""
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": f"readme fact {n} " + "words " * 40, "anchors": ["README.md"]} for n in range(300)])
        ws.record("the token issuer signs", anchors=["auth/token.py#TokenIssuer.issue"])
    (root / "auth" / "token.py").write_text(TOKEN.replace("sign(", "sig("))

    async def flow(c: Client) -> Any:
        return await c.call_tool("check_drift", {})

    result = session(root, flow)
    data = result.structured_content
    assert (data["checked"], data["stale"], data["fresh"]) == (301, 1, 300)
    assert len(result.content[0].text) < 600


def test_hits_carry_a_bounded_text_and_show_gives_more(root: Path) -> None:
    from anchorfs.agents.mcp import HIT_CHARS

    long = "the readme greets everyone. " + "x" * 9000
    with anchorfs.open(root) as ws:
        m = ws.record(long, anchors=["README.md"])

    async def flow(c: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        return await ok(c, "recall", {"query": "readme greets"}), await ok(c, "show", {"id": m.id})

    recall, shown = session(root, flow)
    [hit] = recall["hits"]
    assert hit["content_cut"] is True and hit["content_chars"] == len(long)
    assert hit["content"].startswith(long[:HIT_CHARS])
    assert hit["content"].endswith(f"[... cut: {HIT_CHARS:,} of {len(long):,} characters; `show` the id for more]")
    assert shown["memory"]["content"] == long and "content_cut" not in shown["memory"]
    assert shown["memory"]["drift"] == "fresh" and shown["memory"]["envelope"].startswith("[fresh")


def test_show_history_and_revert(root: Path) -> None:
    async def flow(c: Client) -> None:
        old = (await ok(c, "remember", {"content": "token expiry is 24 hours",
                                        "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        new = (await ok(c, "supersede", {"id": old["id"], "content": "token expiry is 12 hours"}))["memory"]
        shown = (await ok(c, "show", {"id": old["id"]}))["memory"]
        assert shown["status"] == "superseded" and shown["superseded_by"] == new["id"]
        assert shown["anchors"] == [{"anchor": "auth/token.py#TokenIssuer.issue", "verdict": "fresh"}]
        events = (await ok(c, "history", {"id": new["id"]}))["events"]
        assert [(e["op"], e["id"], e["status"]) for e in events] == [
            ("record", old["id"], "active"), ("supersede", new["id"], "active"), ("supersede", old["id"], "superseded")]
        back = (await ok(c, "revert", {"id": old["id"], "reason": "12h was a misreading"}))["memory"]
        assert back["id"] == old["id"] and back["status"] == "active" and back["drift"] == "fresh"
        assert (await ok(c, "show", {"id": new["id"]}))["memory"]["status"] == "retracted"
        assert [h["id"] for h in (await ok(c, "recall", {"query": "token expiry"}))["hits"]] == [old["id"]]
        msg = await fails(c, "revert", {"id": old["id"]})
        _readable(msg)
        assert "nothing to revert" in msg

    session(root, flow)


def test_errors_name_this_servers_tools_not_cli_flags(root: Path) -> None:
    with anchorfs.open(root) as ws:
        bare = ws.record("an unanchored note")
        gone = ws.record("a retracted one")
        ws.retract(gone.id)

    async def flow(c: Client) -> tuple[str, str, set[str]]:
        names = {t.name for t in (await c.list_tools()).tools}
        return await fails(c, "reanchor", {"id": bare.id}), await fails(c, "supersede", {"id": gone.id, "content": "y"}), names

    no_anchors, retracted, names = session(root, flow)
    assert "--" not in no_anchors and "`anchors`" in no_anchors
    assert "`revert`" in retracted and "revert" in names


def test_empty_anchors_leave_them_as_they_are_and_drop_anchors_drops(root: Path) -> None:
    async def flow(c: Client) -> None:
        m = (await ok(c, "remember", {"content": "issue signs for 24h", "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        re = (await ok(c, "reanchor", {"id": m["id"], "anchors": []}))["memory"]
        assert re["anchors"] == ["auth/token.py#TokenIssuer.issue"]
        new = (await ok(c, "supersede", {"id": m["id"], "content": "issue signs for 12h", "anchors": []}))["memory"]
        assert new["anchors"] == ["auth/token.py#TokenIssuer.issue"]
        newer = (await ok(c, "supersede", {"id": new["id"], "content": "issue signs for 6h", "anchors": None}))["memory"]
        assert newer["anchors"] == ["auth/token.py#TokenIssuer.issue"]
        before = _ledger(root)
        assert "not both" in await fails(c, "supersede", {"id": newer["id"], "content": "z", "anchors": ["README.md"],
                                                           "drop_anchors": True})
        assert _ledger(root) == before
        bare = (await ok(c, "supersede", {"id": newer["id"], "content": "tokens last a while", "drop_anchors": True}))["memory"]
        assert bare["anchors"] == [] and bare["drift"] == "unanchored"
        later = (await ok(c, "supersede", {"id": bare["id"], "content": "tokens last 6h"}))["memory"]
        assert later["anchors"] == []  # nothing to inherit
        other = (await ok(c, "remember", {"content": "revoke is a no-op", "anchors": ["auth/token.py#TokenIssuer.revoke"]}))["memory"]
        assert "not both" in await fails(c, "reanchor", {"id": other["id"], "anchors": ["README.md"], "drop_anchors": True})
        dropped = (await ok(c, "reanchor", {"id": other["id"], "drop_anchors": True}))["memory"]
        assert dropped["anchors"] == [] and dropped["drift"] == "unanchored"
        # a retired memory is refused, naming the head of its chain
        msg = await fails(c, "reanchor", {"id": m["id"]})
        _readable(msg)
        assert later["id"] in msg

    session(root, flow)


def test_remembering_the_same_claim_twice_says_so(root: Path) -> None:
    async def flow(c: Client) -> None:
        args = {"content": "token expiry is 24 hours", "anchors": ["auth/token.py#TokenIssuer.issue"]}
        first = await ok(c, "remember", args)
        assert first["duplicate"] is False
        before = _ledger(root)
        again = await ok(c, "remember", args)
        assert again["duplicate"] is True and again["memory"]["id"] == first["memory"]["id"]
        assert again["note"] == f"already remembered as {first['memory']['id']}; nothing written"
        assert _ledger(root) == before

    session(root, flow)


def _state_snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under .anchorfs/ with its mtime and, for files, its bytes."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted((root / ".anchorfs").rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_mtime_ns, path.read_bytes() if path.is_file() else None)
    return out


def test_read_only_server_writes_nothing(root: Path) -> None:
    with anchorfs.open(root) as ws:
        stale = ws.record("issue signs for 24h", anchors=["auth/token.py#TokenIssuer.issue"])
        fresh = ws.record("readme greets", anchors=["README.md"])
        ws.query("warm the store")
    (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    before = _state_snapshot(root)
    assert ".anchorfs/manifest.json" in before

    async def flow(c: Client) -> None:
        assert (await ok(c, "recall", {"query": "issue signs"}))["hits"][0]["drift"] == "stale"
        assert (await ok(c, "check_drift", {}))["stale"] == 1
        assert (await ok(c, "check_drift", {"id": stale.id}))["stale"] == 1
        assert (await ok(c, "show", {"id": fresh.id}))["memory"]["drift"] == "fresh"
        await ok(c, "history", {"id": stale.id})
        await ok(c, "context", {"task": "token signing"})
        msg = await fails(c, "remember", {"content": "x"})
        assert msg == "Unknown tool: remember"
        # the resources and the prompt read the same way: nothing written either
        assert json.loads((await c.read_resource("anchorfs://stale")).contents[0].text)["stale"] == 1  # type: ignore[union-attr]
        await c.read_resource(f"anchorfs://memory/{fresh.id}")
        assert stale.id in str((await c.get_prompt("reverify_stale")).messages[0].content)

    session(root, flow, read_only=True)
    assert _state_snapshot(root) == before


def test_read_only_workspace_refuses_a_write(root: Path) -> None:
    ws = Workspace(root.resolve(), read_only=True)
    with pytest.raises(anchorfs.WorkspaceError, match="read-only"):
        ws.record("x")
    assert _ledger(root) == b""


def test_mcp_command_refuses_json(root: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "mcp", "--json", "--root", str(root)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "--json" in proc.stderr and "JSON-RPC" in proc.stderr


# -- the property: every tool, driven with what an agent might guess ----------------------------

class _LiveClient:
    """One in-process MCP session kept open on its own event loop, for many hypothesis examples."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.client: Client | None = None

    def __enter__(self) -> "_LiveClient":
        self.thread.start()
        self.stop = asyncio.run_coroutine_threadsafe(self._make_event(), self.loop).result()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.main = asyncio.run_coroutine_threadsafe(self._main(ready), self.loop)
        ready.result(timeout=120)
        return self

    async def _make_event(self) -> asyncio.Event:
        return asyncio.Event()

    async def _main(self, ready: "concurrent.futures.Future[None]") -> None:
        async with Client(self.server) as client:
            self.client = client
            ready.set_result(None)
            await self.stop.wait()

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        assert self.client is not None
        return asyncio.run_coroutine_threadsafe(self.client.call_tool(tool, args), self.loop).result(timeout=120)

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.main.result(timeout=120)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=120)
        self.loop.close()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_GUESSES = ["paths", "path", "file", "files", "symbols", "evidence", "anchor", "limit", "top_k", "n", "text",
            "memory_id", "memory", "type", "tag", "why", "max_tokens", "question", "since", "page", "verbose"]


def _as_json_list(schema: dict[str, Any], value: Any) -> Any:
    """The host quirk the server honours: a list sent as JSON text is that list."""
    admits_array = any(o.get("type") == "array" for o in schema.get("anyOf", [schema]))
    if admits_array and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, list) else value
    return value


def test_every_tool_honours_or_refuses_what_an_agent_guesses(git_repo: Path) -> None:
    """Random extra keys, wrong types, nulls and empty lists into every tool: an error in one
    readable sentence with the ledger byte-identical, or exactly the documented effect."""
    import jsonschema
    from conftest import git

    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    (git_repo / "README.md").write_text("hello\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "code")
    anchorfs.init(git_repo)
    counter = iter(range(10**6))

    with _LiveClient(build_server(git_repo)) as live:
        schemas = {t.name: t.input_schema for t in asyncio.run_coroutine_threadsafe(
            live.client.list_tools(), live.loop).result().tools}  # type: ignore[union-attr]

        def fresh_memory(*, retired: bool = False) -> dict[str, Any]:
            out = live.call("remember", {"content": f"claim {next(counter)} about the token issuer",
                                         "anchors": ["auth/token.py#TokenIssuer.issue"]})
            assert not out.is_error, out.content
            memory = out.structured_content["memory"]
            if retired:
                assert not live.call("retract", {"id": memory["id"]}).is_error
            return memory

        def base(tool: str) -> dict[str, Any]:
            n = next(counter)
            return {
                "remember": lambda: {"content": f"fact {n} about the readme", "anchors": ["README.md"]},
                "recall": lambda: {"query": "token issuer"},
                "context": lambda: {"task": "token issuer"},
                "check_drift": lambda: {},
                "show": lambda: {"id": fresh_memory()["id"]},
                "history": lambda: {"id": fresh_memory()["id"]},
                "bisect": lambda: {"id": fresh_memory()["id"]},
                "supersede": lambda: {"id": fresh_memory()["id"], "content": f"corrected claim {n}"},
                "retract": lambda: {"id": fresh_memory()["id"]},
                "reanchor": lambda: {"id": fresh_memory()["id"]},
                "revert": lambda: {"id": fresh_memory(retired=True)["id"]},
            }[tool]()

        @settings(max_examples=70, deadline=None, suppress_health_check=list(HealthCheck))
        @given(tool=st.sampled_from(sorted(schemas)), how=st.sampled_from(["extra", "wrong", "null", "empty"]),
               data=st.data())
        def run(tool: str, how: str, data: st.DataObject) -> None:
            props = schemas[tool]["properties"]
            args = base(tool)
            expect_error: str | None = None  # the parameter the error must name
            param: str | None = None
            if how == "extra":
                key = data.draw(st.sampled_from(_GUESSES) | st.text(min_size=1, max_size=10), label="key")
                assume(key not in props)
                args[key] = data.draw(_JSON, label="value")
                expect_error = key
            else:
                if not props:
                    return
                param = data.draw(st.sampled_from(sorted(props)), label="param")
                value = {"null": None, "empty": []}.get(how)
                if how == "wrong":
                    value = data.draw(_JSON.filter(
                        lambda v: not jsonschema.Draft202012Validator(props[param]).is_valid(_as_json_list(props[param], v))),
                        label="value")
                args[param] = value
                if not jsonschema.Draft202012Validator(props[param]).is_valid(_as_json_list(props[param], value)):
                    expect_error = param
            before = _ledger(git_repo)
            out = live.call(tool, args)
            text = " ".join(getattr(c, "text", "") for c in out.content)
            if out.is_error:
                _readable(text)
                assert _ledger(git_repo) == before, (tool, args, text)
            if expect_error is not None:
                assert out.is_error, (tool, args)
                if how == "extra":
                    assert text.startswith(f"unknown argument {expect_error!r}; "), text
                else:
                    assert f"`{expect_error}`" in text, text
                return
            # a valid call: exactly the documented effect
            assert not out.is_error, (tool, args, text)
            result = out.structured_content
            if tool in ("recall", "context", "check_drift", "show", "history", "bisect"):
                assert _ledger(git_repo) == before
            if how == "empty" and param == "anchors":
                if tool == "remember":
                    assert result["memory"]["anchors"] == [] and result["memory"]["drift"] == "unanchored"
                else:  # supersede, reanchor: [] leaves them as they are
                    assert result["memory"]["anchors"] == ["auth/token.py#TokenIssuer.issue"]
            if how == "empty" and param == "tags":
                assert "tags" not in result["memory"]
            if tool == "supersede":
                assert result["memory"]["supersedes"] == args["id"]
            if tool == "retract":
                assert result["memory"]["status"] == "retracted"
            if tool in ("revert", "reanchor", "remember", "supersede"):
                assert result["memory"]["status"] == "active"

        run()


def test_content_over_the_cap_is_one_line_and_writes_nothing(root: Path) -> None:
    async def flow(c: Client) -> str:
        return await fails(c, "remember", {"content": "x" * 40_000})

    msg = session(root, flow)
    _readable(msg)
    assert msg == "content is 40,000 characters, over the limit of 32,768 (limits.content_chars); nothing was written"
    assert _ledger(root) == b""


def test_bisect_cuts_a_long_hunk(git_repo: Path) -> None:
    from conftest import git

    from anchorfs.agents.mcp import HIT_CHARS

    (git_repo / "big.py").write_text("x = 0\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "small")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        m = ws.record("big.py sets x to zero", anchors=["big.py"])
    (git_repo / "big.py").write_text("".join(f"value_{n} = {n} * 1000\n" for n in range(400)))
    git(git_repo, "commit", "-qam", "a long rewrite")

    async def flow(c: Client) -> dict[str, Any]:
        return await ok(c, "bisect", {"id": m.id})

    out = session(git_repo, flow)["result"]
    assert out["culprit"]["subject"] == "a long rewrite"
    texts = [v for v in _strings(out) if "value_1 = 1 * 1000" in v]
    assert texts and all(len(t) < HIT_CHARS + 80 and t.endswith(" characters]") for t in texts)


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def test_read_only_server_writes_nothing_whatever_it_is_sent(root: Path) -> None:
    """Any call a read-only server takes, good or bad, leaves `.anchorfs/` as it was."""
    with anchorfs.open(root) as ws:
        stale = ws.record("issue signs for 24h", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("readme greets", anchors=["README.md"])
        ws.supersede(ws.record("revoke is a stub", anchors=["auth/token.py#TokenIssuer.revoke"]).id,
                     "revoke returns None")
        ws.query("warm the store")
    (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    before = _state_snapshot(root)

    with _LiveClient(build_server(root, read_only=True)) as live:
        schemas = {t.name: t.input_schema for t in asyncio.run_coroutine_threadsafe(
            live.client.list_tools(), live.loop).result().tools}  # type: ignore[union-attr]
        assert set(schemas).isdisjoint(WRITE_TOOLS)

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
        @given(tool=st.sampled_from(sorted(schemas)), data=st.data())
        def run(tool: str, data: st.DataObject) -> None:
            props = schemas[tool]["properties"]
            args: dict[str, Any] = {k: v for k, v in {"query": "token issuer", "task": "token issuer",
                                                     "id": stale.id}.items() if k in props}
            for key in data.draw(st.lists(st.sampled_from(sorted(props) + _GUESSES), max_size=2), label="keys"):
                args[key] = data.draw(_JSON | st.just([]), label=key)
            out = live.call(tool, args)
            if out.is_error:
                _readable(" ".join(getattr(c, "text", "") for c in out.content))
            assert _state_snapshot(root) == before, (tool, args)

        run()


# -- MCP conventions (issue 20): annotations, output schemas, resources, the prompt, labels -------

def test_tools_come_in_a_fixed_order_with_annotations_and_output_schemas(root: Path) -> None:
    from anchorfs.agents.mcp import TOOL_ORDER

    async def flow(c: Client) -> list[Any]:
        return list((await c.list_tools()).tools)

    for read_only in (False, True):
        tools = session(root, flow, read_only=read_only)
        names = [t.name for t in tools]
        want = [n for n in TOOL_ORDER if not (read_only and n in WRITE_TOOLS)]
        assert names == [n for n in want if n != "bisect" or hasattr(Workspace, "bisect")]
        for t in tools:
            a = t.annotations
            assert a.open_world_hint is False and a.destructive_hint is False, t.name
            assert a.read_only_hint is (t.name not in WRITE_TOOLS), t.name
            assert t.output_schema is not None and t.output_schema["type"] == "object", t.name
            assert t.output_schema.get("required"), t.name
        by = {t.name: t.annotations for t in tools}
        for name in ("recall", "context", "check_drift", "show", "history"):
            assert by[name].idempotent_hint is True
        if not read_only:  # the same call again changes nothing only where that is true
            assert {n: by[n].idempotent_hint for n in WRITE_TOOLS} == {
                "remember": True, "supersede": False, "retract": True, "reanchor": False, "revert": False}


def test_structured_content_is_the_texts_json_and_memories_are_labelled_data(root: Path) -> None:
    from anchorfs.agents.mcp import DATA_LABEL

    async def flow(c: Client) -> None:
        wrote = await c.call_tool("remember", {"content": "token expiry is 24 hours",
                                               "anchors": ["auth/token.py#TokenIssuer.issue"]})
        mid = wrote.structured_content["memory"]["id"]
        calls = [("remember", {"content": "token expiry is 24 hours", "anchors": ["auth/token.py#TokenIssuer.issue"]}),
                 ("show", {"id": mid}), ("history", {"id": mid}), ("check_drift", {}), ("check_drift", {"id": mid}),
                 ("reanchor", {"id": mid})]
        for tool, args in calls:
            r = await c.call_tool(tool, args)
            assert not r.is_error and len(r.content) == 1, (tool, r.content)
            assert json.loads(r.content[0].text) == r.structured_content, tool
        # what hands the agent memories says first that they are data, not instructions
        r = await c.call_tool("recall", {"query": "token expiry"})
        text = r.content[0].text
        assert text.splitlines()[0] == DATA_LABEL
        [hit] = r.structured_content["hits"]
        assert hit["id"] in text and hit["envelope"] in text and "token expiry is 24 hours" in text
        r = await c.call_tool("context", {"task": "token expiry", "budget": 200})
        data = r.structured_content
        assert r.content[0].text == data["markdown"] and data["markdown"].startswith(DATA_LABEL + "\n\n## Memories for")
        assert data["fresh"] == [mid] and data["tokens"] <= data["budget"] == 200
        assert data["tokens"] == -(-len(data["markdown"]) // 4)

    session(root, flow)


def test_resources_stale_and_one_memory(root: Path) -> None:
    from anchorfs.agents.mcp import DATA_LABEL

    async def flow(c: Client) -> None:
        assert [str(r.uri) for r in (await c.list_resources()).resources] == ["anchorfs://stale"]
        [tpl] = (await c.list_resource_templates()).resource_templates
        assert tpl.uri_template == "anchorfs://memory/{id}" and tpl.mime_type == "application/json"
        a = (await ok(c, "remember", {"content": "issue signs for 24h", "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        b = (await ok(c, "remember", {"content": "readme greets", "anchors": ["README.md"]}))["memory"]

        async def read(uri: str) -> dict[str, Any]:
            [content] = (await c.read_resource(uri)).contents
            assert content.mime_type == "application/json"
            data: dict[str, Any] = json.loads(content.text)
            assert data["about"] == DATA_LABEL
            return data

        nothing = await read("anchorfs://stale")
        assert (nothing["checked"], nothing["stale"], nothing["memories"]) == (2, 0, [])
        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
        stale = await read("anchorfs://stale")  # checked at each read: never a cached answer
        assert (stale["checked"], stale["stale"], stale["listed"]) == (2, 1, 1)
        [row] = stale["memories"]
        assert row["id"] == a["id"] and row["drift"] == "stale"
        [anchor] = row["anchors"]
        assert {k: anchor[k] for k in ("anchor", "verdict", "detail")} == {
            "anchor": "auth/token.py#TokenIssuer.issue", "verdict": "changed",
            "detail": "auth/token.py#TokenIssuer.issue changed"}
        one = (await read(f"anchorfs://memory/{b['id'][:16]}"))["memory"]
        assert (one["id"], one["content"], one["drift"], one["status"]) == (b["id"], "readme greets", "fresh", "active")
        assert one["envelope"].startswith("[fresh")
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="no memory 'zzzzzzzz'") as gone:
            await c.read_resource("anchorfs://memory/zzzzzzzz")
        assert gone.value.code == -32002  # the specification's resource-not-found, not an internal error (-32603)

    session(root, flow)


def test_reverify_prompt_walks_the_stale_memories(root: Path) -> None:
    from anchorfs.agents.mcp import DATA_LABEL

    async def prompt_text(c: Client) -> str:
        [prompt] = (await c.list_prompts()).prompts
        assert prompt.name == "reverify_stale" and not prompt.arguments
        [msg] = (await c.get_prompt("reverify_stale")).messages
        assert msg.role == "user"
        return str(msg.content.text)

    async def flow(c: Client) -> None:
        assert "Nothing to re-verify" in await prompt_text(c)
        m = (await ok(c, "remember", {"content": "issue signs for 24h", "anchors": ["auth/token.py#TokenIssuer.issue"]}))["memory"]
        (root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
        text = await prompt_text(c)
        assert text.startswith("1 memory needs re-verifying.")
        for step in ("`reanchor`", "`supersede`", "`retract`"):
            assert step in text
        data = text[text.index(DATA_LABEL):]  # the memories come after the label, the steps before it
        assert f"- `{m['id']}` (stale): issue signs for 24h" in data
        assert "auth/token.py#TokenIssuer.issue: changed (auth/token.py#TokenIssuer.issue changed)" in data

    session(root, flow)

    async def read_only(c: Client) -> None:
        text = await prompt_text(c)
        assert "cannot change memories" in text and "`reanchor`" not in text

    session(root, read_only, read_only=True)


def test_remember_takes_allow_secret_in_a_shared_workspace(tmp_path: Path) -> None:
    """A shared workspace refuses a secret over MCP as on the CLI (nothing written); the agent
    may pass `allow_secret: true`, and the ledger keeps why. The output is the usual one."""
    from anchorfs.sdk import team

    root = tmp_path / "shared"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    anchorfs.init(root)
    team.set_mode(root, True)
    ledger = root / ".anchorfs" / "ledger.jsonl"

    async def flow(c: Client) -> None:
        schema = {t.name: t for t in (await c.list_tools()).tools}["remember"].input_schema
        assert schema["properties"]["allow_secret"]["type"] == "boolean"
        assert "allow_secret" not in schema.get("required", [])
        msg = await fails(c, "remember", {"content": "the deploy key is AKIAIOSFODNN7EXAMPLE"})
        assert "looks like a secret (AWS Access Key)" in msg and "nothing was written" in msg
        assert not ledger.exists() or ledger.read_bytes() == b""
        assert await fails(c, "remember", {"content": "x", "allow_secret": "yes"})
        out = await ok(c, "remember", {"content": "the deploy key is AKIAIOSFODNN7EXAMPLE (a documented fake)",
                                       "allow_secret": True})
        assert set(out) == set((await ok(c, "remember", {"content": "an ordinary note"})))
        assert out["memory"]["status"] == "active" and out["duplicate"] is False
        entries = [json.loads(line) for line in ledger.read_bytes().splitlines()]
        assert [e["memories"][0]["id"] for e in entries] == [out["memory"]["id"], entries[1]["memories"][0]["id"]]
        assert "AWS Access Key" in entries[0]["allow_secret"] and "allow_secret" not in entries[1]

    session(root, flow)


def test_recall_leaves_out_weak_hits_unless_nothing_clears_the_floor(root: Path) -> None:
    """Issue 39: the default k is no longer filled with hits that match nothing."""
    with anchorfs.open(root) as ws:
        wanted = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record_many([{"content": f"the {w} service retries three times"} for w in ("billing", "mail", "search")])

    async def flow(c: Client) -> None:
        hits = (await ok(c, "recall", {"query": "token expiry hours"}))["hits"]
        assert [h["id"] for h in hits] == [wanted.id] and not hits[0]["weak"]
        every = (await ok(c, "recall", {"query": "token expiry hours", "include_weak": True}))["hits"]
        assert len(every) == 4 and all(h["weak"] for h in every[1:])
        [closest] = (await ok(c, "recall", {"query": "giraffe zebra"}))["hits"]  # nothing clears the floor
        assert closest["weak"] is True

    session(root, flow)
