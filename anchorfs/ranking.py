"""Relevance: how well one memory matches one query, as a calibrated probability in [0, 1].

`Store.search` fetches candidates from LanceDB (full-text and vector sides); this module
turns each candidate's evidence into a relevance and orders them. Every feature is a fact of
the (query, memory) pair alone, never of the other candidates, so a memory reads about the
same relevance in a store of one memory as in one of thousands (a new user's first memories
rank like an old user's; BM25's own statistics still move it a little, see `bm25_units`):

- the raw cosine of the two vectors;
- BM25 in units of one rare matched term (`bm25_units`): LanceDB's score divided by the
  inverse document frequency a term held by a single memory has in a table of that size, so
  the table's size cancels out;
- term coverage: the share of the query's terms the memory's full-text holds (a term found
  only as a synonym counts half), every term weighing the same;
- anchor matches: anchored to (or naming what is defined in) the file the query names, or
  exactly the symbol or lines it names.

The z-scores over the candidates used before (issue 17) made a memory's relevance depend on
how many others there were: over two candidates the weaker always read about -1 standard
deviations, whatever it said.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .model import Memory

__all__ = ["Calibration", "CALIBRATIONS", "SearchRow", "calibrated_relevance", "coverage",
           "bm25_units", "term_sets", "rank", "anchor_refs", "anchor_bonus", "fts_query"]

# Added evidence when a candidate is anchored where the query points: the file
# (`src/auth/token.py`), or exactly the lines or symbol it names.
BONUS_FILE = 0.8
BONUS_EXACT = 3.0
# A candidate that names (without anchoring) something the queried file defines is about that
# file as much as one anchored to it somewhere.
BONUS_NAMED = BONUS_FILE
_REF_HINT = re.compile(r"[./\\#:_]|[a-z0-9][A-Z]")
_LINES_RE = re.compile(r"^(.*?):(\d+)(?:-(\d+))?$")
_SYNONYM_CREDIT = 0.5  # a query term found only as a synonym counts half
# Okapi BM25's defaults, as LanceDB's full-text search uses them: a term's score saturates at
# (k1 + 1) x its inverse document frequency.
_K1 = 1.2

Ref = tuple[str, str, "str | None", "tuple[int, int] | None"]


class Calibration(NamedTuple):
    """Logistic weights turning one candidate's evidence into a probability of relevance.

    Fitted per embedder on the labeled set (evals/retrieval, `scripts/bench_retrieval.py
    --calibrate`) at the default fusion weights; a side's terms scale with its configured
    weight over that default, so `vector_weight = 0` drops the vector evidence.
    """

    intercept: float
    vec_cos: float  # the raw cosine (absolute: a query about nothing has low ones)
    text_bm25: float  # log(1 + BM25 in rare-term units), see `bm25_units`
    text_cover: float  # share of the query's terms the memory holds
    anchor_file: float  # anchored to (or naming what is defined in) the file the query names
    anchor_exact: float  # anchored to exactly the symbol or lines the query names
    vector_weight: float = 1.0  # the fusion weights it was fitted at
    text_weight: float = 0.5


# Fitted on evals/retrieval (its fresh queries, the CJK ones and the queries about nothing in
# the store; `python scripts/bench_retrieval.py --calibrate`), L2 1.0, default weights. e5 and
# minilm refitted 2026-12-02 after the path-coverage change (a memory anchored where a path
# query points holds the path's terms, so the file match is in the coverage and its own weight
# fits 0) and the path labels' fix (the CJK memories anchored to a queried file). hashing's is
# still right: refitted, (-8.548, 2.707, 2.035, 3.963, 0, 1.681) ranks the set the same (MRR
# 0.819) with the same rates at the configured floor (97% of nothing-queries clear, 84% of found
# answers above), but its lower intercept puts an exact two-word CJK match in a store of three
# memories just under the floor (tests/test_ranking.py), so the earlier fit stays.
# The e5 and minilm refits widened the store-size spread's max (e5 0.14 -> 0.20, minilm 0.10 ->
# 0.13), and kept: the max is one query, `src/core/config.py` (q081), for every embedder (hashing
# too, 0.20, its fit unchanged). What moves is its answer's BM25 evidence, 3.0 units in a store
# of one memory, 2.3 in one of 200, for reasons general to BM25 (`bm25_units` undoes neither):
# LanceDB divides a term's weight by the memory's length over the table's average (that answer
# holds 123 terms with its anchored code's words, 2.6 x the set's average: x 1 alone, about x 0.6
# at 200), and the query terms' document frequencies grow (`config` in 65 of 200; counted over the
# query's first tier of candidates). The earlier fits (e5 -10.178, 2.249, 2.228, 4.17, 0.545,
# 1.884; minilm -8.474, 4.739, 1.379, 3.768, 0.971, 1.89), fitted before a memory anchored where a
# path query points held the path's terms, gave the file match a weight that put that answer
# higher on the logistic, where the same fall moves the relevance less; they rank the set the
# same on the same candidates (`--calibrate --check`: e5 MRR 0.817 both, odd / even ids 0.846 /
# 0.788 both, nothing-queries clear 94% refit, 91% earlier; minilm 0.848 refit, 0.853 earlier,
# odd ids 0.869 both, even 0.828 / 0.837, both 94% clear; both fits saw every query), and a fit
# of today's features drops the file match (its weight comes out negative). The cause's fix is
# BM25 without the table's average length (docs/benchmarks.md, issue 17, open).
CALIBRATIONS: dict[str, Calibration] = {
    "hashing": Calibration(-8.443, 2.258, 2.014, 3.969, 0.0, 1.753),
    "e5": Calibration(-10.379, 2.303, 2.262, 4.231, 0.0, 1.866),
    "minilm": Calibration(-8.777, 4.849, 1.43, 4.105, 0.0, 1.723),
}
_GENERIC = "hashing"



def calibration(embedder: str) -> Calibration:
    """The fit for `embedder`; an embedder without one of its own gets the hashing one."""
    return CALIBRATIONS.get(embedder, CALIBRATIONS[_GENERIC])


PRIOR_ROWS = 10_000
"""Memories a table is taken to hold besides its own, none of them holding a query's terms,
when BM25 is read as evidence (`bm25_units`)."""


def _idf(rows: float, df: float) -> float:
    """BM25's inverse document frequency (Lucene's form, as LanceDB computes it)."""
    return math.log(1.0 + (rows - df + 0.5) / (df + 0.5))


def bm25_units(score: float, rows: int, matched_dfs: Sequence[int]) -> float:
    """log(1 + BM25 / idf1): LanceDB's BM25 in units of one matched term of the rarest kind.

    BM25 sums, over the matched terms, idf x a saturating term frequency. Its idf depends on
    the table: in a store of two memories both holding "token", "token" weighs nothing, so a
    memory saying exactly what was asked would read as no match at all. Read as evidence, each
    matched term's idf is taken as if the table held `PRIOR_ROWS` more memories without it
    (the score is rescaled by the ratio of those idfs over the terms the memory matched,
    `matched_dfs` being their document frequencies), then divided by the idf of a term held
    by one memory. So a memory's score counts its matched terms about the same whether the
    store holds one memory or thousands (where the prior no longer matters). Not undone here:
    the matched terms' document frequencies themselves (counted over the query's candidates)
    and BM25's length normalization, which divides a term's weight by the memory's length over
    the table's average: a memory 2.6 x the average length reads 3.0 units alone and 2.3 in a
    store of 200, most of it from the length (the store-size spread, docs/benchmarks.md).
    """
    if score <= 0:
        return 0.0
    n = max(1, rows)
    raw = sum(_idf(n, min(df, n)) for df in matched_dfs)
    smooth = sum(_idf(n + PRIOR_ROWS, min(df, n)) for df in matched_dfs)
    scaled = score * (smooth / raw) if raw > 0 else score
    return math.log1p(scaled / _idf(n + PRIOR_ROWS, 1))


def term_sets(texts: Sequence[str]) -> list[frozenset[str]]:
    """Each full-text's terms (stemmed, without stopwords), as `coverage` and the document
    frequencies of `bm25_units` compare them."""
    from .textutil import search_terms

    return [frozenset(search_terms(t)) for t in texts]


def coverage(query_terms: Sequence[str], docs: Sequence[frozenset[str]]) -> list[float]:
    """Per memory (its full-text's `term_sets`), the share of `query_terms` it holds; a term found only as a synonym
    counts half. Every term weighs the same: a weight taken from the other candidates (how
    rare a term is among them) would make one memory's coverage depend on its neighbours.
    Absolute where BM25 is not: a query about nothing covers little of any memory."""
    from .lexicon import synonyms
    from .textutil import term_key

    terms = list(dict.fromkeys(query_terms))
    if not terms:
        return [0.0] * len(docs)
    syn = [frozenset(term_key(w) for w in synonyms(t)) - {t} for t in terms]
    out = []
    for doc in docs:
        got = 0.0
        for t, alt in zip(terms, syn):
            if t in doc:
                got += 1.0
            elif alt and not alt.isdisjoint(doc):
                got += _SYNONYM_CREDIT
        out.append(got / len(terms))
    return out


def calibrated_relevance(features: Sequence[float], cal: Calibration, *, vector_weight: float,
                         text_weight: float) -> float:
    """Relevance in [0, 1] from one candidate's `features` (cos, bm25, cover, file, exact)."""
    cos, bm25, cover, file_hit, exact = features
    vr = vector_weight / cal.vector_weight if cal.vector_weight else 0.0
    tr = text_weight / cal.text_weight if cal.text_weight else 0.0
    logit = (cal.intercept + vr * cal.vec_cos * cos + tr * (cal.text_bm25 * bm25 + cal.text_cover * cover)
             + cal.anchor_file * file_hit + cal.anchor_exact * exact)
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    e = math.exp(logit)
    return e / (1.0 + e)


class SearchRow:
    """One candidate from the store: the memory, its raw cosine, its `relevance` (the
    calibrated probability, a fact of the pair: what a hit reports and the floor judges), the
    evidence it was computed from, and `score`, what the drift pass demotes and ranks by (the
    relevance itself, until the drift and age factors are applied)."""

    __slots__ = ("memory", "similarity", "relevance", "features", "score")

    def __init__(self, memory: Memory, similarity: float, relevance: float,
                 features: tuple[float, ...] = ()) -> None:
        self.memory = memory
        self.similarity = similarity
        self.relevance = relevance
        self.features = features
        self.score = relevance

    @property
    def match(self) -> float:
        """The relevance (its earlier name, when `relevance` was the discounted value)."""
        return self.relevance


def rank(rows: list[SearchRow]) -> list[SearchRow]:
    """`rows` best relevance first, ties by id (never by where rows lie on disk, so a reindexed
    store ranks the same); each score starts as its relevance.

    The score a hit reports is relevance x drift factor x age factor and nothing else, so a
    user can read the demotion off the hit. An earlier discount by the lead over the best
    match (relevance x relevance / best) ordered hits as relevance^2 x drift x age, which is
    the order of relevance x sqrt(drift x age): the defaults `drift.stale_factor` 0.7 and
    `drift.expired_factor` 0.77 (about sqrt(0.5) and sqrt(0.6)) keep that order without a
    factor nobody could see."""
    for r in rows:
        r.score = r.relevance
    rows.sort(key=lambda r: (-r.score, r.memory.id))
    return rows


def anchor_refs(text: str) -> list[Ref]:
    """Code references in a query: (token, path, symbol, lines) for `PATH`, `PATH#SYM`,
    `PATH:N-M` and bare dotted or snake/camel names; plain words are no references."""
    from .textutil import _tokens

    out: list[Ref] = []
    for token in _tokens(text):
        if not _REF_HINT.search(token):
            continue
        path, _, symbol = token.partition("#")
        lines = None
        m = _LINES_RE.match(path)
        if m:
            path = m.group(1)
            a = int(m.group(2))
            lines = (a, int(m.group(3) or a))
        out.append((token, path, symbol or None, lines))
    return out


def anchor_bonus(refs: Sequence[Ref], anchors: Iterable[dict[str, Any]]) -> float:
    """`BONUS_EXACT` for an anchor on exactly the symbol or lines a query names, `BONUS_FILE`
    for one on the file it names, else 0."""
    best = 0.0
    for anchor in anchors:
        apath = anchor.get("path") or ""
        asym = anchor.get("symbol")
        alines = anchor.get("lines")
        for token, path, symbol, lines in refs:
            if asym and token == asym:  # a bare `TokenIssuer.issue` or `lock_key`
                return BONUS_EXACT
            if not path or not (apath == path or (("/" in path or "." in path) and apath.endswith("/" + path))):
                continue
            if symbol is not None:
                exact = symbol == asym
            else:
                exact = lines is not None and alines is not None and alines[0] <= lines[1] and lines[0] <= alines[1]
            best = max(best, BONUS_EXACT if exact else BONUS_FILE)
    return best


def fts_query(fts_text: str, file_names: Sequence[str] = ()) -> str:
    """The full-text query: the words typed, widened by their synonyms and, for a query naming
    a file, by the names that file defines.

    One plain query string (its terms' scores add up, as a boolean query's clauses would at
    the same boost): LanceDB's boolean query made every query about 40% slower at 10,000
    memories, for the same ranking.
    """
    from .lexicon import expand_words
    from .textutil import words

    extra = expand_words(words(fts_text))
    if not extra and not file_names:
        return fts_text
    added = " ".join([*extra, *file_names])
    # as the typed words were: no punctuation reaches the full-text parser (`e-mail`)
    return fts_text + " " + "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in added)
