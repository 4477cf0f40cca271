"""A floor for retrieval quality on both labeled sets (evals/retrieval, Quillpay, and
evals/retrieval2, httpx 0.28.1; `load.SETS`), default embedder.

Each set is replayed into a fresh workspace and every query runs through `Workspace.query`;
hybrid MRR and recall@5 must stay at or above floors set a little below the measured figures
(docs/benchmarks.md, `## Retrieval`), so a change that makes retrieval worse fails CI. The
default embedder needs no model and is deterministic, so the figures do not wobble; nothing
here is timed. Also here: the pieces the floor rests on (exact-name keys, fusion, anchor
matches), tested on their own.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import anchorfs
from anchorfs.store.embedders import DEFAULT_EMBEDDER
from anchorfs.store.ranking import bm25_units, calibrated_relevance, calibration, coverage, term_sets
from anchorfs.store.table import embed_text, search_text
from anchorfs.core.textutil import compound_keys, search_terms

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "retrieval"))
import load  # noqa: E402  (evals/retrieval/load.py, shared with scripts/bench_retrieval.py)

# Quillpay, measured 2026-12-02 with the default (hashing) embedder on this test's build (one
# batch; the benchmark records one memory at a time and can read a little apart,
# docs/benchmarks.md), after issue 17's fifth round (BM25 from each memory's own term counts, no
# length normalization; the calibrations kept): hybrid MRR 0.825 (0.819 with LanceDB's BM25),
# recall@5 0.832 (0.827); per style 1.00 exact identifiers, 0.97 identifier parts, 0.42
# paraphrases (0.33), 0.73 questions (0.78), 1.00 paths (recall@5 0.86), 1.00 superseded wording;
# stale MRR 0.94 x fresh (74 of 97 anchored answers flagged among the hits), k-invariant 100%,
# 94% of nothing-queries clear of the floor (0.025; 97%), 87% of found answers above it (84%),
# CJK MRR 1.00. Checked again 2026-12-06 (issue 42): the same; with the 20 short queries (two-word
# topics) added that day: hybrid MRR 0.835, recall@5 0.821, short 0.88.
# httpx, measured 2026-12-06 the same way (issue 42): hybrid MRR 0.784, recall@5 0.836; per style
# 1.00 exact identifiers, 0.92 identifier parts, 0.10 paraphrases, 0.91 questions, 1.00 paths
# (recall@5 0.90), 0.80 superseded wording, 0.85 short (two-word topics); stale MRR 0.94 x fresh
# (79 of 86 anchored answers flagged), k-invariant 100%.


class Floors(NamedTuple):
    """One set's floors: its shape, then the figures it must keep."""

    queries: int
    superseded: int
    mrr: float
    recall_5: float
    path_recall_5: float
    styles: dict[str, float]  # hybrid MRR per style
    flagged: float  # share of the anchored answers flagged stale among the hits of the stale variant
    cjk_mrr: float | None  # None: the set has no CJK part


SETS = {
    "quillpay": Floors(124, 19, 0.815, 0.80, 0.83, {"exact_identifier": 0.95, "identifier_part": 0.95,
                       "paraphrase": 0.39, "question": 0.72, "path": 0.95, "superseded": 0.95, "short": 0.85}, 0.7, 0.95),
    "httpx": Floors(103, 15, 0.77, 0.82, 0.87, {"exact_identifier": 0.95, "identifier_part": 0.9,
                    "paraphrase": 0.09, "question": 0.88, "path": 0.95, "superseded": 0.78, "short": 0.83}, 0.88, None),
}
# Issue 17 (docs/benchmarks.md "Ranking an agent can trust").
FLOOR_STALE_RATIO = 0.9
# The relevance floor's figures, per floor and per set, read off each hit's relevance (a hit is
# weak when its relevance is under the floor): nothing-queries with no hit at or above it;
# found answers (the first relevant hit, where one is in the top 10) at or above it, of the
# styles issue 42 holds to 95% (`STRICT`) and of all. 0.05 is the configured floor (0.025 before): the
# one `bench_retrieval.py` fits for every embedder on both sets (issue 42; the default's own
# fit is 0.038), where the nothing-queries of both sets stay 90% clear. Measured (hashing):
# Quillpay 94% / 99% / 87% at 0.025, 97% / 95% / 80% at 0.05; httpx 73% / 99% / 89% and
# 93% / 97% / 88%. A floor configured by default must be one measured here.
STRICT = ("exact_identifier", "identifier_part", "path", "question", "superseded")
FLOOR_RATES = {  # floor -> set -> (nothing clear, strict answers above, found answers above)
    0.025: {"quillpay": (0.9, 0.97, 0.85), "httpx": (0.7, 0.97, 0.87)},
    0.05: {"quillpay": (0.94, 0.94, 0.78), "httpx": (0.9, 0.95, 0.86)},
}


class Eval(NamedTuple):
    """A set replayed once, and its fresh queries' results (k = 10)."""

    name: str
    loaded: load.Loaded
    queries: list[dict[str, Any]]
    fresh: list[load.QueryResult]


@pytest.fixture(scope="module", params=list(load.SETS))
def eval_set(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Eval]:
    """One workspace per set for every floor test of the module (building it and running its
    queries is most of their cost). Every test leaves it as it found it: the stale variant puts
    the files back and re-checks drift. HOME and the cache point into a temp folder here too
    (conftest's isolation is per test; this fixture outlives one)."""
    name, root = request.param, load.SETS[request.param]
    home = tmp_path_factory.mktemp("eval-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        for key in list(os.environ):
            if key.startswith("ANCHORFS_"):
                mp.delenv(key)
        loaded = load.build(tmp_path_factory.mktemp("eval") / "repo", embedder=DEFAULT_EMBEDDER, root=root)
        try:
            queries = load.load_queries(root)
            yield Eval(name, loaded, queries, load.run_queries(loaded, queries))
        finally:
            loaded.ws.close()


def test_default_embedder_hybrid_retrieval_stays_above_its_floor(eval_set: Eval) -> None:
    name, loaded, _, results = eval_set
    floors = SETS[name]
    assert loaded.ws.embedder.name == DEFAULT_EMBEDDER
    assert len(loaded.superseded) == floors.superseded  # the supersede pairs were replayed as such
    assert len(results) == floors.queries
    scores = load.score(results, loaded.superseded)
    assert scores.mrr >= floors.mrr, f"{name}: hybrid MRR {scores.mrr:.3f} < floor {floors.mrr} (misses: {scores.misses})"
    assert scores.recall_at_5 >= floors.recall_5, f"{name}: hybrid recall@5 {scores.recall_at_5:.3f} < floor {floors.recall_5}"
    # A retired memory is never served by a default query.
    assert scores.superseded_in_top == 0
    assert {r.style for r in results} == set(floors.styles)
    for style, floor in floors.styles.items():
        got = load.score([r for r in results if r.style == style]).mrr
        assert got >= floor, f"{name}: {style} MRR {got:.3f} < floor {floor}"
    path_recall = load.score([r for r in results if r.style == "path"]).recall_at_5
    assert path_recall >= floors.path_recall_5, f"{name}: path recall@5 {path_recall:.3f} < floor {floors.path_recall_5}"


def _answer(r: load.QueryResult) -> float | None:
    return next((rel for mid, rel in zip(r.ranked, r.relevance) if mid in r.relevant), None)


def test_stale_answers_stay_on_top_the_cut_never_depends_on_k_and_the_floor_sorts(eval_set: Eval) -> None:
    """Issue 17's guards: the answer made stale still ranks (stale MRR against fresh), the
    first j hits of k = 10 are the hits of k = j, and the relevance floor tells queries about
    nothing from real ones (issue 42: at the configured floor and at the one fitted on both sets)."""
    name, loaded, queries, fresh = eval_set
    floors = SETS[name]
    stale, stalable = load.run_stale_queries(loaded, queries)
    # the edits did stale the answers: where an anchored answer is among the hits, it is flagged
    # (the other answers, mostly paraphrases, are not in the top 10 at all)
    flagged = [r for r in stale if r.qid in stalable
               and any(d == "stale" for mid, d in zip(r.ranked, r.drift) if mid in r.relevant)]
    assert len(flagged) >= floors.flagged * len(stalable)
    nothing_queries = load.load_nothing_queries(loaded.root)
    nothing = load.run_queries(loaded, nothing_queries)
    # every real and nothing-query, each at one of k = 1, 3, 5 in turn, against its k = 10 hits
    checked, bad = load.k_invariance(loaded, [*queries, *nothing_queries], full=[*fresh, *nothing], rotate=True)
    fresh_mrr, stale_mrr = load.score(fresh).mrr, load.score(stale).mrr
    assert stale_mrr >= FLOOR_STALE_RATIO * fresh_mrr, f"{name}: stale MRR {stale_mrr:.3f} < {FLOOR_STALE_RATIO} x {fresh_mrr:.3f}"
    assert bad == [], f"{name}: k changes the first hits of {bad}"
    assert checked == len(queries) + len(nothing)
    configured = float(loaded.ws.config["search.relevance_floor"])
    assert configured in FLOOR_RATES, f"measure the floor {configured} on both sets (scripts/bench_retrieval.py)"
    # weak is the relevance under the configured floor, so any floor's figures read off the relevances
    assert all(w == (v < configured) for r in [*fresh, *nothing] for v, w in zip(r.relevance, r.weak))
    rates = load.floor_rates(fresh, nothing)
    tops = [max(r.relevance, default=0.0) for r in nothing]
    found = [(r.style, a) for r in fresh if (a := _answer(r)) is not None]
    strict = [a for style, a in found if style in STRICT]
    for floor, per_set in FLOOR_RATES.items():
        clear = sum(t < floor for t in tops) / len(tops)
        strict_above = sum(a >= floor for a in strict) / len(strict)
        found_above = sum(a >= floor for _, a in found) / len(found)
        if floor == configured:
            assert (clear, found_above) == pytest.approx((rates["nothing_clear"], rates["answered_found"]))
        got = (clear, strict_above, found_above)
        assert all(g >= want for g, want in zip(got, per_set[name])), (name, floor, got, per_set[name])
    if floors.cjk_mrr is not None:
        cjk = load.run_queries(loaded, load.load_cjk_queries(loaded.root))
        assert len(cjk) == 7 and load.score(cjk).mrr >= floors.cjk_mrr
    else:
        assert load.load_cjk_queries(loaded.root) == []


def test_score_counts_rank_recall_and_retired_hits() -> None:
    results = [
        load.QueryResult("q1", "path", ["a", "b"], ["x", "a", "b"], 0.0),
        load.QueryResult("q2", "path", ["c"], ["c"], 0.0),
        load.QueryResult("q3", "path", ["d"], ["old", "e"], 0.0),
    ]
    s = load.score(results, {"old"})
    assert s.mrr == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert s.recall_at_1 == pytest.approx((0 + 1 + 0) / 3)
    assert s.recall_at_5 == pytest.approx((1 + 1 + 0) / 3)
    assert s.superseded_in_top == pytest.approx(1 / 3)
    assert s.misses == ["q1", "q3"]


# --------------------------------------------------------------------------- the pieces


def test_compound_keys_join_exact_names_and_path_tails() -> None:
    assert compound_keys("call normalize_email first") == ["normalizeemail"]
    assert compound_keys("see src/billing/dunning.py") == ["srcbillingdunningpy", "billingdunningpy", "dunningpy"]
    # a line reference is not part of the name; a symbol after `#` is a name of its own
    assert compound_keys("config/app.toml:23") == ["configapptoml", "apptoml"]
    assert compound_keys("src/auth/token.py#TokenIssuer.issue")[-1] == "tokenissuerissue"
    # one chunk is already a term of the index: nothing to add
    assert compound_keys("getUserById and plain words.") == []


def test_search_text_carries_exact_keys_and_embed_text_stays_as_written(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "users.py").write_text("def normalize_email(e):\n    return e.lower()\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        m = ws.record("Emails go through normalize_email", tags=["users"],
                      anchors=["src/users.py#normalize_email"])
    text = search_text(m)
    assert "normalizeemail" in text.split() and "srcuserspy" in text.split()
    assert embed_text(m) == "Emails go through normalize_email\nusers\nsrc/users.py\nnormalize_email"


def test_bm25_units_count_matched_terms_the_same_in_a_table_of_any_size() -> None:
    # A memory matching two query terms held by it alone, each once: two units at any size
    # (the idf read as if the table held PRIOR_ROWS more memories without the terms).
    (doc,) = term_sets(["token expiry is 24 hours"])
    asked = frozenset(search_terms("token expiry"))
    for rows in (1, 2, 10, 300, 100_000):
        assert bm25_units(doc, asked, rows, {t: 1 for t in asked}) == pytest.approx(math.log1p(2.0))
    # two memories both holding "token": BM25's own idf gives it no weight; read as evidence it keeps most
    (token,) = search_terms("token")
    assert bm25_units(doc, {token}, 2, {token: 2}) > 0.9 * bm25_units(doc, {token}, 2, {token: 1})
    assert bm25_units(doc, set(search_terms("invoice cents")), 10, {}) == 0.0


def test_bm25_units_saturate_with_a_terms_count_and_ignore_the_memorys_length() -> None:
    short, repeated, padded = term_sets(["token expiry", "token token token expiry",
                                         "token expiry " + " ".join(f"word{i}" for i in range(200))])
    assert repeated.count(search_terms("token")[0]) == 3 and short.count("nothing") == 0
    asked = frozenset(search_terms("token expiry"))
    df = {t: 1 for t in asked}
    one = bm25_units(short, asked, 3, df)
    # b = 0: a memory 100 x longer holding the same terms once reads the same evidence
    assert bm25_units(padded, asked, 3, df) == one
    # three times "token": its weight 3 x 2.2 / 4.2 of one count (k1 = 1.2), not 3 x
    assert bm25_units(repeated, asked, 3, df) == pytest.approx(math.log1p(1 + 3 * 2.2 / 4.2))


def test_coverage_is_a_fact_of_the_pair_not_of_the_other_candidates() -> None:
    docs = term_sets(["token expiry is 24 hours", "token revoke does not check expiry yet", "invoices in cents"])
    terms = search_terms("token expiry and revoke")
    alone = [coverage(terms, [d])[0] for d in docs]
    assert coverage(terms, docs) == alone  # the same with or without neighbours
    assert alone == [pytest.approx(2 / 3), pytest.approx(1.0), 0.0]
    # a term found only as a synonym counts half ("exception" is in error's group)
    assert coverage(search_terms("error"), term_sets(["raise an exception"])) == [0.5]


def test_calibrated_relevance_grows_with_each_kind_of_evidence() -> None:
    cal = calibration(DEFAULT_EMBEDDER)
    base = (0.2, 0.5, 0.2, 0.0, 0.0)
    p0 = calibrated_relevance(base, cal, vector_weight=1.0, text_weight=0.5)
    weights = (cal.vec_cos, cal.text_bm25, cal.text_cover, cal.anchor_file, cal.anchor_exact)
    assert all(w >= 0 for w in weights)  # evidence only ever adds (the fit drops a negative one)
    for i in range(5):
        more = list(base)
        more[i] += 0.5 if i < 3 else 1.0
        got = calibrated_relevance(more, cal, vector_weight=1.0, text_weight=0.5)
        assert got > p0 if weights[i] > 0 else got == pytest.approx(p0)
    # a side weighted 0 brings no evidence
    assert calibrated_relevance((0.9, *base[1:]), cal, vector_weight=0.0, text_weight=0.5) == pytest.approx(
        calibrated_relevance(base, cal, vector_weight=0.0, text_weight=0.5))


def test_query_naming_a_line_prefers_the_memory_anchored_there(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "config").mkdir(parents=True)
    (root / "config" / "app.toml").write_text("".join(f"key_{i} = {i}\n" for i in range(1, 31)))
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("config/app.toml sets the CORS origins", anchors=["config/app.toml:9"])
        ws.record("config/app.toml holds every setting of the app", anchors=["config/app.toml"])
        target = ws.record("access tokens expire after 15 minutes", anchors=["config/app.toml:22-24"])
        ws.record("an unrelated memory about invoices")
        hits = ws.query("config/app.toml:23")
        assert hits[0].memory.id == target.id
        # the file alone: every memory anchored to it comes before the unrelated one
        ids = [h.memory.id for h in ws.query("app.toml")]
        assert len(ids) == 4 and ids[-1] not in {h.memory.id for h in hits[:3]}
