"""The store's search path (issue 19): both sides at once, candidates built only when read,
and a full-text index kept current so relevance does not depend on the index's history."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

import pytest

import anchorfs
from anchorfs.store.embedders import HashingEmbedder
from anchorfs.core.model import Memory, new_id
from anchorfs.store.table import Store


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
    import anchorfs.store.table as store_mod

    monkeypatch.setattr(store_mod, "TEXT_SYNC_ROWS", 4)
    monkeypatch.setattr(store_mod, "TEXT_LAG_ROWS", 2)
    store, _ = _store(tmp_path, TEXTS[:3])
    assert store.text_unindexed() == 0  # small: folded in before `add` returned
    store.add([Memory(id=new_id(), content=t) for t in TEXTS[3:6]])
    assert store._index_job is not None  # past the bound: the background indexer was started
    assert store.wait_index() == 0
    assert store.text_unindexed() == 0
    store._table = None  # the indexer's version, read afresh
    assert len(_search(store, "retry backoff queue")) == 6



def test_past_the_sync_bound_writes_append_and_the_text_index_is_folded_once_rows_pile_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Folding a write's rows into the full-text index is an `optimize`, whose compaction
    rewrites every fragment under a million rows (kept 5 minutes for other readers): done at
    every write past the sync bound, a bulk load of 100,000 memories in batches of 1,000 left
    the folder at 24x its live data. Now a write appends its fragment alone while the rows the
    index lacks stay within `TEXT_LAG_ROWS` (searched flat meanwhile, found all the same); past
    it the indexer builds the full-text index again, its files alone."""
    import anchorfs.store.table as store_mod

    monkeypatch.setattr(store_mod, "TEXT_SYNC_ROWS", 4)
    monkeypatch.setattr(store_mod, "TEXT_LAG_ROWS", 3)
    store, _ = _store(tmp_path, TEXTS[:4])  # within the sync bound: indexed before `add` returned
    data = store.path / "data"
    files = set(data.iterdir())
    store.add([Memory(id=new_id(), content=t) for t in TEXTS[4:6]])
    assert store._index_job is None  # 2 rows behind: no fold
    now = set(data.iterdir())
    assert files <= now and len(now - files) == 1  # the append's file, nothing rewritten
    assert store.text_unindexed() == 2
    assert len(_search(store, "retry backoff queue")) == 6  # the unindexed rows are found
    store.add([Memory(id=new_id(), content=t) for t in TEXTS[6:8]])
    assert store._index_job is not None  # 4 behind, past 3: folded in the background
    written = set(data.iterdir())
    assert store.wait_index() == 0
    assert set(data.iterdir()) == written  # the index built again: no fragment rewritten
    store._table = None  # the indexer's version, read afresh
    assert store.text_unindexed() == 0
    assert len(_search(store, "retry backoff queue")) == 8

# -- issue 19, third round: what a query reads at 100,000 rows ------------------------------

def _indexed_columns(store: Store) -> dict[str, str]:
    return {c: str(i.index_type) for i in store.table().list_indices() for c in i.columns}


def test_the_status_prefilter_has_a_bitmap_index_and_a_store_without_one_answers_the_same(tmp_path: Path) -> None:
    store, mems = _store(tmp_path, TEXTS)
    assert _indexed_columns(store).get("status") == "Bitmap"  # built with the table
    store.set_drift({mems[0].id: "stale"})  # rows rewritten after the index: filtered by a scan
    with_index = {q: _search(store, q) for q in ("retry backoff queue", "cache entries lru", "tokens")}
    store.table().drop_index("status_idx")  # a store made before the index
    store._status_indexed = False
    assert "status" not in _indexed_columns(store)
    assert {q: _search(store, q) for q in with_index} == with_index
    store.maybe_compact(force=True)  # the next write's compaction builds it
    assert _indexed_columns(store).get("status") == "Bitmap"
    assert {q: _search(store, q) for q in with_index} == with_index


class _Spy:
    """The store's table, recording each search's projection and each read by row id."""

    def __init__(self, table: object) -> None:
        self._t = table
        self.selects: list[list[str]] = []
        self.taken: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._t, name)

    def search(self, *args: object, **kw: object) -> object:
        spy = self

        class Builder:
            def __init__(self, inner: object) -> None:
                self._b = inner

            def __getattr__(self, name: str) -> object:
                attr = getattr(self._b, name)
                if not callable(attr):
                    return attr

                def call(*a: object, **k: object) -> object:
                    if name == "select":
                        spy.selects.append(list(a[0]))  # type: ignore[call-overload]
                    out = attr(*a, **k)
                    return Builder(out) if type(out).__module__.startswith("lancedb") else out
                return call

        return Builder(self._t.search(*args, **kw))  # type: ignore[attr-defined]

    def take_row_ids(self, ids: list[int], *a: object, **kw: object) -> object:
        self.taken.append(len(ids))
        return self._t.take_row_ids(ids, *a, **kw)  # type: ignore[attr-defined]


def test_a_search_reads_memories_json_only_for_the_rows_read(tmp_path: Path) -> None:
    texts = [f"retry backoff queue item {i} for {w}" for i, w in enumerate(["billing", "email", "render"] * 20)]
    store, mems = _store(tmp_path, texts)
    by_id = {m.id: m for m in mems}
    spy = _Spy(store.table())
    store._table = spy
    q = "retry backoff queue"
    rows = store.search(q, store.embedder.embed_query(q), k=40, where="status = 'active'", candidates=20,
                        rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
    assert len(rows) == 40
    assert spy.selects and all("doc" not in cols for cols in spy.selects), spy.selects  # neither side reads it
    assert spy.taken == []  # nothing read yet
    assert rows[0].memory.to_dict() == by_id[rows[0].memory.id].to_dict()
    assert spy.taken == [16]  # the best 16, at the first read: the drift pass reads them in order
    for r in rows[:16]:
        assert r.memory.to_dict() == by_id[r.memory.id].to_dict()
    assert spy.taken == [16]
    assert rows[30].memory.to_dict() == by_id[rows[30].memory.id].to_dict()
    assert len(spy.taken) == 2
    # with the fold the table was written from, a candidate's memory is that one: no read at all
    first = [(r.memory.id, r.relevance) for r in rows]
    spy.taken.clear()
    held = {m.id: m for m in mems}
    again = store.search(q, store.embedder.embed_query(q), k=40, where="status = 'active'", candidates=20,
                         rrf_k=60.0, vector_weight=1.0, text_weight=1.0, memories=held)
    assert [(r.memory.id, r.relevance) for r in again] == first
    assert all(r.memory is held[r.memory.id] for r in again)
    assert spy.taken == []


def test_a_row_rewritten_after_the_search_is_still_read_right(tmp_path: Path) -> None:
    store, mems = _store(tmp_path, TEXTS)
    by_id = {m.id: m for m in mems}
    q = "retry backoff queue"
    rows = store.search(q, store.embedder.embed_query(q), k=20, where="status = 'active'", candidates=10,
                        rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
    # every row rewritten (new row ids) and the table compacted before any memory is read
    store.set_drift({m.id: "stale" for m in mems})
    store.maybe_compact(force=True)
    assert [r.memory.to_dict() for r in rows] == [by_id[r.memory.id].to_dict() for r in rows]


def test_a_memorys_bm25_evidence_is_its_own_whatever_the_length_of_its_neighbours(tmp_path: Path) -> None:
    """BM25 read from the memory's own term counts (no length normalization against the
    table's average): the store-size spread of issue 17 came from that average moving."""
    target = "token expiry is 24 hours"
    short = "invoices are stored in cents"
    long = short + " " + " ".join(f"filler{i} word{i}" for i in range(60))
    got = []
    for name, filler in (("short", short), ("long", long)):
        store, mems = _store(tmp_path / name, [target, filler])
        rows = store.search("token expiry", store.embedder.embed_query("token expiry"), k=5,
                            where="status = 'active'", candidates=10, rrf_k=60.0, vector_weight=1.0,
                            text_weight=0.5)
        got.append(next(r.features for r in rows if r.memory.id == mems[0].id))
    assert got[0] == got[1]
    # two query terms held once each, by this memory alone: two units of one rare matched term
    assert got[0][1] == pytest.approx(math.log1p(2.0))


def test_vectors_held_by_a_process_that_queries_twice_answer_as_lancedb_does(tmp_path: Path) -> None:
    """A server's second query at one table version reads the vectors it holds (`search.flat`):
    the same ranking as LanceDB's scan, each filter kept, and a write starts it over."""
    from anchorfs.store import search

    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
    texts = TEXTS + [f"the {a} {b} worker's retry queue" for a, b in combinations(words, 2)]  # no two alike
    store, mems = _store(tmp_path, texts)  # more rows than a side's 50 candidates
    other = Store(tmp_path, HashingEmbedder())  # a one-shot process: every query its first
    queries = ["retry backoff queue", "cache entries lru", "when do tokens expire", "redis"]
    first = [_search(store, q) for q in queries]
    assert store._flat[0] is not None  # held from the second query at that version on
    version = store._flat[0].version
    for q, want in zip(queries, first):
        assert _search(store, q) == want  # `first` was LanceDB's: each query its version's first
        vec = store.embedder.embed_query(q)
        mine = store._flat[0].side(vec, "status = 'active'", 30)
        theirs = other.vector_query(vec, "status = 'active'").select(["id", "_distance"]).limit(30).to_arrow()
        assert len(mine) >= len(theirs) == 30  # and any tied with the 30th
        assert sorted(mine.column("_distance").to_pylist())[:30] == pytest.approx(
            sorted(theirs.column("_distance").to_pylist()), abs=1e-6)
    gone = mems[0].replace(status="superseded")
    store.upsert([gone])  # a new version: LanceDB answers once, then the vectors are held again
    for _ in range(2):
        ids = [i for i, _ in _search(store, "retry backoff queue", text_weight=0.0)]
        assert gone.id not in ids and len(ids) == 20
    assert store._flat[0].version > version
    held = search.flat(store, store.table(), "status != 'proposed'")
    assert held is store._flat[0]
    every = held.side(store.embedder.embed_query("retry"), "status != 'proposed'", 1000).column("id").to_pylist()
    assert gone.id in every and len(every) == len(texts)
    assert search.flat(store, store.table(), "id IN ('x')") is None  # a filter it does not know: LanceDB's


def test_held_rows_answer_the_full_text_side_and_the_docs_as_lancedb_does(tmp_path: Path) -> None:
    """Once held, a full-text query reads only scores and row ids; the rows, their docs and the
    ranking are the held ones, equal to what a one-shot process reads from LanceDB."""
    import pyarrow as pa

    texts = TEXTS + [f"the {w} worker of src/jobs/{w}.py retries" for w in ("alpha", "bravo", "charlie")]
    store, mems = _store(tmp_path, texts)
    other = Store(tmp_path, HashingEmbedder())  # a one-shot process: every query its first
    queries = ["retry backoff queue", "what does src/jobs/alpha.py retry", "redis sessions"]
    for q in queries:
        _search(store, q)
    held = store._flat[0]
    assert held is not None and held.version == store.table().version
    for q in queries:
        mine = store.search(q, store.embedder.embed_query(q), k=20, where="status = 'active'", candidates=10,
                            rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
        theirs = other.search(q, other.embedder.embed_query(q), k=20, where="status = 'active'", candidates=10,
                              rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
        assert [(r.memory.to_dict(), r.relevance, r.features) for r in mine] == [
            (r.memory.to_dict(), r.relevance, r.features) for r in theirs]
        assert other._flat[0] is None  # each of its queries was LanceDB's
        other._flat = None
    scored = store.table().search("retry", query_type="fts", fts_columns="text").select(["_score"]).with_row_id(
        True).limit(5).to_arrow()
    rows = held.rows(scored)
    assert rows is not None and rows.column("_score").to_pylist() == scored.column("_score").to_pylist()
    assert all("retry" in t for t in rows.column("text").to_pylist())
    unknown = pa.table({"_rowid": pa.array([max(held.at) + 1], pa.uint64()), "_score": pa.array([1.0], pa.float32())})
    assert held.rows(unknown) is None  # a row written after the held version: LanceDB reads the side again
