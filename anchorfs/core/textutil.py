"""Tokenizing code-flavoured text so that `user` finds `getUserById`.

Neither LanceDB's full-text tokenizer nor a plain word split breaks `getUserById` or
`auth/token.py` into the words a person searches for, so the full-text index
(`expand_for_search`) and the hashing embedder (`words`) split them here. Standard library only.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["identifier_parts", "words", "expand_for_search", "compound_keys", "cjk_bigrams", "search_terms", "term_key"]

# Characters that join the pieces of one compound token (`a.b`, paths, kebab-case, `Foo::bar`,
# `file.py#Symbol`), only when a word character follows: a sentence's full stop does not join.
_JOINERS = r"./\\:#\-"
_ASCII_WORD = r"\w"
_ASCII_TOKEN_RE = re.compile(rf"{_ASCII_WORD}+(?:[{_JOINERS}]+{_ASCII_WORD}+)*", re.ASCII)
_ASCII_CHUNK_RE = re.compile(r"[A-Za-z0-9]+")
# The ASCII twin of `_split_chunk`'s rules, several times faster; tests hold them equal.
_ASCII_PART_RE = re.compile(r"[A-Z]+s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Python's `\w` leaves out combining marks, which would cut words of many scripts in pieces;
# the non-ASCII pattern adds them. Built on first use (about 20 ms).
_unicode_res: tuple[re.Pattern[str], re.Pattern[str]] | None = None


def _unicode_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    global _unicode_res
    if _unicode_res is None:
        ranges: list[tuple[int, int]] = []
        category = unicodedata.category
        for cp in range(0x300, 0x20000):
            if category(chr(cp))[0] == "M":
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1] = (ranges[-1][0], cp)
                else:
                    ranges.append((cp, cp))
        ranges.append((0xE0100, 0xE01EF))  # variation selectors supplement
        marks = "".join(
            re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
            for a, b in ranges
        )
        word = rf"[\w{marks}]"
        token = re.compile(rf"{word}+(?:[{_JOINERS}]+{word}+)*")
        chunk = re.compile(rf"[^\W_](?:[^\W_]|[{marks}])*")
        _unicode_res = (token, chunk)
    return _unicode_res


def _kind(ch: str) -> str:
    """u(pper), l(ower), d(igit), m(ark) or o(ther letter: uncased scripts such as CJK)."""
    if ch.isdigit():
        return "d"
    if ch.isupper() or ch.istitle():
        return "u"
    if ch.islower():
        return "l"
    if unicodedata.category(ch)[0] == "M":
        return "m"
    return "o"


@lru_cache(maxsize=65536)
def _split_chunk(chunk: str) -> tuple[str, ...]:
    """Split one run of letters and digits at case and letter/digit changes:
    `getUserById` -> get|User|By|Id, `HTTPServer2` -> HTTP|Server|2."""
    if chunk.isascii():
        if chunk.isdigit() or (chunk.isalpha() and (chunk.islower() or chunk.isupper())):
            return (chunk.lower(),)
        return tuple(p.lower() for p in _ASCII_PART_RE.findall(chunk))
    return _split_unicode_chunk(chunk)


def _split_unicode_chunk(chunk: str) -> tuple[str, ...]:
    kinds = [_kind(ch) for ch in chunk]
    # A combining mark belongs to the letter before it.
    for i in range(1, len(kinds)):
        if kinds[i] == "m":
            kinds[i] = kinds[i - 1]
    parts: list[str] = []
    start = 0
    for i in range(1, len(chunk)):
        prev, cur = kinds[i - 1], kinds[i]
        if prev == cur:
            # The last capital of an acronym starts the next word: HTTP|Server. A lone
            # lowercase `s` after an acronym is its plural instead: JWTs, getURLs.
            cut = (
                cur == "u"
                and i + 1 < len(chunk)
                and kinds[i + 1] == "l"
                and not (chunk[i + 1] == "s" and (i + 2 == len(chunk) or kinds[i + 2] != "l"))
            )
        elif "d" in (prev, cur):
            cut = True
        elif cur == "u":
            cut = True  # lower (or uncased) to upper: get|User
        elif prev == "u" and cur == "l":
            cut = False  # Capitalised word: User
        else:
            cut = "o" in (prev, cur) and "m" not in (prev, cur)  # cased <-> uncased script
        if cut:
            parts.append(chunk[start:i])
            start = i
    parts.append(chunk[start:])
    return tuple(p.lower() for p in parts if p)


def _chunks(token: str) -> list[str]:
    if token.isascii():
        return _ASCII_CHUNK_RE.findall(token)
    return _unicode_patterns()[1].findall(unicodedata.normalize("NFC", token))


def identifier_parts(token: str) -> list[str]:
    """The lowercased words inside an identifier, path or dotted name: `auth/token.py` -> auth,
    token, py. Anything not a letter, digit or combining mark separates parts."""
    parts: list[str] = []
    for chunk in _chunks(token):
        parts.extend(_split_chunk(chunk))
    return parts


def _tokens(text: str) -> list[str]:
    """Whole tokens as written (case kept), compound ones such as `auth/token.py` in one piece."""
    if text.isascii():
        return _ASCII_TOKEN_RE.findall(text)
    return _unicode_patterns()[0].findall(unicodedata.normalize("NFC", text))


@lru_cache(maxsize=65536)
def _token_words(token: str) -> tuple[str, tuple[str, ...]]:
    """(whole token lowercased, its parts when it is compound else ())."""
    whole = token.lower()
    parts = tuple(identifier_parts(token))
    if len(parts) == 1 and parts[0] == whole:
        return whole, ()
    return whole, parts


def words(text: str) -> list[str]:
    """Lowercase word tokens of a text: every token whole, followed by its parts if compound
    (`call getUserById` -> call, getuserbyid, get, user, by, id). `___` is dropped."""
    out: list[str] = []
    for token in _tokens(text):
        whole, parts = _token_words(token)
        if parts:
            out.append(whole)
            out.extend(parts)
        elif any(ch.isalnum() for ch in whole):
            out.append(whole)
    return out


def expand_for_search(text: str) -> str:
    """The text for the full-text index: the original, then the parts of its identifiers, each
    once and only when not already a plain word (BM25 counts are not inflated)."""
    plain: set[str] = set()
    extra: list[str] = []
    for token in _tokens(text):
        whole, parts = _token_words(token)
        if parts:
            extra.extend(parts)
        else:
            plain.add(whole)
    added: list[str] = []
    seen = set(plain)
    for part in [*extra, *cjk_bigrams(text)]:
        if part not in seen:
            seen.add(part)
            added.append(part)
    if not added:
        return text
    return text + "\n" + " ".join(added)


# Scripts written without spaces (Han, kana, Hangul): one run is one token to the full-text index.
_CJK_RUN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]{3,}")


def cjk_bigrams(text: str) -> list[str]:
    """The overlapping character pairs of every run of three or more CJK characters, in order,
    each once: a two-character word is then a term of its own wherever it sits in a run."""
    if text.isascii():
        return []
    out: list[str] = []
    seen: set[str] = set()
    for run in _CJK_RUN_RE.findall(text):
        for i in range(len(run) - 1):
            pair = run[i:i + 2]
            if pair not in seen:
                seen.add(pair)
                out.append(pair)
    return out


_TERM_RE = re.compile(r"[^\W_]+")
_QUIET = frozenset(
    """a an and are as at be been but by can do does did for from has have had if in into is it its
    not of on or so than that the then there these this those to was we were what when where which
    who whom whose why how will would should could with you your i he she they them our us me my
    any some all""".split()
)


_VOWELS = frozenset("aeiouy")


def _stem(word: str) -> str:
    """A deliberately tiny English stemmer (users/user, caching/cache, queries/query), applied to
    both sides of a comparison; only plain ASCII words are touched."""
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and _VOWELS.intersection(stem):
            if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz" + "aeiou":
                stem = stem[:-1]  # stopped -> stop, running -> run
            word = stem
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


@lru_cache(maxsize=1 << 16)
def term_key(word: str) -> str:
    """A word as the relevance measure compares it: lowercased and crudely stemmed (cached)."""
    return _stem(word.lower())


def search_terms(text: str) -> list[str]:
    """The terms of an already expanded text (`expand_for_search`), stemmed, without stopwords."""
    low = text.lower()
    if low.isascii():
        return [term_key(t) for t in _TERM_RE.findall(low) if t not in _QUIET]
    # a run of CJK characters counts by its pairs, not as one long word nobody types whole
    out = [term_key(t) for t in _TERM_RE.findall(low) if t not in _QUIET and not _CJK_RUN_RE.fullmatch(t)]
    out.extend(cjk_bigrams(low))
    return out


# `config/app.toml:23` or `:10-12`: a line reference, not part of the name.
_LINE_SUFFIX_RE = re.compile(r":\d+(?:-\d+)?$")
# Longer keys are dropped by the full-text tokenizer (its max_token_length is 40).
_MAX_KEY = 40


@lru_cache(maxsize=65536)
def _token_keys(token: str) -> tuple[str, ...]:
    keys: list[str] = []
    for piece in _LINE_SUFFIX_RE.sub("", token).split("#"):
        segments = re.split(r"[/\\]", piece)
        # The whole name, then each shorter path that ends it (`dunning.py` for `src/billing/dunning.py`)
        for i in range(len(segments)):
            chunks = _chunks("/".join(segments[i:]))
            if len(chunks) < 2:
                continue  # one chunk is already a term of the index as it stands
            key = "".join(chunks).lower()
            if len(key) <= _MAX_KEY and key not in keys:
                keys.append(key)
    return tuple(keys)


def compound_keys(text: str) -> list[str]:
    """Exact-match keys for the compound names in a text, each once, in order: the name joined
    (`normalizeemail`, `srcbillingdunningpy` and a path's shorter tails), a rare, high-weight
    term for an exact mention. A trailing `:LINE` is dropped."""
    out: list[str] = []
    seen: set[str] = set()
    for token in _tokens(text):
        for key in _token_keys(token):
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out
