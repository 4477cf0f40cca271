"""The hooks: git's post-commit (and sync) hooks and the agent hosts' hooks, one import away.

The code lives in three modules: `anchorfs.hook_git` (installing git's post-commit and sync
hooks, and `commit_main`, what the installed post-commit line runs), `anchorfs.hook_agent`
(Claude Code's `SessionStart` and `PostToolUse`: `agent_main`, the digest and its memo,
`post_edit`) and `anchorfs.hook_recheck` (what both re-check after a commit or an edit: the
memories on the touched paths, from the fold snapshot's records for those paths alone, a drift
change written to `drift.json` and `events.jsonl` without opening the workspace). This module
re-exports what callers import (`anchorfs.__main__`, the CLI, the tests), so
`from anchorfs.hook import install` keeps working.
"""

from __future__ import annotations

from .hook_agent import (  # noqa: F401 (re-exported)
    _CONTENT_CHARS,
    _LABEL,
    _STDIN_LIMIT,
    AGENT_EVENTS,
    DIGEST_KEY,
    DIGEST_MEMO,
    _digest,
    _digest_memo_path,
    _edited_path,
    _envelopes_until,
    _find_root,
    _post_edit_fast,
    _read_stdin,
    _replay_digest,
    _save_digest,
    _session_output,
    _session_start_memoized,
    agent_args,
    agent_main,
    digest,
    post_edit,
    session_start,
)
from .hook_git import (  # noqa: F401 (re-exported)
    _CREATED,
    _NOTE,
    BEGIN,
    END,
    SYNC_HOOKS,
    _block,
    _for_root,
    _is_shell,
    _printable,
    _read,
    _remove,
    _split,
    _write,
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
from .hook_recheck import known_drift as _known_drift  # noqa: F401 (re-exported)
from .hook_recheck import mentioned as _mentioned  # noqa: F401 (re-exported)
from .hook_recheck import recheck_paths  # noqa: F401 (re-exported)

__all__ = [
    "BEGIN", "END", "hook_path", "hook_command", "install", "uninstall", "is_installed", "committed_paths", "run",
    "commit_args", "commit_main",
    "AGENT_EVENTS", "agent_args", "agent_main", "session_start", "post_edit", "digest",
    "SYNC_HOOKS", "sync_command", "install_sync", "uninstall_sync", "recheck_paths",
]
