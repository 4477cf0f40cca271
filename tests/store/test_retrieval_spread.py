"""The store-size spread (`scripts/bench_retrieval.py`, issue 17) keeps the evidence behind
each relevance it reports, so another calibration's spread is read off the same stores.

A fit is compared with the configured one on one measured run (no second run of 40 minutes
with a model embedder): that holds only if the features kept at each store size are exactly
the ones the reported relevance came from. Real stores, default embedder, no timing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anchorfs.store.ranking import calibration

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_retrieval  # noqa: E402

import load  # noqa: E402  (evals/retrieval/load.py, put on the path by bench_retrieval)


@pytest.fixture(scope="module")
def sizes() -> dict:
    # every 40th query: three queries, each in stores of 1, 2, 10 and 200 memories
    return bench_retrieval.size_band("hashing", load.load_queries(), every=40)


def _weights(name: str) -> list[float]:
    c = calibration(name)
    return [c.intercept, c.vec_cos, c.text_bm25, c.text_cover, c.anchor_file, c.anchor_exact]


def test_kept_evidence_gives_back_the_reported_relevance(sizes: dict) -> None:
    assert sizes["n"] == 3
    assert [q["qid"] for q in sizes["per_query"]] == ["q001", "q041", "q081"]
    for q in sizes["per_query"]:
        assert len(q["features"]) == len(q["relevance"]) == len(bench_retrieval.SIZES)
        assert all(len(f) == 5 for f in q["features"])
    same = bench_retrieval.spread_under(sizes, _weights("hashing"))
    assert same["n"] == sizes["n"]
    assert same["max"] == pytest.approx(sizes["max"], abs=1e-9)
    assert same["median"] == pytest.approx(sizes["median"], abs=1e-9)


def test_another_fit_reads_another_spread(sizes: dict) -> None:
    flat = bench_retrieval.spread_under(sizes, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # 0.5 whatever the evidence
    assert flat["max"] == 0.0 and flat["n"] == 3
    bm25_only = bench_retrieval.spread_under(sizes, [-4.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    assert bm25_only["max"] > 0.1


def test_only_the_document_frequencies_move_an_answer_with_the_store_size(sizes: dict) -> None:
    """BM25 from the memory's own term counts (no length normalization against the table's
    average): of the evidence, only BM25 moves with the store, and only down, as the query's
    terms are held by more memories. With LanceDB's BM25, `q081`'s answer (2.6 x the average
    length) read 3.0 units alone and 2.3 among 200, a spread of 0.20; now 0.07."""
    for q in sizes["per_query"]:
        first = q["features"][0]
        for f in q["features"][1:]:
            assert f[:1] + f[2:] == first[:1] + first[2:], q["qid"]
        bm25 = [f[1] for f in q["features"]]
        assert bm25 == sorted(bm25, reverse=True), q["qid"]
    # measured 2026-12-02: q001 0.047, q041 0.034, q081 0.068
    assert sizes["max"] <= 0.08, [(q["qid"], q["relevance"]) for q in sizes["per_query"]]


def test_parse_fit() -> None:
    assert bench_retrieval.parse_fit("old=-10.178,2.249,2.228,4.17,0.545,1.884") == (
        "old", [-10.178, 2.249, 2.228, 4.17, 0.545, 1.884])
    with pytest.raises(SystemExit):
        bench_retrieval.parse_fit("old=1,2,3")
