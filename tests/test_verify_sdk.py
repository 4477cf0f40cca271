"""`verify` through the SDK and the CLI: marking in the ledger, --suggest --apply, exit 90."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import anchorfs
from anchorfs.cli import cli
from anchorfs.model import Drift, Verdict


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
        assert {e.memories[0].id for e in marks} == {ok.id, gone.id}
        stale_mark = next(e for e in marks if e.memories[0].id == gone.id)
        assert stale_mark.reason is not None and stale_mark.reason.startswith("verify: stale")
        assert "docs/runbook.md" in stale_mark.reason
        # a mark changes no memory
        assert ws.get(gone.id) == gone


def test_suggest_and_apply_anchor_named_file_and_symbol(tmp_path: Path) -> None:
    root = make(tmp_path)
    with anchorfs.open(root) as ws:
        m = ws.record("`TokenIssuer.issue` in src/auth/provider.py signs tokens")
        proposals = ws.suggest()
        assert set(proposals[m.id]) >= {"src/auth/provider.py"}
        assert any(spec.endswith("#TokenIssuer.issue") for spec in proposals[m.id])
        assert ws.get(m.id).anchors == ()
        ws.suggest(apply=True)
        anchored = ws.get(m.id)
        assert {a.spec for a in anchored.anchors} == set(proposals[m.id])
        assert ws.ledger_entries(limit=1)[0].op == "reanchor"
        assert all(c.verdict is Verdict.FRESH for c in ws.check(anchored).checks)
        assert ws.suggest() == {}  # nothing left unanchored


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
