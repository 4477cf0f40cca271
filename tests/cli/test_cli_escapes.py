"""Memory text reaches a terminal escaped, never raw (issue 15, item 10): a cloned ledger or an
agent can hold `\\033]0;...\\007` (retitle), `\\033[2J` (clear) or a bidi override."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import anchorfs
from anchorfs.cli.commands import cli

EVIL = "token ttl \x1b]0;pwned\x07 is 24h \x1b[2J done \u202eevil\x9b"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    anchorfs.init(tmp_path)
    (tmp_path / "a.py").write_text("TTL = 24\n")
    return tmp_path


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_list_show_query_drift_ledger_escape_control_characters(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record(EVIL, anchors=["a.py"])
    (root / "a.py").write_text("TTL = 48\n")  # stale, so drift lists it
    outputs = [run(root, "list")[1], run(root, "show", m.id)[1], run(root, "query", "token ttl")[1],
               run(root, "drift")[1], run(root, "history", m.id)[1]]
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\x9b" not in out
    assert "\\x1b]0;pwned\\x07" in outputs[1]  # shown, as an escape: nothing is hidden either


def test_json_keeps_the_exact_text(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record(EVIL)
    code, out = run(root, "--json", "show", m.id)
    assert code == 0
    assert orjson.loads(out)["content"] == EVIL
