"""Issue 39, item 7: what memory was handed to an agent, in a local record (never the ledger):
`list --unused` and `show` read it; nothing is served differently or retired for being unused."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TOKEN
from mcp import Client

import anchorfs
from anchorfs.agents.mcp import build_server
from anchorfs.cli.commands import main
from anchorfs.core.model import to_iso, utcnow
from anchorfs.sdk.usage import USAGE_FILE


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    anchorfs.init(root)
    return root


def _hook(event: str, payload: dict[str, object], root: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "hook", event], input=json.dumps(payload), cwd=root,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout


def test_every_surface_that_hands_memories_to_an_agent_counts_them(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with anchorfs.open(root) as ws:
        expiry = ws.record("tokens expire after 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        revoke = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
        lonely = ws.record("the release checklist lives in the wiki")
        ledger = (root / ".anchorfs" / "ledger.jsonl").read_bytes()
    since = utcnow()
    assert anchorfs.open(root).list(unused=since) == [lonely, revoke, expiry]  # newest first, none handed yet

    async def recall() -> None:
        async with Client(build_server(root)) as client:
            result = await client.call_tool("recall", {"query": "when do tokens expire"})
            assert not result.is_error

    asyncio.run(recall())
    with anchorfs.open(root) as ws:
        last = ws.last_handed()
        assert last[expiry.id][1] == "recall" and last[expiry.id][0] >= since and lonely.id not in last
        assert expiry.id not in {m.id for m in ws.list(unused=since)}
    token = root / "auth" / "token.py"
    _hook("pre-read", {"session_id": "s", "cwd": str(root), "hook_event_name": "PreToolUse", "tool_name": "Read",
                       "tool_input": {"file_path": str(token)}}, root)
    assert anchorfs.open(root).last_handed()[revoke.id][1] == "pre-read"
    assert _hook("session-start", {"session_id": "s", "cwd": str(root), "hook_event_name": "SessionStart",
                                   "source": "startup"}, root)
    assert anchorfs.open(root).last_handed()[lonely.id][1] == "session-start"  # the digest named all three
    assert anchorfs.open(root).list(unused=since) == []
    # the CLI: a span counts back from now (these are younger than it); a time; show says when and by whom
    def out(*args: str) -> str:
        with pytest.raises(SystemExit) as exc:
            main(["--root", str(root), *args])
        got = capsys.readouterr()
        assert exc.value.code in (0, None) and got.err == "", got.err
        return got.out

    assert json.loads(out("list", "--unused", "28d", "--json"))["memories"] == []
    listed = json.loads(out("list", "--unused", to_iso(utcnow()) or "", "--json"))["memories"]
    assert {m["id"] for m in listed} == {expiry.id, revoke.id, lonely.id}
    assert "\n  last handed to an agent 20" in out("show", lonely.id)
    assert json.loads(out("show", lonely.id, "--json"))["last_handed"]["by"] == "session-start"
    assert (root / ".anchorfs" / "ledger.jsonl").read_bytes() == ledger  # never in the ledger
    assert "\n  never handed to an agent" in out("show", anchorfs.open(root).record("new").id)
    assert USAGE_FILE in (root / ".anchorfs" / ".gitignore").read_text().splitlines()  # never committed


def test_a_damaged_usage_record_is_read_past_and_never_blocks_a_hand_out(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
    usage = root / ".anchorfs" / USAGE_FILE
    usage.write_bytes(b'{"at": "not a time", "by": "x", "ids": ["' + m.id.encode() + b'"]}\n[1, 2]\n\xff\xfe\n{"at"')
    with anchorfs.open(root) as ws:
        assert ws.last_handed() == {} and ws.list(unused=utcnow()) == [m]
        ws.handed([m.id, m.id], "recall")  # after a torn last line: the new line still reads
        assert ws.last_handed()[m.id][1] == "recall"
    usage.unlink()
    usage.mkdir()  # a folder where the record belongs: the hand-out goes on, unrecorded
    with anchorfs.open(root) as ws:
        ws.handed([m.id], "recall")
        assert ws.last_handed() == {}
