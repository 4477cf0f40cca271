"""The code under a memory's anchors, as extra vocabulary for the search index.

A memory rests on code, and that code's identifiers, comments and docstrings are words the
memory's prose often lacks ("the refresh token is rotated on use" vs `rotate_refresh`,
`token_sha256`, "reuse detected"). Adding them to what the index reads (document expansion)
lets a query worded like the code find the memory worded like a person.

The index is derived data, so this reads the files as they are now (at record, supersede,
reanchor, reindex, and when the store catches up with the ledger): an anchor whose file
vanished, whose symbol is gone or whose path is no longer safe just contributes nothing.
Everything is bounded: files over `MAX_READ_BYTES` are skipped and the text per anchor and per
memory is capped, so one huge symbol cannot bloat the index.
"""

from __future__ import annotations

import re

from ..core.errors import AnchorfsError
from ..core.model import AnchorRef, Memory

__all__ = [
    "anchored_text",
    "code_vocabulary",
    "defined_names",
    "name_keys",
    "MAX_READ_BYTES",
    "MAX_ANCHOR_CHARS",
    "MAX_MEMORY_CHARS",
]

from .anchors import _NARROWED, MAX_ANCHOR_CHARS, narrowed_text, remember, resolve_path

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_MEMORY_CHARS = 8000
MAX_NAMES = 64


def _read(root_real: str, path: str) -> tuple[str, bytes] | None:
    """(repo-relative path, bytes) of a safe, regular, small enough text file, else None."""
    from ..core.guard import read_guarded

    try:
        rel, real = resolve_path(root_real, path)
        # The guarded open: a link, FIFO or other file swapped in since `resolve_path` is refused
        # (a `GuardError`, an AnchorfsError), a file over the bound or grown past it too.
        data = read_guarded(real, root=root_real, max_bytes=MAX_READ_BYTES)
    except (AnchorfsError, OSError, ValueError):
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return rel, data


def _one(root_real: str, anchor: AnchorRef) -> str:
    from ..core.guard import sha256_bytes

    if not (anchor.symbol or anchor.lines):
        # A whole file is too broad to describe one memory: its first lines (measured) added
        # nothing, so a whole-file anchor contributes only its path, as before.
        return ""
    found = _read(root_real, anchor.path)
    if found is None:
        return ""
    key = (anchor.path, anchor.symbol, anchor.lines, sha256_bytes(found[1]))  # the file as it is now
    kept = _NARROWED.get(key)
    if kept is not None:
        return kept
    try:
        text, _ = narrowed_text(anchor, found[1])
    except (AnchorfsError, ValueError, RecursionError):
        return ""
    return remember(anchor, key[3], text)  # returned, not read back: another thread may clear the memo


def anchored_text(root_real: str, memory: Memory) -> str:
    """The text of each narrowed anchor (symbol body or line range), capped; "" when none is
    readable. Whole-file anchors add nothing."""
    parts: list[str] = []
    total = 0
    seen: set[tuple[str, str | None, tuple[int, int] | None]] = set()
    for anchor in memory.anchors:
        key = (anchor.path, anchor.symbol, anchor.lines)
        if key in seen:
            continue
        seen.add(key)
        text = _one(root_real, anchor)
        if not text:
            continue
        text = text[: MAX_MEMORY_CHARS - total]
        parts.append(text)
        total += len(text)
        if total >= MAX_MEMORY_CHARS:
            break
    return "\n".join(parts)


# Words every program is full of: language keywords and the commonest builtins. They would
# make any two memories about code look alike.
_KEYWORDS = frozenset(
    """and as assert async await break case catch class const continue def default defer del
    do elif else enum except export extends false final finally fn for from func function go
    if impl import in interface is lambda let match mut new nil none not null or package pass
    private protected pub public raise return self static struct super switch this throw
    throws true try type typeof use var void while with yield int str bool float string dict
    list tuple bytes any err error len print println fmt await string number boolean undefined
    cls args kwargs""".split()
)
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def code_vocabulary(text: str) -> str:
    """The distinct words of code, keywords dropped, in order of first use."""
    seen: set[str] = set()
    out: list[str] = []
    for word in _WORD_RE.findall(text):
        low = word.lower()
        if len(word) < 2 or low in _KEYWORDS or low in seen:
            continue
        seen.add(low)
        out.append(word)
    return " ".join(out)


def name_keys(text: str) -> set[str]:
    """Multi-word identifiers in a text, each dotted segment joined and lowercased:
    `DunningState.attempts` -> {"dunningstate"}, `should_give_up()` -> {"shouldgiveup"}.

    The same form the full-text index holds them in (a camelCase name as one token, a
    snake_case one as its exact-name key), so the keys can be searched for directly. One-word
    names (`attempts`, `__init__`) are left out: they are ordinary words.
    """
    from ..core.textutil import _chunks, _tokens, identifier_parts

    out: set[str] = set()
    for token in _tokens(text):
        for seg in _SEGMENT_RE.split(token):
            if len(identifier_parts(seg)) >= 2:
                out.add("".join(_chunks(seg)).lower())
    return out


_SEGMENT_RE = re.compile(r"[./\\#:\-]")


def defined_names(root_real: str, path: str) -> list[str]:
    """Name keys of what a file defines (its symbols), at most MAX_NAMES; [] when the file is
    unsafe, missing, too large, or in a language without symbol support.

    A query naming a file asks about that file, and a memory about one of its functions often
    names the function without anchoring it (`DunningState.attempts counts retries`).
    """
    from .symbols import list_symbols

    found = _read(root_real, path)
    if found is None:
        return []
    try:
        symbols = list_symbols(*found)
    except (AnchorfsError, ValueError, RecursionError):
        return []
    out: list[str] = []
    for symbol in symbols:
        for key in sorted(name_keys(symbol.name)):
            if key not in out:
                out.append(key)
                if len(out) >= MAX_NAMES:
                    return out
    return out
