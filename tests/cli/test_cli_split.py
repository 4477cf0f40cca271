"""`anchorfs.cli` and `anchorfs.verify` are packages of modules by concept: every command is on the one
`cli` group, and every public name of `verify` is importable from the package."""

from __future__ import annotations

import subprocess
import sys

import pytest

import anchorfs.cli.commands as cli_module
import anchorfs.verify as verify_module
from anchorfs.cli import agents as cli_agents, git as cli_git
from anchorfs.verify import claims as verify_claims, text as verify_text

COMMANDS = {
    "accept", "at", "bisect", "conflicts", "context", "demo", "doctor", "drift", "export", "history", "hook", "import",
    "init", "ledger", "list", "log", "lsp", "mcp", "merge-ledger", "query", "reanchor", "record", "reindex", "reject",
    "redact", "retract", "revert", "serve", "share", "show", "supersede", "tidy", "verify", "watch",
}


def test_every_command_is_on_the_one_group_and_importable_from_cli() -> None:
    assert set(cli_module.cli.commands) == COMMANDS
    assert set(cli_module.hook.commands) == {"install", "uninstall", "run", "session-start", "pre-read", "post-edit"}
    for module in (cli_agents, cli_git):
        for name in module.__all__:
            assert getattr(cli_module, name) is getattr(module, name), name
    assert cli_agents.cli is cli_git.cli is cli_module.cli


def test_every_public_verify_name_stays_in_verify() -> None:
    for name in verify_module.__all__:
        assert getattr(verify_module, name) is not None, name
    for module in (verify_claims, verify_text):
        for name in module.__all__:
            if name != "suggest":  # `verify_claims.suggest`, the one-memory form the package does not re-export
                assert name in verify_module.__all__ and getattr(verify_module, name) is getattr(module, name), name


def test_python_m_anchorfs_cli_runs_every_command() -> None:
    """`-m anchorfs.cli.commands` runs the module as `__main__`, a copy: it must still reach the moved commands."""
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "--help"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    from anchorfs.cli.base import SECTIONS

    titles = {f"{title}:" for title, _ in SECTIONS}
    body = proc.stdout.split("Start:")[1].split("\n\n  Start: ")[0]  # the sections, before the epilog
    listed = {line.split()[0] for line in body.splitlines() if line.strip() and line.strip() not in titles}
    assert listed == COMMANDS - {"merge-ledger"}  # hidden: git runs it


@pytest.mark.parametrize("set_by_user", [None, "4"])
def test_the_command_runs_numpy_on_one_blas_thread_unless_told(monkeypatch: pytest.MonkeyPatch,
                                                               set_by_user: str | None) -> None:
    """OpenBLAS's idle threads spin on the cores a server's full-text search needs: one thread, unless set."""
    import os

    from anchorfs.__main__ import main

    if set_by_user is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", set_by_user)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == (set_by_user or "1")
