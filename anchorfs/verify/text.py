"""What a memory's text claims: the paths, symbols and URLs `extract_claims` finds in it, and
whether it talks about another machine (`remote_context`). Text only, no file is looked at:
extraction may over-collect, and the checks in `anchorfs.verify.claims` decide what counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Claim", "extract_claims", "remote_context"]


@dataclass(frozen=True, slots=True)
class Claim:
    """Something a memory's text names: `path`, `symbol` (`Name` or `file#Name`) or `url`."""

    kind: str
    value: str


# -- extraction ------------------------------------------------------------------------------

_MARKER_RE = re.compile(r"@anchor\([^)]*\)")
_URL_RE = re.compile(r"https?://\S+", re.IGNORECASE)
_BACKTICK_RE = re.compile(r"`([^`\n]+)`")
_SPLIT_RE = re.compile(r"[\s,;|()=`\"]+")
_LINE_SUFFIX_RE = re.compile(r":\d+(?:[-:]\d+)?$")
_TEMPLATE_CHARS = frozenset("<>{}$%*?")
_OPENERS = {"[": "]", "{": "}", "<": ">", "(": ")"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_PATH_CHARS_RE = re.compile(r"[\w.\-+~\[\]/]+")
_BARE_NAME_RE = re.compile(r"\.?[\w+\-\[\]]+(?:\.[\w+\-\[\]]+)*")
_IDENT = r"[A-Za-z_$][\w$]*"
_IDENT_RE = re.compile(rf"{_IDENT}(?:(?:\.|::|#){_IDENT})*")
_HOSTLIKE_RE = re.compile(
    r"(?:www\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|dev|ai|app|co|gov|edu|info|me|sh"
    r"|cloud|xyz|us|uk|de|fr|jp|cn|ru|in|eu|ca|au|nl)",
    re.IGNORECASE,
)
_LETTER_RE = re.compile(r"[^\W\d_]")
_GITHUB_LINES_RE = re.compile(r"L\d+(?:-L?\d+)?")


def _trim(token: str) -> str:
    """Drop sentence punctuation and unbalanced brackets around a token, keep the inside."""
    if token.endswith(("'s", "\u2019s")):
        token = token[:-2]
    while token:
        head, tail = token[0], token[-1]
        if head in "*'" or (head in _OPENERS and token.count(head) > token.count(_OPENERS[head])):
            token = token[1:]
        elif tail in ".,:;!?*'" or (tail in _CLOSERS and token.count(tail) > token.count(_CLOSERS[tail])):
            token = token[:-1]
        else:
            break
    return token


def _is_template(token: str) -> bool:
    return any(c in _TEMPLATE_CHARS for c in token) or "..." in token or "@" in token


def _has_extension(name: str) -> bool:
    stem, dot, ext = name.rpartition(".")
    return bool(dot and stem and stem != "." and _LETTER_RE.search(ext))


def _path_value(token: str) -> str | None:
    """A path-shaped token as a path claim's value, or None when it is no path."""
    if not token or not _PATH_CHARS_RE.fullmatch(token) or "//" in token:
        return None
    if not _LETTER_RE.search(token):
        return None  # 2024/01/02, 1/2, 3.11
    if token.startswith("~"):
        return token if re.match(r"~[\w.-]*/.", token) else None
    if token.startswith("/"):
        return token if len(token) > 1 else None
    if "/" not in token:
        bare = _BARE_NAME_RE.fullmatch(token) and (_has_extension(token) or token.startswith("."))
        return token if bare and token not in (".", "..") else None
    if token.startswith("./") and "/" not in token[2:].rstrip("/"):
        return token if token[2:].rstrip("/") else None  # ./README.md: explicitly at the root, unlike a bare name
    value = token
    while value.startswith("./"):
        value = value[2:]
    first = value.split("/", 1)[0]
    if first not in ("..", "~") and _HOSTLIKE_RE.fullmatch(first):
        return None  # github.com/org/repo: a URL without its scheme
    if value.startswith("path/to/"):
        return None  # the classic placeholder
    return value or None


def _symbol_name(text: str) -> str | None:
    text = text[:-2] if text.endswith("()") else text
    if not _IDENT_RE.fullmatch(text):
        return None
    return text.replace("::", ".").replace("#", ".")


def _token_claims(token: str) -> list[Claim]:
    token = _trim(token)
    if not token or _is_template(token):
        return []
    token = _LINE_SUFFIX_RE.sub("", token)
    if "#" in token:
        left, _, frag = token.partition("#")
        path = _path_value(left) if left else None
        if path is None:
            return []
        name = None if _GITHUB_LINES_RE.fullmatch(frag) else _symbol_name(frag)
        if name is not None:
            return [Claim("symbol", f"{path}#{name}")]
        return [Claim("path", path)]
    path = _path_value(token)
    return [Claim("path", path)] if path is not None else []


def extract_claims(text: str) -> list[Claim]:
    """Candidate claims in `text`, deduplicated: URLs, then backticked names, then paths and
    `file#Name`s, each in text order (`check_memory` decides which count). `@anchor(...)`
    markers are skipped, a path inside a URL is part of the URL, and tokens with template parts
    (`<version>`, `$TAG`, `{name}`, globs, `...`) are no claims at all."""
    text = _MARKER_RE.sub(" ", text)
    claims: list[Claim] = []

    def url_span(m: re.Match[str]) -> str:
        raw = re.split(r"[`\"]", m.group(0), maxsplit=1)[0]
        url = _trim(raw)
        if url and not any(c in _TEMPLATE_CHARS for c in url) and url.split("://", 1)[1]:
            claims.append(Claim("url", url))
        return " " * len(m.group(0))

    text = _URL_RE.sub(url_span, text)
    for span in _BACKTICK_RE.finditer(text):
        inner = _trim(span.group(1).strip())
        if inner and not any(c.isspace() for c in inner) and "/" not in inner:
            name = _symbol_name(inner)
            if name is not None:
                claims.append(Claim("symbol", name))
    for token in _SPLIT_RE.split(text):
        claims.extend(_token_claims(token))
    return list(dict.fromkeys(claims))


_REMOTE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ssh", re.compile(r"(?<![\w./~-])(?:ssh|scp|sftp|rsync)(?![\w./-])", re.IGNORECASE)),
    ("a container", re.compile(r"\b(?:docker(?:[ -]compose)?|podman|kubectl|oc)\s+(?:exec|cp|run|attach)\b",
                               re.IGNORECASE)),
    ("user@host", re.compile(r"(?<![\w.@/-])[\w.+-]+@[A-Za-z][\w-]*(?:\.[\w-]+)*")),
)
_IPV4_RE = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w.]\w)")


def remote_context(text: str) -> str | None:
    """What makes this text talk about another machine (ssh, a container, an IP), or None."""
    for label, pattern in _REMOTE_PATTERNS:
        m = pattern.search(text)
        if m:
            return m.group(0) if label != "user@host" else f"{m.group(0)} (user@host)"
    for m in _IPV4_RE.finditer(text):
        octets = [int(g) for g in m.groups()]
        if all(o <= 255 for o in octets) and octets[0] != 127 and octets != [0, 0, 0, 0]:
            return f"an IP address ({m.group(0)})"
    return None


_CODE_LIKE_RE = re.compile(rf"(?<![\w$./#-]){_IDENT}(?:\.{_IDENT})*(?:\(\))?(?![\w$/#-])")


def _prose_identifiers(text: str) -> list[str]:
    """Identifiers in plain prose that only code would spell: camelCase, snake_case, `f()`."""
    text = _URL_RE.sub(" ", _MARKER_RE.sub(" ", text))
    names: list[str] = []
    for m in _CODE_LIKE_RE.finditer(text):
        raw = m.group(0)
        name = raw[:-2] if raw.endswith("()") else raw
        parts = name.split(".")
        if raw.endswith("()") or any(_camel(p) or _snake(p) for p in parts):
            names.append(name)
    return list(dict.fromkeys(names))


def _snake(word: str) -> bool:
    """get_user, MAX_FILE_BYTES, __init__: an underscore inside the word, or a dunder."""
    inner = word.strip("_")
    return bool(inner) and ("_" in inner or (word.startswith("__") and word.endswith("__")))


def _camel(word: str) -> bool:
    """getUserById, TokenIssuer: an inner capital after a lowercase letter."""
    return bool(re.search(r"[a-z0-9][A-Z]", word))
