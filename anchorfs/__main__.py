"""The `anchorfs` command's entry point (also `python -m anchorfs`).

The agent and git hooks answer before click is imported; some commands go to the workspace's
warm server when one runs (`anchorfs.cli.server.hand_off`); the rest go to the full CLI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .cli import usable_stdout

__all__ = ["main", "usable_stdout"]


def _exit_now(code: int) -> None:
    """End a hook's process without the interpreter's teardown, its output flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: what was not read is not wanted
            pass
    os._exit(code)


def _hook(own: bool, run: Callable[..., int], *args: object) -> NoReturn:
    """Run a hook and exit with its code; in a process of its own (`own`), without collection or teardown."""
    if own:
        import gc

        gc.disable()
    code = run(*args)
    if own:
        _exit_now(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Answer a hook, hand off to a warm server, or run the full CLI; exits with its code."""
    args = sys.argv[1:] if argv is None else list(argv)
    usable_stdout()
    # one BLAS thread: a query's products are small, and idle OpenBLAS threads spin on the cores others need
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "hook" in args:  # the agent hooks answer before click is imported
        from .agents.hook_agent import agent_args, agent_main

        hooked = agent_args(args)
        if hooked is not None:
            _hook(argv is None, agent_main, hooked[0], hooked[1])
        from .agents.hook_git import commit_args, commit_main

        commit = commit_args(args)  # the installed post-commit line: `-m anchorfs hook run --root R`
        if commit is not None:
            _hook(argv is None, commit_main, *commit)
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
