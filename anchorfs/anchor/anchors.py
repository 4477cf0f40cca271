"""Anchors: parse specs and `@anchor(...)` markers, guard paths, take hashes, judge drift, and
read the code under a memory's anchors for the index.

Taking an anchor (write time) and judging it (read time) share one notion of "the anchored
text", so a memory is stale only on evidence that this exact text changed. Narrowed text is
compared with line endings normalized: a CRLF <-> LF conversion leaves it `fresh`.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from itertools import accumulate

from ..core.errors import AnchorError, AnchorfsError, SymbolNotFoundError, UnsafePathError
from ..core.guard import (
    EscapedError,
    NotRegularError,
    SwappedError,
    TooLargeError,
    is_state_name,
    read_guarded,
    sha256_bytes,
)
from ..core.model import AnchorRef, Memory, Verdict, span_text
from ..core.statedir import STATE_DIR

__all__ = ["STATE_DIR", "MAX_FILE_BYTES", "SCAN_BUDGET_BYTES", "parse_spec", "parse_markers", "resolve_path",
           "is_state_name", "take", "narrowed_text", "judge", "judge_at", "narrowed_tokens", "text_hash",
           "anchored_text", "code_vocabulary", "defined_names", "name_keys", "MAX_READ_BYTES",
           "MAX_ANCHOR_CHARS", "MAX_MEMORY_CHARS", "nearest_block", "old_text"]


MAX_FILE_BYTES = 64 * 1024 * 1024
"""Files above this are refused at write time; at check time a narrowed anchor on one is `unreadable`."""

# Patterns as text, compiled where a spec or a marker is parsed (`re`'s cache keeps each)
_LINES_RE = r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$"
_SYMBOL_RE = r"^[^\s#]+$"
_MARKER_RE = r"@anchor\s*\("  # `@anchor (file=x)` is a marker too, never dropped
_HEX64 = frozenset("0123456789abcdef")


def text_hash(text: bytes) -> str:
    return sha256_bytes(text)


def _parse_lines(text: str, where: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m:
        raise AnchorError(f"bad lines {text!r} in {where}: expected START-END or LINE")
    if max(len(g or "") for g in m.groups()) > 18:  # int() refuses 4300+ digits with ValueError
        raise AnchorError(f"bad lines in {where}: line number too large")
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else start
    if start < 1:
        raise AnchorError(f"bad lines {text!r} in {where}: lines start at 1")
    if start > end:
        raise AnchorError(f"bad lines {text!r} in {where}: start {start} is after end {end}")
    return start, end


def parse_spec(spec: str) -> AnchorRef:
    """`PATH` | `PATH#SYMBOL` | `PATH:START-END` | `PATH:LINE` -> an untaken AnchorRef."""
    if not isinstance(spec, str):
        raise AnchorError(f"an anchor must be a spec string or an AnchorRef, not {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise AnchorError("empty anchor spec")
    if "#" in text:
        path, _, symbol = text.partition("#")
        symbol = symbol.strip()
        if not path.strip() or not symbol or not re.match(_SYMBOL_RE, symbol):
            raise AnchorError(f"bad anchor spec {spec!r}: expected PATH#SYMBOL")
        return AnchorRef(path=path.strip(), symbol=symbol)
    m = re.match(_LINES_RE, text)
    if m:
        lines = _parse_lines(m.group("start") + ("-" + m.group("end") if m.group("end") else ""), repr(spec))
        return AnchorRef(path=m.group("path"), lines=lines)
    return AnchorRef(path=text)


def _split_marker_args(body: str, marker: str) -> dict[str, str]:
    args: dict[str, str] = {}
    for part in body.split(","):
        part = part.strip()
        if not part:
            raise AnchorError(f"malformed marker {marker}: empty argument")
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise AnchorError(f"malformed marker {marker}: expected key=value, got {part!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key not in ("file", "symbol", "lines"):
            raise AnchorError(f"malformed marker {marker}: unknown key {key!r} (file, symbol, lines)")
        if key in args:
            raise AnchorError(f"malformed marker {marker}: {key!r} given twice")
        args[key] = value
    return args


def parse_markers(text: str) -> list[AnchorRef]:
    """Every `@anchor(...)` marker in a memory's text; a malformed one is an error, never dropped."""
    refs: list[AnchorRef] = []
    for m in re.finditer(_MARKER_RE, text):
        close = text.find(")", m.end())
        if close < 0:
            raise AnchorError(f"malformed marker {text[m.start():m.start() + 40]!r}: no closing ')'")
        marker = text[m.start():close + 1]
        args = _split_marker_args(text[m.end():close], marker)
        if "file" not in args:
            raise AnchorError(f"malformed marker {marker}: file= is required")
        if "symbol" in args and "lines" in args:
            raise AnchorError(f"malformed marker {marker}: give symbol= or lines=, not both")
        lines = _parse_lines(args["lines"], marker) if "lines" in args else None
        symbol = args.get("symbol")
        if symbol is not None and not re.match(_SYMBOL_RE, symbol):
            raise AnchorError(f"malformed marker {marker}: bad symbol {symbol!r}")
        refs.append(AnchorRef(path=args["file"], symbol=symbol, lines=lines))
    return refs


def resolve_path(root_real: str, path: str) -> tuple[str, str]:
    """Map a user path to (repo-relative POSIX path, real absolute path), refusing escapes (checked
    on the realpath, so a symlink on the way out is caught). `root_real` must be a realpath."""
    if not path or not path.strip():
        raise UnsafePathError("empty anchor path")
    if "\0" in path:
        raise UnsafePathError(f"anchor path {path!r} contains a NUL byte")
    try:
        os.fsencode(path)  # a lone surrogate (SDK, MCP JSON) names no file; os.stat would raise
    except UnicodeEncodeError:
        raise AnchorError(f"anchor path {path!r} is not a valid file name") from None
    joined = path if os.path.isabs(path) else os.path.join(root_real, path)
    real = os.path.realpath(joined)
    rel = os.path.relpath(real, root_real)
    if rel == os.curdir:
        raise AnchorError(f"anchor path {path!r} is the workspace root, not a file")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise UnsafePathError(f"anchor path {path!r} resolves outside the workspace")
    rel_posix = rel.replace(os.sep, "/")
    if is_state_name(rel_posix.partition("/")[0]):
        raise UnsafePathError(f"anchor path {path!r} is inside anchorfs's own {STATE_DIR}/ folder")
    return rel_posix, real


def _read_file(root_real: str, real: str, shown: str, *, again: bool = False) -> bytes:
    """The bytes of an anchor's file at write time, through the guarded open. With `again`, a
    swap raises `SwappedError` so the caller can resolve the path once more."""
    try:
        return read_guarded(real, root=root_real, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        raise AnchorError(f"anchor file {shown!r} does not exist") from None
    except EscapedError:
        raise UnsafePathError(f"anchor path {shown!r} resolves outside the workspace") from None
    except NotRegularError as exc:
        if exc.is_dir:
            raise AnchorError(f"anchor path {shown!r} is a directory, not a file") from None
        raise AnchorError(f"anchor path {shown!r} is not a regular file") from None
    except TooLargeError:
        raise AnchorError(f"anchor file {shown!r} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB") from None
    except SwappedError:
        if again:
            raise
        raise AnchorError(f"anchor file {shown!r} changed while being read; try again") from None
    except OSError as exc:
        raise AnchorError(f"anchor file {shown!r} cannot be read: {exc.strerror}") from None


def _split_lines(data: bytes) -> list[bytes]:
    """Lines without their endings (LF, CRLF); a trailing newline does not make an empty line."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if b"\r" not in data:  # the common case: no per-line Python for a big file
        return lines
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]


def _lines_text(lines: list[bytes], start: int, end: int) -> bytes:
    return b"\n".join(lines[start - 1:end])


def _symbol_span(path: str, data: bytes, symbol: str) -> tuple[bytes, tuple[int, int]]:
    from .symbols import find_symbol

    sym = find_symbol(path, data, symbol)
    text = data[sym.start_byte:sym.end_byte].replace(b"\r\n", b"\n")
    return text, (sym.start_line, sym.end_line)


def narrowed_text(ref: AnchorRef, data: bytes) -> tuple[bytes, tuple[int, int]]:
    """The anchored text and where it stands; raises AnchorError / SymbolNotFoundError."""
    if ref.symbol:
        return _symbol_span(ref.path, data, ref.symbol)
    assert ref.lines is not None
    lines = _split_lines(data)
    start, end = ref.lines
    if start < 1:  # an AnchorRef given directly never went through _parse_lines
        raise AnchorError(f"bad lines {start}-{end} in {ref.path}: lines start at 1")
    if start > end:
        raise AnchorError(f"bad lines {start}-{end} in {ref.path}: start {start} is after end {end}")
    if end > len(lines):
        raise AnchorError(f"lines {start}-{end} are past the end of {ref.path} ({len(lines)} lines)")
    return _lines_text(lines, start, end), (start, end)


def _line_bytes(data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """Byte span of lines `start`..`end` (1-based, inclusive, line ending left out)."""
    a = 0
    for _ in range(start - 1):
        a = data.find(b"\n", a) + 1
        if a == 0:
            return None
    b = a
    for _ in range(end - start + 1):
        nl = data.find(b"\n", b)
        if nl < 0:
            return (a, len(data))
        b = nl + 1
    return (a, b - 1 - (1 if data[b - 2:b - 1] == b"\r" else 0))


def narrowed_tokens(ref: AnchorRef, data: bytes) -> str | None:
    """The token hash of a narrowed anchor's text in `data` (`symbols.token_hash`), or None: no
    grammar, the text not found, or a whole-file anchor."""
    from .symbols import find_symbol, language_for, token_hash

    if language_for(ref.path) is None or not (ref.symbol or ref.lines):
        return None
    try:
        if ref.symbol:
            sym = find_symbol(ref.path, data, ref.symbol)
            return token_hash(ref.path, data, sym.start_byte, sym.end_byte)
        assert ref.lines is not None
        span = _line_bytes(data, *ref.lines)
    except AnchorError:
        return None
    return token_hash(ref.path, data, *span) if span is not None else None


def take(root_real: str, ref: AnchorRef, *, commit: str | None = None, dirty: bool | None = None) -> AnchorRef:
    """Validate and hash an anchor at write time; the hash is always computed here."""
    rel, real = resolve_path(root_real, ref.path)
    try:  # a name that is not UTF-8 (surrogate-escaped by Python) cannot be stored in the ledger
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise AnchorError(f"anchor path {ref.path!r} resolves to a name that is not valid UTF-8 "
                          f"({rel!r}); rename the file to anchor it") from None
    if ".git" in rel.lower().split("/"):
        raise AnchorError(f"anchor path {ref.path!r} is inside git's own .git folder, not the code")
    try:
        data = _read_file(root_real, real, ref.path, again=True)
    except SwappedError:  # swapped between resolving and reading: resolve once more
        rel, real = resolve_path(root_real, ref.path)
        data = _read_file(root_real, real, ref.path)
    sha = sha256_bytes(data)
    if ref.sha256 is not None and ref.sha256.lower() != sha:
        raise AnchorError(f"the given sha256 for {rel} does not match the file ({sha[:12]}...); "
                          "anchorfs computes hashes itself, leave it out")
    content_hash = tokens = None
    if ref.symbol or ref.lines:
        if ref.symbol and ref.lines:
            raise AnchorError(f"anchor {rel}: give a symbol or lines, not both")
        here = ref.replace(path=rel)
        if ref.lines and b"\0" in data[:8192]:
            raise AnchorError(f"{rel} is a binary file: it has no lines; anchor the whole file instead")
        text, _ = narrowed_text(here, data)
        content_hash = text_hash(text)
        remember(here, sha, text)  # the store write that follows indexes this text
        tokens = narrowed_tokens(here, data)
        if ref.content_hash is not None and ref.content_hash.lower() != content_hash:
            raise AnchorError(f"the given content_hash for {ref.spec} does not match the file")
    elif ref.content_hash is not None:  # a whole-file anchor has none: a given one cannot agree
        raise AnchorError(f"a content_hash was given for {rel}, a whole-file anchor that has none; leave it out")
    return AnchorRef(path=rel, sha256=sha, symbol=ref.symbol, lines=ref.lines, content_hash=content_hash,
                     commit=commit, dirty=dirty, token_hash=tokens)


SCAN_BUDGET_BYTES = 32 * 1024 * 1024
"""What one relocation search may hash (window bytes, plus `_WINDOW_COST` per window tried):
only the text's hash is known, so every window is hashed whole. The search goes outward from
the old place; past this budget the rest of the file is not searched (`changed`, saying so)."""

_WINDOW_COST = 256  # a window's fixed cost in budget bytes


def _find_block(lines: list[bytes], n: int, want: str, near: int, *,
                budget: int = SCAN_BUDGET_BYTES) -> tuple[tuple[int, int] | None, bool]:
    """Where an n-line block with hash `want` now stands, nearest to its old start `near`
    (ties: the earlier one), and whether the search was complete (False: budget spent first).
    Each window is a slice of one buffer joined from the lines the budget can reach."""
    import hashlib
    from itertools import accumulate

    m = len(lines) - n + 1  # windows start at 0 .. m-1 (0-based)
    if n < 1 or m < 1 or len(want) != 64 or not _HEX64.issuperset(want):
        return None, True
    target = bytes.fromhex(want)
    center = near - 1
    reach = budget // _WINDOW_COST + 1  # no search tries more windows than this, on either side
    pivot = min(max(center, 0), m - 1)
    first = max(0, pivot - reach)
    region = lines[first:min(len(lines), pivot + reach + n)]
    view = memoryview(b"\n".join(region))
    # offsets[k]: where region line k starts; window i spans [offsets[i-first], offsets[i-first+n] - 1)
    offsets = list(accumulate(map((1).__add__, map(len, region)), initial=0))
    sha256 = hashlib.sha256
    d = max(0, center - (m - 1), -center)
    spent = 0
    while True:
        lo, hi = center - d, center + d
        if lo < 0 and hi >= m:
            return None, True
        for i in (lo, hi) if d else (lo,):
            if 0 <= i < m:
                spent += _WINDOW_COST
                if spent > budget or i < first or i - first + n >= len(offsets):
                    return None, False
                a, b = offsets[i - first], offsets[i - first + n] - 1
                spent += b - a
                if spent > budget:
                    return None, False
                if sha256(view[a:b]).digest() == target:
                    return (i + 1, i + n), True
        d += 1


NEAREST_RATIO = 0.6
"""How alike (difflib's ratio) a block must be to a line anchor's old text to be called its
place now: below it, the text is not taken to be anywhere."""
_NEAREST_REACH = 8  # lines looked at around the aligned place, past the block's own length


def nearest_block(data: bytes, then: bytes, lines: tuple[int, int]) -> tuple[int, int] | None:
    """Where the text at `lines` of `then` (the file as it was) stands in `data` now, as many lines:
    where a line diff of the two files aligns it when still alike enough (`NEAREST_RATIO`), else the
    most alike block near there; None when none is, or its lines went with nothing in their place."""
    import difflib

    old, new = _split_lines(then), _split_lines(data)
    a, b = lines
    n = b - a + 1
    if not 1 <= a <= b <= len(old) or len(new) < n:
        return None
    aligned = None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if i1 <= a - 1 < i2:
            if tag == "delete":  # its lines went, nothing took their place: not here any more
                return None
            aligned = j1 + (a - 1 - i1 if tag == "equal" else min(a - 1 - i1, j2 - j1 - 1))
            break
    if aligned is None:
        return None
    aligned = min(aligned, len(new) - n)
    match = difflib.SequenceMatcher(None, autojunk=False)
    match.set_seq2(b"\n".join(old[a - 1:b]).decode("utf-8", "replace"))

    def alike(i: int) -> float:
        match.set_seq1(b"\n".join(new[i:i + n]).decode("utf-8", "replace"))
        return match.ratio() if match.quick_ratio() >= NEAREST_RATIO else 0.0

    if alike(aligned) >= NEAREST_RATIO:
        return aligned + 1, aligned + n
    reach = n + _NEAREST_REACH
    best = max(((alike(i), -abs(i - aligned), -i) for i in range(max(0, aligned - reach),
                                                                 min(len(new) - n, aligned + reach) + 1)),
               default=(0.0, 0, 0))
    return (-best[2] + 1, -best[2] + n) if best[0] >= NEAREST_RATIO else None


def old_text(ref: AnchorRef, then: bytes | None) -> bytes | None:
    """A line anchor's text as it was taken, from `then` (its file's bytes at `ref.commit`),
    when that file is the one it was taken from (its hash) and the lines hash as recorded."""
    if then is None or not ref.lines or sha256_bytes(then) != ref.sha256:
        return None
    a, b = ref.lines
    text = _lines_text(_split_lines(then), a, b)
    return text if text_hash(text) == ref.content_hash else None


def nearest_now(ref: AnchorRef, data: bytes, then: bytes | None, detail: str, *,
                strict: bool = False) -> tuple[Verdict, str, tuple[int, int] | None]:
    """A changed line anchor (`detail`) followed by its text of `then`: `reformatted` when its
    tokens are all there near where the lines around it align it (or far, `_relaid`), else
    `changed` naming the nearest block. One rule for drift and history."""
    text = old_text(ref, then)
    if ref.lines is None or text is None or then is None:
        return Verdict.CHANGED, detail, None
    near = nearest_block(data, then, ref.lines)
    relaid = None if strict or not ref.token_hash else _relaid(ref.replace(lines=near or ref.lines), ref.path, data, text)
    if relaid is not None:
        return Verdict.REFORMATTED, f"{ref.spec} reformatted: same tokens, now lines {span_text(relaid)}", relaid
    if near is not None and near != ref.lines:  # the old number alone would send a reader elsewhere
        detail = f"{detail} (was {span_text(ref.lines)}, nearest now {span_text(near)})"
    return Verdict.CHANGED, detail, near


def judge(ref: AnchorRef, data: bytes, *, strict: bool = False,
          text: bytes | None = None) -> tuple[Verdict, str, tuple[int, int] | None]:
    """Judge an anchor against the file's current bytes: `fresh` (the text where it was), `moved`
    (identical elsewhere), `reformatted` (same tokens; not with `strict`), `changed`..."""
    sha = sha256_bytes(data)
    if sha == ref.sha256:
        return Verdict.FRESH, "unchanged", ref.lines
    if not ref.symbol and not ref.lines:
        return Verdict.CHANGED, f"{ref.path} changed", None
    return judge_at(ref, ref.path, data, strict=strict, text=text)


DISTINCT_WORDS = (6, 4)
"""Words a line anchor's text needs (on one line, on more) before a copy far from its place counts
as where it went: `import "math/rand"` or `throw new Error(` sit in many places."""


def _distinctive(data: bytes, lines: tuple[int, int] | None) -> bool:
    if lines is None:
        return False
    text = b"\n".join(data.split(b"\n")[lines[0] - 1:lines[1]])
    return len(re.findall(rb"\w+", text)) >= DISTINCT_WORDS[lines[1] > lines[0]]


_SPACE = b" \t\n\r\f\v"


@lru_cache(maxsize=4)  # a step asks it of the same version of a file several times
def _squeezed(text: bytes) -> bytes:
    """Text without its whitespace: equal for any two texts of equal tokens, so unequal means
    no parse is needed to say their tokens differ."""
    return text.translate(None, _SPACE)


def _reformatted(ref: AnchorRef, path: str, data: bytes, strict: bool, at: tuple[int, int] | None,
                 text: bytes | None = None) -> bool:
    """Whether the text of `ref` (at `at` for lines) has the tokens it had, layout aside; `text`,
    a line anchor's text as taken, spares the parse when the characters differ."""
    if strict or not ref.token_hash:
        return False
    probe = ref.replace(path=path, lines=at) if ref.lines else ref.replace(path=path)
    if text is not None and at is not None and _squeezed(b"".join(data.split(b"\n")[at[0] - 1:at[1]])) != _squeezed(text):
        return False
    return narrowed_tokens(probe, data) == ref.token_hash


_RELAID_REACH = 3  # lines a re-layout may shift the start or change the count by


def _relaid(ref: AnchorRef, path: str, data: bytes, text: bytes | None = None) -> tuple[int, int] | None:
    """A line anchor whose tokens are all still there on other lines (a formatter joined or split
    them): the span near its old place with the recorded token hash, closest first, blank edge
    lines left out. With `text` (as taken) a span is parsed only when its characters are the
    text's, and distinctive text is also looked for far, at each line it can begin at."""
    from .symbols import token_hash

    assert ref.lines is not None
    a, b = ref.lines
    n = b - a + 1
    want = _squeezed(text) if text is not None else None
    if text is not None and not same_chars(text, data):
        return None  # its characters are nowhere in the file, whatever the layout
    lines = _split_lines(data)
    total = len(lines)
    offsets: list[int] = []  # where each line starts, listed once when first needed

    def at(line: int) -> int:
        if not offsets:
            offsets.extend(o + i for i, o in enumerate(accumulate(map(len, data.split(b"\n")), initial=0)))
        return offsets[line - 1]

    def tokens(start: int, end: int) -> str | None:
        if want is not None and b"".join(lines[start - 1:end]).translate(None, _SPACE) != want:
            return None  # other characters: other tokens, no parse needed
        b = at(end + 1) - 1
        return token_hash(path, data, at(start), b - 1 if data[b - 1:b] == b"\r" else b)

    starts = sorted(range(max(1, a - _RELAID_REACH), min(total, a + _RELAID_REACH) + 1), key=lambda s: abs(s - a))
    if want and text is not None and _distinctive(text, (1, text.count(b"\n") + 1)):  # and far: lines it can begin at
        near = set(starts)
        starts += sorted((i for i, line in enumerate(lines, 1) if i not in near
                          and (sq := line.translate(None, _SPACE)) and want.startswith(sq)), key=lambda s: abs(s - a))
    sizes = sorted(range(max(1, n - _RELAID_REACH), n + _RELAID_REACH + 1), key=lambda k: abs(k - n))
    for start in starts:
        for size in sizes:
            end = start + size - 1
            if end <= total and tokens(start, end) == ref.token_hash:
                while start < end and not lines[start - 1].strip():
                    start += 1
                while end > start and not lines[end - 1].strip():
                    end -= 1
                return start, end
    return None


def same_chars(text: bytes, data: bytes) -> bool:
    """Whether `text` could still be in `data` under another layout: its characters, whitespace
    aside, stand there in a row (a test that spares a parse or a diff when they do not)."""
    return _squeezed(text) in _squeezed(data)


def judge_at(ref: AnchorRef, path: str, data: bytes, *, strict: bool = False,
             text: bytes | None = None) -> tuple[Verdict, str, tuple[int, int] | None]:
    """Judge a narrowed anchor's text in `data`, the bytes of `path` (its own file, or where it
    moved), as `judge` does; `text`, a line anchor's text as taken, lets `_relaid` look past the
    old numbers."""
    here = path == ref.path
    shown = ref.spec if here else f"{ref.spec} now at {path}"
    if ref.symbol:
        try:
            text, where = _symbol_span(path, data, ref.symbol)
        except SymbolNotFoundError:
            return Verdict.SYMBOL_MISSING, f"{ref.spec} no longer found", None
        except AnchorError as exc:
            return Verdict.UNREADABLE, str(exc), None
        a, b = where
        if text_hash(text) == ref.content_hash:
            if here:  # a symbol's place is its name: found under it, unchanged, it has not moved
                return Verdict.FRESH, f"{ref.spec} unchanged at lines {a}-{b}; the file changed elsewhere", where
            return Verdict.MOVED, f"{shown} (lines {a}-{b})", where
        if _reformatted(ref, path, data, strict, None):
            return Verdict.REFORMATTED, f"{shown} reformatted: same tokens, other layout (lines {a}-{b})", where
        return Verdict.CHANGED, f"{shown} changed", where
    assert ref.lines is not None
    start, end = ref.lines
    lines = _split_lines(data)
    if end <= len(lines) and text_hash(_lines_text(lines, start, end)) == ref.content_hash:
        if here:
            return Verdict.FRESH, f"{ref.spec} unchanged; the file changed elsewhere", ref.lines
        return Verdict.MOVED, f"{shown} (lines {start}-{end})", ref.lines
    found, complete = _find_block(lines, end - start + 1, ref.content_hash or "", start)
    if found is not None:
        a, b = found
        where_now = f"lines {a}-{b}" if here else f"{path} lines {a}-{b}"
        return Verdict.MOVED, f"{ref.spec} now at {where_now}", found
    if end <= len(lines) and _reformatted(ref, path, data, strict, ref.lines, text):
        return Verdict.REFORMATTED, f"{shown} reformatted: same tokens, other layout", ref.lines
    relaid = None if strict or not ref.token_hash else _relaid(ref, path, data, text)
    if relaid is not None:
        return Verdict.REFORMATTED, f"{shown} reformatted: same tokens, now lines {relaid[0]}-{relaid[1]}", relaid
    if not complete:
        return Verdict.CHANGED, (f"{shown} changed (not found near its old place; the rest of this "
                                 f"{len(lines)}-line file was not searched, past the "
                                 f"{SCAN_BUDGET_BYTES >> 20} MiB relocation bound)"), None
    return Verdict.CHANGED, f"{shown} changed", None


MAX_ANCHOR_CHARS = 4000
"""The most characters of an anchor's text the index reads."""

_NARROWED: dict[tuple[str, str | None, tuple[int, int] | None, str], str] = {}
"""An anchor's text by (path, symbol, lines, SHA-256 of the file): a write's store rows take the
text its anchors were just narrowed to (`remember`) instead of parsing each file again."""
NARROWED_KEPT = 4096


def remember(anchor: AnchorRef, file_sha256: str, text: bytes) -> str:
    """Keep the text `take` narrowed `anchor` to in a file hashing to `file_sha256`; returns it
    as the index reads it."""
    if len(_NARROWED) >= NARROWED_KEPT:  # bounded: a long-lived server takes anchor after anchor
        _NARROWED.clear()
    kept = _NARROWED[(anchor.path, anchor.symbol, anchor.lines, file_sha256)] = (
        text.decode("utf-8", "replace")[:MAX_ANCHOR_CHARS])
    return kept


# -- The code under a memory's anchors, as extra vocabulary for the search index.

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_MEMORY_CHARS = 8000
MAX_NAMES = 64


def _read(root_real: str, path: str) -> tuple[str, bytes] | None:
    """(repo-relative path, bytes) of a safe, regular, small enough text file, else None."""
    try:
        rel, real = resolve_path(root_real, path)
        # guarded: a link, FIFO or file swapped in since `resolve_path` is refused, as a large one
        data = read_guarded(real, root=root_real, max_bytes=MAX_READ_BYTES)
    except (AnchorfsError, OSError, ValueError):
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return rel, data


def _one(root_real: str, anchor: AnchorRef) -> str:
    if not (anchor.symbol or anchor.lines):  # a whole file is too broad to describe one memory
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


# Language keywords and the commonest builtins: they would make any two memories look alike.
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
    """Multi-word identifiers in a text, each dotted segment joined and lowercased, as the index
    holds them: `DunningState.attempts` -> {"dunningstate"}. One-word names are left out."""
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
    unsafe, missing, too large, or in a language without symbol support."""
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
