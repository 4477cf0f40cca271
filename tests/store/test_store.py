"""The LanceDB store: embedder pinning, re-embedding skipped by content hash, compaction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import drift_column

import anchorfs
from anchorfs.store.embedders import HashingEmbedder
from anchorfs.core.errors import EmbedderError
from anchorfs.core.model import Memory, Status, new_id
from anchorfs.store.table import Store, embed_text


class CountingEmbedder(HashingEmbedder):
    """The default embedder, counting the documents it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.embedded += len(texts)
        return super().embed_documents(texts)


def mem(text: str) -> Memory:
    return Memory(id=new_id(), content=text)


def test_opening_with_another_embedder_points_at_reindex(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("the cache lives in redis")
    with anchorfs.open(root, embedder="e5") as ws:
        with pytest.raises(EmbedderError, match=r"anchorfs reindex --embedder e5"):
            ws.query("cache")
    with anchorfs.open(root, embedder="e5") as ws:
        assert ws.reindex(embedder="e5") == 1
        assert ws.store.stored_embedder() == "e5"
        assert [h.memory.content for h in ws.query("where is the cache kept", k=1)] == ["the cache lives in redis"]
    with anchorfs.open(root) as ws:  # no embedder chosen: the one the table was built with (issue 16)
        assert ws.embedder.name == "e5"
        assert [h.memory.content for h in ws.query("cache", k=1)] == ["the cache lives in redis"]
    (root / ".anchorfs.toml").write_text('embedder = "hashing"\n')
    with anchorfs.open(root) as ws:  # a chosen embedder that disagrees with the table: the way out named
        with pytest.raises(EmbedderError, match=r"built with embedder 'e5'.*`embedder =`.*ANCHORFS_EMBEDDER=e5"):
            ws.query("cache")


def test_upsert_skips_re_embedding_unchanged_text(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    store = Store(tmp_path, emb)
    a, b = mem("alpha beta"), mem("gamma delta")
    store.add([a, b])
    assert emb.embedded == 2
    store.upsert([a.replace(status=Status.SUPERSEDED.value)])  # status only: same searchable text
    assert emb.embedded == 2
    store.upsert([b.replace(content="gamma delta epsilon")])
    assert emb.embedded == 3
    assert store.count() == 2
    assert store.count("status = 'superseded'") == 1


def test_compaction_folds_fragments(tmp_path: Path) -> None:
    store = Store(tmp_path, HashingEmbedder(), compact_fragments=5)
    store.settle_writes = False  # as `reindex` loads: compaction by fragment count alone
    for i in range(4):
        store.add([mem(f"note {i}")])
    fragments = store.table().stats()["fragment_stats"]["num_fragments"]
    assert fragments == 4
    store.add([mem("note 4")])  # the fifth fragment triggers compaction
    assert store.table().stats()["fragment_stats"]["num_fragments"] == 1
    assert store.count() == 5


def test_set_drift_and_drift_map(tmp_path: Path) -> None:
    store = Store(tmp_path, HashingEmbedder())
    a, b = mem("one"), mem("two")
    store.add([a, b])
    assert drift_column(store) == {a.id: "fresh", b.id: "fresh"}
    version = store.table().version
    store.settle_writes = False
    store.set_drift({a.id: "stale"})
    assert drift_column(store) == {a.id: "stale", b.id: "fresh"}
    assert store.table().version == version + 1  # one update per drift value
    store.settle_writes = True
    store.set_drift({a.id: "unknown", b.id: "unknown"})
    assert drift_column(store) == {a.id: "unknown", b.id: "unknown"}
    assert store.text_unindexed() == 0  # the rewritten rows folded back into the full-text index


def test_search_returns_cosine_similarity_and_fused_relevance(tmp_path: Path) -> None:
    emb = HashingEmbedder()
    store = Store(tmp_path, emb)
    target, other = mem("getUserById returns the user row"), mem("invoices are sent monthly")
    store.add([target, other])
    q = emb.embed_query("user")
    rows = store.search("user", q, k=2, where=None, candidates=10, rrf_k=60.0, vector_weight=1.0, text_weight=1.0)
    assert rows[0].memory.id == target.id
    expected = float(np.dot(q, emb.embed_documents([embed_text(target)])[0]))
    assert rows[0].similarity == pytest.approx(expected, abs=1e-5)
    assert 0 < rows[0].relevance <= 1
    assert rows[0].relevance > rows[1].relevance


def test_drop_removes_the_table(tmp_path: Path) -> None:
    store = Store(tmp_path, HashingEmbedder())
    store.add([mem("x")])
    assert store.exists()
    store.drop()
    assert not store.exists()
    assert store.count() == 0


def test_anchored_code_words_reach_the_full_text_index_and_survive_reindex(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "retry.py").write_text(
        "def next_attempt(state):\n    # exponential backoff with jitter\n    return state.delay * 2\n"
    )
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        target = ws.record("retries wait longer each time", anchors=["src/retry.py#next_attempt"])
        ws.record("an unrelated memory about invoices")
        ws.config.values["search.vector_weight"] = 0.0  # full-text alone: only the code has "jitter"
        assert [h.memory.id for h in ws.query("jitter")] == [target.id]
        (root / "src" / "retry.py").unlink()  # a vanished file: reindex still works, adds nothing
        assert ws.reindex() == 2
        assert ws.query("jitter") == []


def test_query_naming_a_file_finds_a_memory_naming_what_it_defines(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ledger.py").write_text("class LedgerWriter:\n    def append_entry(self):\n        pass\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        named = ws.record("LedgerWriter.append_entry fsyncs before it returns")  # no anchor
        for i in range(5):
            ws.record(f"src/ledger notes number {i} about something else")
        assert ws.query("src/ledger.py", k=3)[0].memory.id == named.id


def test_synonyms_widen_the_full_text_query(tmp_path: Path) -> None:
    """`email` also asks for `mail`, `e-mail` and `inbox`, with punctuation kept out of the
    full-text query as it is for the typed words."""
    from anchorfs.store.ranking import fts_query as _fts_query

    assert _fts_query("email") == "email mail e mail inbox"
    assert _fts_query("zzqx") == "zzqx"  # nothing to add: the typed words as they were
    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        target = ws.record("the nightly digest goes out through the mail relay")
        for i in range(5):
            ws.record(f"unrelated fact number {i} about caching")
        ws.config.values["search.vector_weight"] = 0.0  # full-text alone: only a synonym can match
        assert [h.memory.id for h in ws.query("email")] == [target.id]


def test_reindex_waits_for_a_background_indexer_before_it_drops_the_table(tmp_path: Path) -> None:
    """A write past `store.index_rows` leaves a detached indexer building in the table's folder;
    a `reindex` then must not delete the folder under it (seen: `rmtree` failing with
    "Directory not empty: '_indices'" at 100,000 rows) nor keep what it wrote after: it waits
    for the indexer's lock, and no indexer starts while it rebuilds."""
    import subprocess
    import sys
    import time

    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": f"memory number {i} about caches"} for i in range(20)])
    state = root / ".anchorfs"
    late = state / "memories.lance" / "_indices" / "late-build"
    # an indexer: holds index.lock, still writing into the table's folder when it lets go
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(state / 'index.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(0.8)\n"
        f"os.makedirs({str(late)!r}, exist_ok=True)\n"
        f"open(os.path.join({str(late)!r}, 'part'), 'w').write('x')\n"
    )], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with anchorfs.open(root) as ws:
            assert ws.reindex() == 20
            waited = time.monotonic() - started
            assert holder.poll() is not None  # the indexer was done before the table was dropped
            assert [h.memory.content for h in ws.query("memory number 7", k=1)] == ["memory number 7 about caches"]
    finally:
        holder.wait(timeout=30)
    assert waited > 0.5
    assert not late.exists()  # what the indexer wrote went with the old table
