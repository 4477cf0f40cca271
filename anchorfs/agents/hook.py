"""The hooks: git's post-commit (and sync) hooks and the agent hosts' hooks, one import away.

The code lives in `anchorfs.agents.hook_git` (git's post-commit and sync hooks, `commit_main`) and
`anchorfs.agents.hook_agent` (Claude Code's `SessionStart` and `PostToolUse`, `agent_main`).
"""

from __future__ import annotations

from .hook_agent import AGENT_EVENTS, DIGEST_KEY, agent_args, agent_main, digest, post_edit, session_start
from .hook_git import (
    BEGIN,
    END,
    SYNC_HOOKS,
    commit_args,
    commit_main,
    committed_paths,
    hook_command,
    hook_path,
    install,
    install_sync,
    is_installed,
    run,
    sync_command,
    uninstall,
    uninstall_sync,
)

__all__ = [
    "BEGIN", "END", "hook_path", "hook_command", "install", "uninstall", "is_installed", "committed_paths", "run",
    "commit_args", "commit_main",
    "AGENT_EVENTS", "DIGEST_KEY", "agent_args", "agent_main", "session_start", "post_edit", "digest",
    "SYNC_HOOKS", "sync_command", "install_sync", "uninstall_sync",
]
