"""A short soak in CI: `scripts/soak.py` with two writers and two readers for a few seconds,
its own checks (every acknowledged write in the ledger and the store, the ledger parsing to
the last byte, no failed read) must pass, and it must actually have done work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_a_short_soak_loses_nothing_and_fails_no_read(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    env["TMPDIR"] = str(tmp_path)  # the worker logs land here too
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(SOAK), "--writers", "2", "--readers", "2", "--seconds", "6",
                           "--root", str(tmp_path / "ws"), "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = orjson.loads(out.read_bytes())
    assert figures["ok"] is True and figures["failures"] == []
    assert figures["errors"] == 0
    # a write whose index update failed would warn; compaction losing a race must not
    assert not [w for w in figures["warning_examples"] if "search index lags" in w]
    ops = figures["ops"]
    assert ops["record"]["n"] > 0 and ops["query"]["n"] > 0
    assert figures["acknowledged_writes"] > 0 and figures["reads"] > 0
    # 20 seed memories (one line each), then one line and one new memory per acknowledged write
    assert figures["ledger_lines"] == 20 + figures["acknowledged_writes"]
    assert figures["memories"] == figures["store_rows"] == 20 + figures["acknowledged_writes"]
