"""The synonym table for full-text query expansion: lookup by stem, expansion without repeats."""

from __future__ import annotations

from anchorfs.store.lexicon import GROUPS, expand_words, synonyms


def test_groups_are_modest_and_lowercase_single_words() -> None:
    assert 20 <= len(GROUPS) <= 300
    for group in GROUPS:
        assert len(group) >= 2
        for word in group:
            assert word == word.lower() and " " not in word


def test_synonyms_match_inflected_forms() -> None:
    assert "raise" in synonyms("throws")  # throws -> throw, grouped with raise
    assert "delete" in synonyms("removing")
    assert "signin" in synonyms("login")
    assert synonyms("zzqx") == ()


def test_expand_words_adds_only_new_stems_once() -> None:
    extra = expand_words(["delete", "remove", "user"])
    assert "drop" in extra and "account" in extra
    assert "delete" not in extra and "remove" not in extra  # already typed
    assert len(extra) == len(set(extra))
    assert expand_words(["zzqx"]) == []
