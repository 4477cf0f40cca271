"""The files `anchorfs init --for HOST` rewrites go through `statefs.replace_state`: the mode a
person gave them is kept on the new file from the first moment, and no temp file stays behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from anchorfs.agents.hosts import MCP_FILES, RULES_FILES, setup


def test_rewritten_rules_and_config_files_keep_their_mode_and_leave_no_temp(tmp_path: Path) -> None:
    rules = tmp_path / RULES_FILES["claude"]
    config = tmp_path / MCP_FILES["claude"]
    rules.write_text("# my notes\n", encoding="utf-8")
    config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    os.chmod(rules, 0o640)
    os.chmod(config, 0o600)
    old = os.umask(0o022)
    try:
        written = setup(tmp_path, ["claude"])
    finally:
        os.umask(old)
    assert {w.path.name for w in written if w.changed} >= {"CLAUDE.md", ".mcp.json"}
    assert stat.S_IMODE(os.stat(rules).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    assert rules.read_text(encoding="utf-8").startswith("# my notes\n")
    assert not [p for p in tmp_path.rglob("*.tmp")]
