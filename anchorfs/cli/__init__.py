"""cli: the `anchorfs` command (click commands that parse, call one SDK method, format) and the
warm server. Free of heavy imports: `anchorfs.__main__` uses it before click is imported.
"""

from __future__ import annotations

import os
import sys

__all__ = ["usable_stdout"]


def _json_escape(err: UnicodeError) -> tuple[str, int]:
    """A character the stream cannot encode, as a JSON `\\uXXXX` escape (surrogate pairs above the BMP)."""
    assert isinstance(err, UnicodeEncodeError)
    out = []
    for ch in err.object[err.start:err.end]:
        n = ord(ch)
        if n > 0xFFFF:
            n -= 0x10000
            out.append(f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out), err.end


def usable_stdout() -> None:
    """Output never ends in a traceback: a closed stdout discards it, and a character the stream
    cannot encode is written as a JSON `\\u` escape."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    elif hasattr(sys.stdout, "reconfigure"):
        import codecs

        codecs.register_error("anchorfs.json-escape", _json_escape)
        sys.stdout.reconfigure(errors="anchorfs.json-escape")
