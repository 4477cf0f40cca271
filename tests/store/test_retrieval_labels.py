"""The labeled sets' own rules, checked on their files (evals/retrieval/README.md and
evals/retrieval2/README.md), for both sets (`load.SETS`).

A label the set's rules call wrong skews every figure measured on it: a path query whose
answer list leaves out a memory anchored to that very file counts a correct first hit as a
miss (the Chinese and Japanese memories, added later, were left out of the three path
queries naming the files they are anchored to).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anchorfs.core.textutil import _QUIET, _stem, words
from anchorfs.store.embedders import _STOPWORDS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "retrieval"))
import load  # noqa: E402  (evals/retrieval/load.py)

# name -> (path queries naming a whole file, paraphrase queries, superseded memories, short queries)
SHAPE = {"quillpay": (13, 23, 19, 20), "httpx": (11, 16, 15, 17)}
# Paraphrases of the first set that share a word with their answer under the rule below: each
# a function word that a standard English stopword list drops and the project's lists keep.
# The first set's README names no list ("dropping stopwords"); the second's names these two.
SHARED_STOPWORD = {"quillpay": {"q037": {"befor"}, "q048": {"after"}, "q053": {"each"}}, "httpx": {}}

sets = pytest.mark.parametrize("name", list(load.SETS))


def _anchored_path(spec: str) -> str:
    """The file of an anchor spec (`PATH`, `PATH#SYM`, `PATH:N-M`)."""
    path = spec.split("#", 1)[0]
    head, sep, tail = path.rpartition(":")
    return head if sep and tail.replace("-", "").isdigit() else path


def _terms(text: str) -> set[str]:
    """The paraphrase rule's terms (evals/retrieval2/README.md): `textutil.words` (whole tokens
    and their camelCase and snake_case parts, lowercased), stopwords (`textutil._QUIET` and
    `embedders._STOPWORDS`) and one-letter terms dropped, each stemmed with `textutil._stem`."""
    return {_stem(w) for w in words(text) if w not in _QUIET and w not in _STOPWORDS and len(w) > 1}


@sets
def test_a_path_query_counts_every_active_memory_anchored_to_its_file(name: str) -> None:
    root = load.SETS[name]
    memories = load.load_memories(root=root)  # the CJK ones included, as the benchmark loads them
    retired = {m["supersedes"] for m in memories if m.get("supersedes")}
    checked = 0
    for q in load.load_queries(root):
        if q["style"] != "path" or ":" in q["query"]:
            continue  # a line query (`config/app.toml:23`) asks about those lines only
        anchored = {m["id"] for m in memories if m["id"] not in retired
                    and any(_anchored_path(a) == q["query"] for a in m["anchors"])}
        assert anchored <= set(q["relevant"]), (q["id"], sorted(anchored - set(q["relevant"])))
        checked += 1
    assert checked == SHAPE[name][0]


@sets
def test_no_query_lists_a_retired_or_unknown_memory_as_relevant(name: str) -> None:
    root = load.SETS[name]
    memories = load.load_memories(root=root)
    ids = {m["id"] for m in memories}
    retired = {m["supersedes"] for m in memories if m.get("supersedes")}
    assert len(retired) == SHAPE[name][2]
    queries = [*load.load_queries(root), *load.load_cjk_queries(root)]
    for q in queries:
        assert set(q["relevant"]) <= ids - retired, q["id"]
        assert q["relevant"], q["id"]
    assert {q["style"] for q in load.load_queries(root)} <= set(load.STYLES)
    assert len({q["id"] for q in queries}) == len(queries)
    assert all(q["relevant"] == [] and q["style"] == "nothing" for q in load.load_nothing_queries(root))


@sets
def test_a_paraphrase_shares_no_term_with_the_memories_that_answer_it(name: str) -> None:
    root = load.SETS[name]
    by_id = {m["id"]: m for m in load.load_memories(root=root)}
    shared: dict[str, set[str]] = {}
    paraphrases = [q for q in load.load_queries(root) if q["style"] == "paraphrase"]
    for q in paraphrases:
        asked = _terms(q["query"])
        for mid in q["relevant"]:
            m = by_id[mid]
            common = asked & (_terms(m["content"]) | _terms(" ".join(m["tags"])))
            if common:
                shared.setdefault(q["id"], set()).update(common)
    assert len(paraphrases) == SHAPE[name][1]
    assert shared == SHARED_STOPWORD[name]


@sets
def test_a_short_query_is_a_topic_of_two_or_three_words(name: str) -> None:
    """Issue 42, item 4: both sets measure two-word topic queries ("token expiry") as a style."""
    short = [q for q in load.load_queries(load.SETS[name]) if q["style"] == "short"]
    assert len(short) == SHAPE[name][3]
    assert all(2 <= len(q["query"].split()) <= 3 for q in short), [q["query"] for q in short]
    assert len({q["query"].lower() for q in short}) == len(short)
