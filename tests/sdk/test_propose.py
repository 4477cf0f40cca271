"""Memories that ask first (issue 20): an agent's writes land `proposed`, served only once accepted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from mcp import Client

from conftest import TOKEN

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.core.errors import RevisionError
from anchorfs.agents.mcp import build_server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    anchorfs.init(root)
    return root


def ledger(root: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (root / ".anchorfs" / "ledger.jsonl").read_bytes().splitlines() if line]


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def proc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anchorfs", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def served(ws: anchorfs.Workspace, text: str) -> set[str]:
    """Ids any read hands out for `text`: recall (with past beliefs too) and context."""
    ids = {h.memory.id for h in ws.query(text)} | {h.memory.id for h in ws.query(text, include_superseded=True)}
    block = ws.context(text)
    return ids | set(block.fresh) | set(block.stale) | set(block.unknown)


def session(root: Path, fn: Callable[[Client], Awaitable[Any]], **kw: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(root, **kw)) as client:
            return await fn(client)

    return asyncio.run(main())


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_mcp_propose_then_cli_accept_and_reject(root: Path) -> None:
    async def agent(c: Client) -> tuple[dict[str, Any], ...]:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "asks first" in (tools["remember"].description or "") and "asks first" in (tools["supersede"].description or "")
        one = await ok(c, "remember", {"content": "token expiry is 24 hours", "kind": "constraint",
                                       "anchors": ["auth/token.py#TokenIssuer.issue"]})
        assert one["memory"]["status"] == "proposed" and one["memory"]["drift"] == "fresh"  # checked from the start
        assert f"anchorfs accept {one['memory']['id']}" in one["note"]
        again = await ok(c, "remember", {"content": "token expiry is 24 hours", "kind": "constraint",
                                         "anchors": ["auth/token.py#TokenIssuer.issue"]})
        assert again["duplicate"] is True and again["memory"]["id"] == one["memory"]["id"]  # no second proposal
        two = await ok(c, "remember", {"content": "token revoke does nothing yet",
                                       "anchors": ["auth/token.py#TokenIssuer.revoke"]})
        # kept out of recall and context until accepted
        assert (await ok(c, "recall", {"query": "token expiry revoke"}))["hits"] == []
        assert (await ok(c, "recall", {"query": "token expiry", "include_superseded": True}))["hits"] == []
        ctx = await ok(c, "context", {"task": "token expiry revoke"})
        assert ctx["fresh"] == ctx["stale"] == [] and "24 hours" not in ctx["markdown"]
        shown = (await ok(c, "show", {"id": one["memory"]["id"]}))["memory"]
        assert shown["status"] == "proposed"
        return one["memory"], two["memory"]

    one, two = session(root, agent, propose=True)
    (root / "auth" / "token.py").write_text(TOKEN.replace("return None", "return revoke(token)"))

    listed = {m["id"]: m for m in cli_json("list", "--status", "proposed", "--root", str(root))["memories"]}
    assert set(listed) == {one["id"], two["id"]}
    assert (listed[one["id"]]["drift"], listed[two["id"]]["drift"]) == ("fresh", "stale")  # drift checked now
    assert cli_json("list", "--root", str(root))["memories"] == []  # nothing active yet

    accepted = cli_json("accept", one["id"], "--root", str(root))
    assert accepted["status"] == "active"
    rejected = cli_json("reject", two["id"], "--reason", "revoke does something now", "--root", str(root))
    assert (rejected["status"], rejected["reason"]) == ("retracted", "revoke does something now")

    with anchorfs.open(root) as ws:
        assert served(ws, "token expiry") >= {one["id"]}
        assert two["id"] not in {h.memory.id for h in ws.query("token revoke does nothing")}
        # rejected is retracted: among past beliefs only, marked so, with the reason
        [past] = [h for h in ws.query("token revoke does nothing", include_superseded=True) if h.memory.id == two["id"]]
        assert (past.memory.status, past.memory.reason) == ("retracted", "revoke does something now")
        assert [e.op for e in ws.history(one["id"])] == ["record", "accept"]
    ops = [(e["op"], m["id"], m["status"]) for e in ledger(root) for m in e["memories"]]
    assert ops == [("record", one["id"], "proposed"), ("record", two["id"], "proposed"),
                   ("accept", one["id"], "active"), ("reject", two["id"], "retracted")]
    assert ledger(root)[-1]["reason"] == "revoke does something now"

    async def after(c: Client) -> None:
        hits = (await ok(c, "recall", {"query": "token expiry"}))["hits"]
        assert [h["id"] for h in hits] == [one["id"]]

    session(root, after, propose=True)


def test_a_proposed_supersede_leaves_the_old_memory_in_force_until_accepted(root: Path) -> None:
    with anchorfs.open(root) as ws:
        old = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])

    async def agent(c: Client) -> dict[str, Any]:
        out = await ok(c, "supersede", {"id": old.id, "content": "token expiry is 12 hours", "reason": "now 12h"})
        assert out["memory"]["status"] == "proposed" and out["memory"]["supersedes"] == old.id
        assert f"{old.id} stays in force" in out["note"]
        hits = (await ok(c, "recall", {"query": "token expiry"}))["hits"]
        assert [(h["id"], h["status"]) for h in hits] == [(old.id, "active")]
        return out["memory"]

    new = session(root, agent, propose=True)
    with anchorfs.open(root) as ws:
        assert ws.get(old.id).status == "active" and ws.get(old.id).superseded_by is None
        assert new["id"] not in served(ws, "token expiry")
        with pytest.raises(RevisionError, match="proposed, not yet accepted"):
            ws.supersede(new["id"], "token expiry is 6 hours")  # a proposal is accepted or rejected, not built on
        with pytest.raises(RevisionError, match="proposed"):
            ws.revert(new["id"])  # revert would slip past the review
        before = (root / ".anchorfs" / "ledger.jsonl").read_bytes()
        with pytest.raises(RevisionError, match="only a proposed memory"):
            ws.accept(old.id)
        assert (root / ".anchorfs" / "ledger.jsonl").read_bytes() == before  # nothing written on refusal

        done = ws.accept(new["id"], reason="checked issue()")
        retired = ws.get(old.id)
        assert (done.status, retired.status, retired.superseded_by) == ("active", "superseded", done.id)
        assert retired.valid_until == done.valid_from  # one instant: the belief changed at the accept
        assert [h.memory.id for h in ws.query("token expiry")] == [done.id]
        assert [(e.op, e.memory.id, e.memory.status) for e in ws.history(done.id)] == [
            ("record", old.id, "active"), ("supersede", done.id, "proposed"),
            ("accept", done.id, "active"), ("accept", old.id, "superseded")]
        as_of = ws.query("token expiry", as_of=ws.history(done.id)[1].at)  # while it was proposed
        assert [h.memory.id for h in as_of] == [old.id]


def test_accept_is_refused_when_the_old_memory_moved_on(root: Path) -> None:
    with anchorfs.open(root) as ws:
        old = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        a = ws.supersede(old.id, "token expiry is 12 hours", propose=True)
        b = ws.supersede(old.id, "token expiry is 6 hours", propose=True)
        ws.accept(b.id)
        before = (root / ".anchorfs" / "ledger.jsonl").read_bytes()
        with pytest.raises(RevisionError, match=f"supersede {old.id}, which is superseded now .*{b.id}"):
            ws.accept(a.id)
        assert (root / ".anchorfs" / "ledger.jsonl").read_bytes() == before
        assert ws.reject(a.id).status == "retracted"
        assert ws.get(b.id).status == "active"
        with pytest.raises(RevisionError, match="only a proposed memory can be rejected"):
            ws.reject(a.id)


def test_cli_refusals_are_one_line_and_read_only_excludes_propose(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("token expiry is 24 hours")
    p = proc("accept", m.id, "--root", str(root))
    assert p.returncode == 1 and p.stderr.splitlines() == [
        f"anchorfs: error: memory {m.id} is active; only a proposed memory can be accepted"]
    p = proc("reject", m.id, "--root", str(root))
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1 and "only a proposed memory" in p.stderr
    p = proc("mcp", "--propose", "--read-only", "--root", str(root))
    assert p.returncode == 2 and "--propose and --read-only exclude each other" in p.stderr


def test_config_key_makes_the_server_ask_first(root: Path) -> None:
    (root / ".anchorfs.toml").write_text("[mcp]\npropose = true\n")

    async def agent(c: Client) -> str:
        return str((await ok(c, "remember", {"content": "sessions live in redis"}))["memory"]["status"])

    assert session(root, agent) == "proposed"
    assert session(root, agent, propose=False) == "active"  # the flag wins over the key


def test_the_ledger_reader_keeps_proposed_and_refuses_an_unknown_status(root: Path) -> None:
    with anchorfs.open(root) as ws:
        p = ws.record("token expiry is 24 hours", propose=True)
    from anchorfs.core.model import SnapshotError, check_snapshot

    check_snapshot({"id": "x", "content": "c", "recorded_at": "2026-01-01T00:00:00Z", "status": "proposed"})
    with pytest.raises(SnapshotError, match="status must be one of proposed, active, superseded, retracted"):
        check_snapshot({"id": "x", "content": "c", "recorded_at": "2026-01-01T00:00:00Z", "status": "pending"})
    with anchorfs.open(root) as ws:  # a fresh fold and a rebuilt index: still proposed, still not served
        assert ws.get(p.id).status == "proposed"
        ws.reindex()
        assert served(ws, "token expiry") == set()
        assert [m.id for m in ws.list(status="proposed")] == [p.id]


def test_anchorfs_mcp_propose_over_stdio(root: Path) -> None:
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "anchorfs.cli.commands", "mcp", "--propose", "--root", str(root)],
        env={"HOME": os.environ["HOME"], "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]},
    )

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(params, read_timeout_seconds=60) as c:
            m = await ok(c, "remember", {"content": "issue signs for 24h", "anchors": ["auth/token.py#TokenIssuer.issue"]})
            return m["memory"], await ok(c, "recall", {"query": "issue signs"})

    m, hits = asyncio.run(main())
    assert m["status"] == "proposed" and hits["hits"] == []
    with anchorfs.open(root) as ws:
        assert [p.id for p in ws.list(status="proposed")] == [m["id"]]
