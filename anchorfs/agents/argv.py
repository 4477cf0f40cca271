"""Reading a command line before click is imported.

The fast paths (`anchorfs drift` replayed from its memo, the agent hooks, the hand-off to a warm
server) each decide from `sys.argv` alone whether they may answer, and they must read an option
exactly as click would: kept here, with no imports, so each of them reads it one way.
"""

from __future__ import annotations

__all__ = ["option_value"]

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from collections.abc import Sequence


def option_value(argv: Sequence[str], i: int, name: str = "--root") -> tuple[str, int] | None:
    """`argv[i]` read as `NAME VALUE` or `NAME=VALUE`: (VALUE, the index of the last word it
    took); None when `argv[i]` is not that option. A NAME with no word after it gives an empty
    VALUE, which every caller refuses as click does."""
    arg = argv[i]
    if arg == name:
        return (argv[i + 1], i + 1) if i + 1 < len(argv) else ("", i)
    if arg.startswith(name + "="):
        return arg[len(name) + 1:], i
    return None
