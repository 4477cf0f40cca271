from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorfs.core.textutil import (
    _ASCII_PART_RE,
    _split_unicode_chunk,
    expand_for_search,
    identifier_parts,
    words,
)


@pytest.mark.parametrize(
    ("token", "parts"),
    [
        # camelCase / PascalCase
        ("getUserById", ["get", "user", "by", "id"]),
        ("TokenIssuer", ["token", "issuer"]),
        ("parseHTTPResponse", ["parse", "http", "response"]),
        # acronyms, and an acronym's plural kept whole
        ("HTTPServer2", ["http", "server", "2"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("userID", ["user", "id"]),
        ("HTTP", ["http"]),
        ("JWTs", ["jwts"]),
        ("getURLsFor", ["get", "urls", "for"]),
        # digits
        ("sha256", ["sha", "256"]),
        ("v2Api", ["v", "2", "api"]),
        ("x86_64", ["x", "86", "64"]),
        ("2FA", ["2", "fa"]),
        # snake, SCREAMING_SNAKE, dunder, kebab
        ("snake_case_name", ["snake", "case", "name"]),
        ("MAX_RETRY_COUNT", ["max", "retry", "count"]),
        ("__init__", ["init"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        # dotted names, paths, anchors, C++/Rust paths
        ("TokenIssuer.issue", ["token", "issuer", "issue"]),
        ("auth/token.py", ["auth", "token", "py"]),
        ("src\\win\\Path.cs", ["src", "win", "path", "cs"]),
        ("auth/token.py#TokenIssuer.issue", ["auth", "token", "py", "token", "issuer", "issue"]),
        ("std::vector::pushBack", ["std", "vector", "push", "back"]),
        # plain words and nothing
        ("user", ["user"]),
        ("a", ["a"]),
        ("", []),
        ("___", []),
        ("--", []),
    ],
)
def test_identifier_parts(token: str, parts: list[str]) -> None:
    assert identifier_parts(token) == parts


@pytest.mark.parametrize(
    ("token", "parts"),
    [
        ("naïveÉtude", ["naïve", "étude"]),
        ("Über_größe", ["über", "größe"]),
        ("ΑλφαΒήτα", ["αλφα", "βήτα"]),
        ("日本語Server", ["日本語", "server"]),
        ("user用户", ["user", "用户"]),
        # Devanagari vowel signs are combining marks, not separators.
        ("हिन्दी_text", ["हिन्दी", "text"]),
    ],
)
def test_identifier_parts_unicode(token: str, parts: list[str]) -> None:
    assert identifier_parts(token) == parts


def test_identifier_parts_decomposed_accents_equal_composed() -> None:
    decomposed = unicodedata.normalize("NFD", "étéFini")
    assert decomposed != "étéFini"
    assert identifier_parts(decomposed) == ["été", "fini"]
    assert identifier_parts(decomposed) == identifier_parts("étéFini")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aAbBsSzZxX0189", min_size=1, max_size=12))
def test_ascii_fast_path_agrees_with_unicode_rules(chunk: str) -> None:
    fast = tuple(part.lower() for part in _ASCII_PART_RE.findall(chunk))
    assert fast == _split_unicode_chunk(chunk)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_identifier_parts_are_lowercase_alphanumeric(text: str) -> None:
    for part in identifier_parts(text):
        assert part
        assert part == part.lower()
        assert any(ch.isalnum() for ch in part)


def test_words_keep_whole_identifier_then_parts() -> None:
    assert words("Call getUserById in auth/token.py.") == [
        "call",
        "getuserbyid",
        "get",
        "user",
        "by",
        "id",
        "in",
        "auth/token.py",
        "auth",
        "token",
        "py",
    ]


def test_words_plain_text_and_punctuation() -> None:
    assert words("The END, (finally)!") == ["the", "end", "finally"]
    assert words("a ___ b") == ["a", "b"]
    assert words("") == []
    assert words("token expiry is 24h") == ["token", "expiry", "is", "24h", "24", "h"]
    # A trailing or leading joiner is punctuation, not part of the token.
    assert words("--flag value.") == ["flag", "value"]


def test_words_unicode() -> None:
    assert words("Größe des Caches") == ["größe", "des", "caches"]


def test_expand_for_search_keeps_original_first_and_adds_parts() -> None:
    text = "getUserById reads auth/token.py"
    expanded = expand_for_search(text)
    assert expanded.startswith(text)
    added = expanded[len(text) :].split()
    assert added == ["get", "user", "by", "id", "auth", "token", "py"]


def test_expand_for_search_does_not_duplicate() -> None:
    text = "getUserById and get_user_by_id: the user row"
    expanded = expand_for_search(text)
    assert expanded.startswith(text)
    added = expanded[len(text) :].split()
    # `user` is already a word of the text; each other part comes once.
    assert added == ["get", "by", "id"]
    assert len(added) == len(set(added))


def test_expand_for_search_plain_text_unchanged() -> None:
    for text in ["token expiry is one day.", "", "   ", "naïve café"]:
        assert expand_for_search(text) == text


def test_expand_for_search_every_part_reachable() -> None:
    text = "Bump MAX_RETRY_COUNT in HTTPServer2 (see TokenIssuer.issue)"
    tokens = set(expand_for_search(text).lower().replace("(", " ").replace(")", " ").split())
    for part in ["max", "retry", "count", "http", "server", "2", "token", "issuer", "issue"]:
        assert part in tokens
