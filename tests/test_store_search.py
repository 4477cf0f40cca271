"""The store's search path (issue 19): both sides at once, candidates built only when read,
and a full-text index kept current so relevance does not depend on the index's history."""

from __future__ import annotations

from pathlib import Path

import pytest

import anchorfs
from anchorfs.embedders import HashingEmbedder
from anchorfs.model import Memory, new_id
from anchorfs.store import Store


def _store(tmp_path: Path, texts: list[str]) -> tuple[Store, list[Memory]]:
    store = Store(tmp_path, HashingEmbedder())
    mems = [Memory(id=new_id(), content=t) for t in texts]
    store.add(mems)
    return store, mems


def _search(store: Store, text: str, **kw: float) -> list[tuple[str, float]]:
    weights = {"vector_weight": 1.0, "text_weight": 1.0, **kw}
    rows = store.search(text, store.embedder.embed_query(text), k=20, where="status = 'active'", candidates=10,
                        rrf_k=60.0, **weights)
    return [(r.memory.id, r.relevance) for r in rows]


TEXTS = [f"retry backoff step {i} for the {w} queue" for i, w in enumerate(["billing", "email", "render"] * 4)] + [
    "the cache is an lru with 1000 entries", "tokens expire after 24h", "sessions live in redis"]


def test_candidates_are_ranked_by_relevance_then_id_and_read_lazily(tmp_path: Path) -> None:
    store, mems = _store(tmp_path, TEXTS)
    by_id = {m.id: m for m in mems}
    rows = store.search("retry backoff queue", store.embedder.embed_query("retry backoff queue"), k=20,
                        where="status = 'active'", candidates=10, rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
    assert len(rows) == len(TEXTS)
    assert [(-r.relevance, r.memory.id) for r in rows] == sorted((-r.relevance, r.memory.id) for r in rows)
    assert all(r.score == r.relevance for r in rows)
    for r in rows:  # the memory built from the row's JSON is the one written
        assert r.memory.to_dict() == by_id[r.memory.id].to_dict()
    # a text-only or vector-only search gives the same candidates' memories, each side alone
    assert {i for i, _ in _search(store, "retry backoff queue", vector_weight=0.0)} <= set(by_id)
    assert {i for i, _ in _search(store, "retry backoff queue", text_weight=0.0)} <= set(by_id)


def test_term_sets_kept_between_queries_give_the_same_answers(tmp_path: Path) -> None:
    store, _ = _store(tmp_path, TEXTS)
    first = _search(store, "cache entries lru")
    assert store._terms  # the candidates' term sets are kept
    assert _search(store, "cache entries lru") == first
    store._terms.clear()
    assert _search(store, "cache entries lru") == first
