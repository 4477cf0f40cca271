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


def test_a_store_written_row_by_row_scores_like_a_reindexed_one(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        first = ws.record("retry backoff doubles up to a minute")
        for text in TEXTS:
            ws.record(text)
        ws.supersede(first.id, "retry backoff doubles up to two minutes")
        ws.store.set_drift({first.id: "stale"})  # an update rewrites the row it touches
        queries = ["retry backoff", "cache entries", "billing queue", "tokens expire"]
        before = {q: [(h.memory.id, h.relevance) for h in ws.query(q, k=8)] for q in queries}
        assert ws.reindex() == len(TEXTS) + 2
        after = {q: [(h.memory.id, h.relevance) for h in ws.query(q, k=8)] for q in queries}
    for q in queries:
        assert [i for i, _ in before[q]] == [i for i, _ in after[q]], q
        assert [r for _, r in before[q]] == pytest.approx([r for _, r in after[q]], abs=1e-9), q


def test_past_the_sync_bound_a_write_leaves_the_folding_to_the_indexer(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import anchorfs.store as store_mod

    monkeypatch.setattr(store_mod, "TEXT_SYNC_ROWS", 4)
    store, _ = _store(tmp_path, TEXTS[:3])
    assert store.text_unindexed() == 0  # small: folded in before `add` returned
    store.add([Memory(id=new_id(), content=t) for t in TEXTS[3:6]])
    assert store._index_job is not None  # past the bound: the background indexer was started
    assert store.wait_index() == 0
    assert store.text_unindexed() == 0
    store._table = None  # the indexer's version, read afresh
    assert len(_search(store, "retry backoff queue")) == 6
