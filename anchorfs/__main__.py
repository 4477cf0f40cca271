"""The `anchorfs` command's entry point (also `python -m anchorfs`).

The agent and git hooks answer before click is imported. `query`, `context`, `list`, `record`
and `show` go to the workspace's warm server when one runs (`anchorfs serve`,
`anchorfs.cli.server.hand_off`), again before click or LanceDB is imported. Every other command
line, and a server that does not answer, go to the full CLI (`anchorfs.cli.commands`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .cli import usable_stdout

__all__ = ["main", "usable_stdout"]


def _exit_now(code: int) -> None:
    """End a hook's process without the interpreter's teardown, which frees every object the
    pass built one by one (about 5% of a first session's digest at 10,000 memories, more the
    larger the store): its output flushed first. Every state file a hook writes went through
    os-level calls, closed (and fsync'd) before its function returned, and no thread of its
    outlives the call; nothing else of the teardown is ours."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: what was not read is not wanted
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Answer a hook, hand off to a warm server, or run the full CLI; exits with its code."""
    args = sys.argv[1:] if argv is None else list(argv)
    usable_stdout()
    if "hook" in args:  # the agent hooks answer before click is imported (5x `python -c pass`)
        import gc

        from .agents.hook_agent import agent_args, agent_main  # not `.hook`: it imports the git half too

        hooked = agent_args(args)
        if hooked is not None:
            if argv is None:  # this process is the hook's: it builds its fold and manifest, then exits
                gc.disable()  # no collection pays for itself (about 9M instructions of a stale edit's hook)
            code = agent_main(hooked[0], hooked[1])
            if argv is None:
                _exit_now(code)
            sys.exit(code)
        from .agents.hook_git import commit_args, commit_main

        commit = commit_args(args)  # the installed post-commit line: `-m anchorfs hook run --root R`
        if commit is not None:
            if argv is None:
                gc.disable()
            code = commit_main(*commit)
            if argv is None:
                _exit_now(code)
            sys.exit(code)
    if argv is None:  # a warm server for this workspace answers in milliseconds (anchorfs.cli.server)
        from .cli.server import hand_off

        served = hand_off(args)
        if served is not None:
            sys.exit(served)
    from .cli.commands import main as cli_main

    try:
        cli_main(args)
    finally:
        if argv is None:  # the process ends here: spare its exit a collection over all it built
            import gc

            gc.freeze()


if __name__ == "__main__":
    main()
