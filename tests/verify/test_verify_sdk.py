"""`verify` through the SDK and the CLI: marking in the ledger, --suggest --apply, exit 90."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import shown

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.core.model import Drift, Verdict


def make(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "auth").mkdir(parents=True)
    (root / "src" / "auth" / "provider.py").write_text(
        "class TokenIssuer:\n    def issue(self, user):\n        return user\n"
    )
    (root / "docs").mkdir()
    anchorfs.init(root)
    return root


def test_verify_marks_stale_claims_in_the_ledger(tmp_path: Path) -> None:
    root = make(tmp_path)
    with anchorfs.open(root) as ws:
        ok = ws.record("auth lives in src/auth/provider.py")
        gone = ws.record("the runbook is docs/runbook.md.")
        ws.record("no claims here at all")
        report = ws.verify()
        by_id = {r.id: r for r in report.results}
        assert by_id[ok.id].verdict is Drift.FRESH
        assert by_id[gone.id].verdict is Drift.STALE
        assert report.no_claims == 1
        assert [e.op for e in ws.ledger_entries()].count("mark") == 0  # report-only by default
        ws.verify(mark=True)
        marks = [e for e in ws.ledger_entries() if e.op == "mark"]
        # only a memory whose findings changed gets an entry: the fresh one had none to clear
        assert [e.memories[0].id for e in marks] == [gone.id]
        assert marks[0].reason is not None and marks[0].reason.startswith("verify: stale")
        assert "docs/runbook.md" in marks[0].reason
        # the finding is on the memory itself (its snapshot), the rest of it unchanged
        marked = ws.get(gone.id)
        assert [(c.kind, c.value) for c in marked.stale_claims] == [("path", "docs/runbook.md")]
        assert marked.replace(stale_claims=()) == gone
        assert ws.get(ok.id) == ok
        size = ws.ledger.size()
        ws.verify(mark=True)  # the same findings again: nothing to write
        assert ws.ledger.size() == size


def test_suggest_and_apply_anchor_named_file_and_symbol(tmp_path: Path) -> None:
    root = make(tmp_path)
    with anchorfs.open(root) as ws:
        m = ws.record("`TokenIssuer.issue` in src/auth/provider.py signs tokens")
        proposals = ws.suggest().proposals
        assert set(proposals[m.id]) >= {"src/auth/provider.py"}
        assert any(spec.endswith("#TokenIssuer.issue") for spec in proposals[m.id])
        assert ws.get(m.id).anchors == ()
        ws.suggest(apply=True)
        anchored = ws.get(m.id)
        assert {a.spec for a in anchored.anchors} == set(proposals[m.id])
        assert ws.ledger_entries(limit=1)[0].op == "reanchor"
        assert all(c.verdict is Verdict.FRESH for c in ws.check(anchored).checks)
        assert ws.suggest().suggestions == ()  # nothing left unanchored


def test_cli_verify_exit_codes_and_json(tmp_path: Path) -> None:
    root = make(tmp_path)
    runner = CliRunner()
    with anchorfs.open(root) as ws:
        ws.record("auth lives in src/auth/provider.py")
    r = runner.invoke(cli, ["--root", str(root), "verify", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert {"checked", "stale", "unknown", "fresh", "results"} <= set(data)
    assert data["results"][0]["claims"][0] == {
        "kind": "path", "value": "src/auth/provider.py", "verdict": "fresh",
        "detail": data["results"][0]["claims"][0]["detail"],
    }
    (root / "src" / "auth" / "provider.py").unlink()
    r = runner.invoke(cli, ["--root", str(root), "verify"])
    assert r.exit_code == 90
    assert "1 stale" in r.output
    r = runner.invoke(cli, ["--root", str(root), "verify", "--apply"])
    assert r.exit_code == 2


# -- issue 17: verify's findings reach the read path -------------------------------------------

SESSION = "Session keys are built in src/old.py by `make_key`"


def make_keys(tmp_path: Path) -> tuple[Path, str]:
    """A workspace where a memory names src/old.py (to be deleted) and `make_key`, defined once
    elsewhere: what `--suggest --apply` used to anchor to the other symbol."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "keys.py").write_text("def make_key(user):\n    return user\n")
    (root / "src" / "old.py").write_text("OLD = 1\n")
    (root / "src" / "token.py").write_text("TTL = 24\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        mid = ws.record(SESSION).id
        ws.record("We deploy on fridays only after review")
    (root / "src" / "old.py").unlink()
    return root, mid


def test_issue_example_marked_memory_is_served_stale_and_never_anchored(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        before = next(h for h in ws.query("session keys make_key") if h.memory.id == mid)
        assert before.drift is Drift.FRESH  # nothing marked yet: prose is only checked by verify
        report = ws.verify(mark=True)
        assert report.has_stale
        hit = next(h for h in ws.query("session keys make_key") if h.memory.id == mid)
        assert hit.drift is Drift.STALE
        assert hit.envelope.startswith("[STALE · claim `src/old.py`: src/old.py does not exist")
        assert "found by verify" in hit.envelope and hit.envelope.endswith("re-verify before relying on this]")
        stale_factor = float(ws.config["drift.stale_factor"])
        assert hit.score == pytest.approx(hit.relevance * stale_factor)  # demoted like an anchor-stale hit
        assert hit.relevance == pytest.approx(before.relevance, abs=1e-6)
        assert [c["value"] for c in hit.to_dict()["stale_claims"]] == ["src/old.py"]
        # every read path: check, list --drift, the last known drift, context
        assert ws.check(ws.get(mid)).drift is Drift.STALE
        assert [m.id for m in ws.list(drift="stale")] == [mid]
        md, env = ws.check_id(mid)
        assert md.drift is Drift.STALE and "claim `src/old.py`" in env
        block = ws.context("session keys make_key")
        assert mid in block.stale
        assert "claim `src/old.py`" in block.markdown.split("### Stale", 1)[1]
        # --suggest --apply proposes, never anchors, and says why
        found = ws.suggest(apply=True)
        (s,) = found.suggestions
        assert s.id == mid and s.anchors == ("src/keys.py#make_key",) and not s.applied
        assert s.why is not None and s.why.startswith("claims `src/old.py`, which is gone")
        assert "not anchored" in s.why
        assert found.proposals == {}
        assert ws.get(mid).anchors == ()
        assert [e.op for e in ws.ledger_entries()].count("reanchor") == 0
        again = next(h for h in ws.query("session keys make_key") if h.memory.id == mid)
        assert again.drift is Drift.STALE and again.score < again.relevance


def test_suggest_holds_a_memory_whose_claim_is_gone_even_unmarked(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        found = ws.suggest(apply=True)  # no verify --mark ran: the claim is checked now
        assert [s.id for s in found.held] == [mid]
        assert ws.get(mid).anchors == ()
        assert found.to_dict()["suggestions"][0]["applied"] is False


def test_mark_survives_a_restart_and_a_reindex_and_as_of_sees_the_past(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        ws.query("session keys")  # the store is open in this process before the mark
        ws.verify(mark=True)
        marked_at = ws.ledger_entries(limit=1)[0].at
        assert next(h for h in ws.query("session keys") if h.memory.id == mid).drift is Drift.STALE
    with anchorfs.open(root) as ws:  # another process: the store catches up from the ledger
        assert next(h for h in ws.query("session keys") if h.memory.id == mid).drift is Drift.STALE
        ws.reindex()
        assert next(h for h in ws.query("session keys") if h.memory.id == mid).drift is Drift.STALE
        then = ws.query("session keys", as_of=(marked_at - timedelta(microseconds=1)).isoformat())
        assert next(h for h in then if h.memory.id == mid).drift is Drift.FRESH  # not yet marked then


def test_mark_is_cleared_when_the_claim_holds_again_and_kept_while_unknown(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        ws.verify(mark=True)
        first = ws.get(mid).stale_claims
        assert len(first) == 1
        # the whole folder gone: the claim can no longer be judged, the evidence of then stands
        (root / "src" / "keys.py").unlink()
        (root / "src" / "token.py").unlink()
        (root / "src").rmdir()
        ws.verify(mark=True)
        assert ws.get(mid).stale_claims == first
        (root / "src").mkdir()
        (root / "src" / "old.py").write_text("OLD = 2\n")
        ws.verify(mark=True)
        assert ws.get(mid).stale_claims == ()
        last = ws.ledger_entries(limit=1)[0]
        assert last.op == "mark" and last.reason == "verify: fresh (claims hold again: src/old.py)"
        hit = next(h for h in ws.query("session keys") if h.memory.id == mid)
        assert hit.drift is Drift.FRESH and hit.envelope.startswith("[unanchored")
        assert ws.list(drift="stale") == []


def test_anchor_fresh_memory_with_a_stale_claim_is_flagged_and_reanchor_clears_it(tmp_path: Path) -> None:
    root, session = make_keys(tmp_path)
    (root / "src" / "legacy_ttl.py").write_text("TTL = 12\n")
    with anchorfs.open(root) as ws:
        m = ws.record("TTL is 24 hours; the old value lived in src/legacy_ttl.py", anchors=["src/token.py"])
        (root / "src" / "legacy_ttl.py").unlink()
        ws.verify(mark=True)
        hit = next(h for h in ws.query("TTL hours legacy") if h.memory.id == m.id)
        assert [c.verdict for c in hit.checks] == [Verdict.FRESH]  # the anchor holds...
        assert hit.drift is Drift.STALE  # ...but its text claims something gone
        assert "claim `src/legacy_ttl.py`" in hit.envelope
        assert {x.id for x in ws.list(drift="stale")} == {m.id, session}
        ws.reanchor(m.id)  # a person re-verified it: a new snapshot, the mark cleared
        assert ws.get(m.id).stale_claims == ()
        assert next(h for h in ws.query("TTL hours legacy") if h.memory.id == m.id).drift is Drift.FRESH


def test_supersede_leaves_the_mark_behind(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        ws.verify(mark=True)
        new = ws.supersede(mid, "Session keys are built in src/keys.py by `make_key`")
        assert new.stale_claims == ()
        hit = next(h for h in ws.query("session keys make_key") if h.memory.id == new.id)
        assert hit.drift is Drift.FRESH
        assert ws.get(mid).stale_claims  # the superseded snapshot keeps what was found, as history


def test_cli_shapes_of_a_marked_memory(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    runner = CliRunner()
    base = ["--root", str(root)]
    r = runner.invoke(cli, [*base, "verify", "--suggest", "--apply"])
    assert r.exit_code == 0, r.output
    assert f"{shown(root, mid)}: src/keys.py#make_key — claims `src/old.py`, which is gone" in r.output
    assert "anchored 0 memories; 1 not anchored" in r.output
    r = runner.invoke(cli, [*base, "verify", "--suggest", "--apply", "--json"])
    data = json.loads(r.output)
    assert data["applied"] is True and data["held"] == 1
    assert data["suggestions"][0]["id"] == mid and data["suggestions"][0]["applied"] is False
    assert "src/old.py" in data["suggestions"][0]["why"]
    assert runner.invoke(cli, [*base, "verify", "--mark"]).exit_code == 90
    r = runner.invoke(cli, [*base, "query", "session keys make_key", "--json"])
    hit = next(h for h in json.loads(r.output)["hits"] if h["id"] == mid)
    assert hit["drift"] == "stale" and hit["score"] < hit["relevance"]
    assert hit["stale_claims"][0]["value"] == "src/old.py" and hit["stale_claims"][0]["kind"] == "path"
    assert "claim `src/old.py`" in hit["envelope"]
    r = runner.invoke(cli, [*base, "query", "session keys make_key"])
    with anchorfs.open(root) as ws:
        assert f"{ws.short_ids([mid])[mid]}  [STALE · claim `src/old.py`" in r.output  # the id a person types
    r = runner.invoke(cli, [*base, "list", "--json"])
    listed = {m["id"]: m for m in json.loads(r.output)["memories"]}
    assert listed[mid]["drift"] == "stale" and listed[mid]["stale_claims"][0]["value"] == "src/old.py"
    r = runner.invoke(cli, [*base, "list", "--drift", "stale", "--json"])
    assert [m["id"] for m in json.loads(r.output)["memories"]] == [mid]


def test_mcp_recall_and_context_flag_a_marked_memory(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from anchorfs.agents.mcp import build_server

    root, mid = make_keys(tmp_path)
    with anchorfs.open(root) as ws:
        ws.verify(mark=True)

    async def flow() -> tuple[object, object, object]:
        async with Client(build_server(root)) as c:
            recall = await c.call_tool("recall", {"query": "session keys make_key"})
            context = await c.call_tool("context", {"task": "session keys make_key"})
            check = await c.call_tool("check_drift", {"id": mid})
            return recall, context, check

    recall, context, check = asyncio.run(flow())
    hits = recall.structured_content["hits"]  # type: ignore[attr-defined]
    hit = next(h for h in hits if h["id"] == mid)
    assert hit["drift"] == "stale" and "claim `src/old.py`" in hit["envelope"]
    assert hit["stale_claims"][0]["value"] == "src/old.py"
    text = " ".join(getattr(c, "text", "") for c in recall.content)  # type: ignore[attr-defined]
    assert f"{mid}  [STALE · claim `src/old.py`" in text
    ctx = context.structured_content  # type: ignore[attr-defined]
    assert mid in ctx["stale"] and "claim `src/old.py`" in ctx["markdown"]
    one = check.structured_content  # type: ignore[attr-defined]
    assert one["stale"] == 1 and "claim `src/old.py`" in one["memories"][0]["envelope"]
    assert one["memories"][0]["drift"] == "stale"  # not "unanchored": its text was found stale


def test_show_of_a_marked_unanchored_memory_says_stale(tmp_path: Path) -> None:
    root, mid = make_keys(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--root", str(root), "verify", "--mark"]).exit_code == 90
    r = runner.invoke(cli, ["--root", str(root), "show", mid, "--json"])
    data = json.loads(r.output)
    assert data["drift"] == "stale" and data["stale_claims"][0]["value"] == "src/old.py"
    r = runner.invoke(cli, ["--root", str(root), "show", mid])
    assert "drift: stale" in r.output and "claim `src/old.py`: src/old.py does not exist" in r.output


def test_a_mark_then_a_supersede_is_no_fork_for_a_later_reader(tmp_path: Path) -> None:
    """A mark entry without `seq`/`deps` folded first in a full fold and last in the writer's
    incremental one: the supersede that followed named only the mark, and every later reader
    saw the memory forked between its record and its successor."""
    root = make(tmp_path)
    with anchorfs.open(root) as ws:
        m = ws.record("the runbook is docs/runbook.md.")
        ws.verify(mark=True)
        new = ws.supersede(m.id, "the runbook is docs/ops.md.")
    with anchorfs.open(root) as ws:
        assert ws.conflicts() == []
        (hit,) = ws.query("runbook")
        assert hit.memory.id == new.id and hit.conflict == ()
        assert ws.ledger_entries(limit=2)[1].seq is not None  # the mark is stamped like every write


def test_mark_on_a_read_only_workspace_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    from anchorfs.core.errors import WorkspaceError
    from anchorfs.sdk.workspace import Workspace

    root, _ = make_keys(tmp_path)
    size = (root / ".anchorfs" / "ledger.jsonl").stat().st_size
    ws = Workspace(root, read_only=True)
    assert ws.verify().has_stale  # a report is a read
    with pytest.raises(WorkspaceError, match="read-only; verify --mark was not written"):
        ws.verify(mark=True)
    assert (root / ".anchorfs" / "ledger.jsonl").stat().st_size == size


def test_a_drift_pass_counts_a_marked_memory_stale_with_its_claim(tmp_path: Path) -> None:
    """`anchorfs drift`, MCP check_drift and the hooks read `Workspace.drift()`: a memory whose
    text `verify --mark` found stale is stale there too (anchored or not), the claim named,
    while drift.json keeps what the anchors alone say."""
    root, session = make_keys(tmp_path)
    (root / "src" / "legacy_ttl.py").write_text("TTL = 12\n")
    with anchorfs.open(root) as ws:
        anchored = ws.record("TTL is 24 hours; the old value lived in src/legacy_ttl.py", anchors=["src/token.py"])
        (root / "src" / "legacy_ttl.py").unlink()
        ws.verify(mark=True)
        report = ws.drift()
        by_id = {md.memory.id: md for md in report.memories}
        assert set(by_id) == {anchored.id, session}  # the unanchored marked one is in the pass
        assert by_id[anchored.id].drift is Drift.STALE and [c.verdict for c in by_id[anchored.id].checks] == [Verdict.FRESH]
        assert by_id[session].drift is Drift.STALE and by_id[session].checks == ()
        assert report.count(Drift.STALE) == 2 and report.count(Drift.FRESH) == 0
        listed = {m["id"]: m for m in report.to_dict()["memories"]}
        assert listed[session]["stale_claims"][0]["value"] == "src/old.py"
        assert listed[anchored.id]["stale_claims"][0]["value"] == "src/legacy_ttl.py"
        assert ws.last_drift().get(anchored.id, "fresh") == "fresh"  # the anchors' own drift
    r = CliRunner().invoke(cli, ["--root", str(root), "--json", "drift"])
    assert r.exit_code == 90, r.output
    out = json.loads(r.output)
    assert (out["stale"], out["fresh"]) == (2, 0)
    r = CliRunner().invoke(cli, ["--root", str(root), "drift"])
    assert r.exit_code == 90, r.output
    with anchorfs.open(root) as ws:
        shown = ws.short_ids([session])[session]  # the id as a person reads it
    line = next(x for x in r.output.splitlines() if x.startswith(shown + " "))
    assert "claim `src/old.py`: src/old.py does not exist" in line  # the why column names the claim
