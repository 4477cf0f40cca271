"""Relevance: how well one memory matches one query, as a calibrated probability in [0, 1].

Every feature is a fact of the (query, memory) pair alone, never of the other candidates, so
a memory reads about the same relevance whatever the size of the store:
- the raw cosine of the two vectors;
- BM25 in units of one rare matched term (`bm25_units`), from the memory's own term counts;
- term coverage: the share of the query's terms the memory holds (a synonym counts half);
- anchor matches: anchored to (or naming what is defined in) the file the query names, or
  exactly the symbol or lines it names.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.model import Memory

__all__ = ["Calibration", "CALIBRATIONS", "SearchRow", "Terms", "calibrated_relevance", "coverage",
           "bm25_units", "term_sets", "anchor_refs", "anchor_bonus", "fts_query"]

# Added evidence when a candidate is anchored where the query points: the file, or exactly its lines or symbol.
BONUS_FILE = 0.8
BONUS_EXACT = 3.0
BONUS_NAMED = BONUS_FILE  # naming (not anchored) what the queried file defines
_REF_HINT = re.compile(r"[./\\#:_]|[a-z0-9][A-Z]")
_LINES_RE = re.compile(r"^(.*?):(\d+)(?:-(\d+))?$")
_SYNONYM_CREDIT = 0.5  # a query term found only as a synonym counts half
_K1 = 1.2  # Okapi BM25's term-frequency saturation (LanceDB's k1); no length normalization (b = 0)

Ref = tuple[str, str, "str | None", "tuple[int, int] | None"]


class Calibration(NamedTuple):
    """Logistic weights turning a candidate's evidence into a probability of relevance, fitted per
    embedder at the default fusion weights (a side's terms scale with its configured weight)."""

    intercept: float
    vec_cos: float  # the raw cosine (absolute: a query about nothing has low ones)
    text_bm25: float  # log(1 + BM25 in rare-term units), see `bm25_units`
    text_cover: float  # share of the query's terms the memory holds
    anchor_file: float  # anchored to (or naming what is defined in) the file the query names
    anchor_exact: float  # anchored to exactly the symbol or lines the query names
    vector_weight: float = 1.0  # the fusion weights it was fitted at
    text_weight: float = 0.5


# Fitted on evals/retrieval (`python scripts/bench_retrieval.py --calibrate`), L2 1.0, default
# weights. A refit must keep tests/store/test_ranking.py's store-size band.
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
    """BM25's inverse document frequency (Lucene's form, as LanceDB's also is)."""
    return math.log(1.0 + (rows - df + 0.5) / (df + 0.5))


class Terms(frozenset[str]):
    """A full-text's terms (`textutil.search_terms`) as a set, and the counts of those above one."""

    __slots__ = ("_repeats",)
    _repeats: dict[str, int]

    def __new__(cls, terms: Iterable[str]) -> "Terms":
        seq = list(terms)
        self = super().__new__(cls, seq)
        self._repeats = {t: c for t, c in Counter(seq).items() if c > 1}
        return self

    def count(self, term: str) -> int:
        """How often `term` occurs in the text (0 when not at all)."""
        return self._repeats.get(term, 1) if term in self else 0


def bm25_units(doc: Terms, asked: Iterable[str], rows: int, df: Mapping[str, int]) -> float:
    """log(1 + BM25 / idf1): the memory's BM25 for the query's terms `asked`, in units of one
    matched term of the rarest kind, from the memory's own term counts (`doc`).

    Per matched term: idf x tf (k1 + 1) / (tf + k1), BM25 with b = 0; the idf as if the table
    (`rows`) held `PRIOR_ROWS` more memories without the term; `df`, the document frequencies.
    """
    n = max(1, rows)
    total = n + PRIOR_ROWS
    score = 0.0
    for term in sorted(doc.intersection(asked)):  # one order: the same sum to the last bit
        tf = doc.count(term)
        score += _idf(total, min(df.get(term, 1), n)) * tf * (_K1 + 1) / (tf + _K1)
    return math.log1p(score / _idf(total, 1))


def term_sets(texts: Sequence[str]) -> list[Terms]:
    """Each full-text's `Terms`, as `coverage` and `bm25_units` compare them."""
    from ..core.textutil import search_terms

    return [Terms(search_terms(t)) for t in texts]


def coverage(query_terms: Sequence[str], docs: Sequence[frozenset[str]]) -> list[float]:
    """Per memory (its `term_sets`), the share of `query_terms` it holds (a synonym counts half)."""
    from .lexicon import synonyms
    from ..core.textutil import term_key

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
    """One candidate: the memory, its raw cosine, its calibrated `relevance`, the evidence, and
    `score`, what the drift pass demotes and ranks by (the relevance until then)."""

    __slots__ = ("memory", "similarity", "relevance", "features", "score")

    def __init__(self, memory: Memory, similarity: float, relevance: float,
                 features: tuple[float, ...] = ()) -> None:
        self.memory = memory
        self.similarity = similarity
        self.relevance = relevance
        self.features = features
        self.score = relevance


def anchor_refs(text: str) -> list[Ref]:
    """Code references in a query: (token, path, symbol, lines) for `PATH`, `PATH#SYM`, `PATH:N-M`, names."""
    from ..core.textutil import _tokens

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
    """`BONUS_EXACT` for an anchor on the symbol or lines a query names, `BONUS_FILE` on its file, else 0."""
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
    """The full-text query: the words typed, their synonyms, and the names a queried file defines."""
    from .lexicon import expand_words
    from ..core.textutil import words

    extra = expand_words(words(fts_text))
    if not extra and not file_names:
        return fts_text
    added = " ".join([*extra, *file_names])
    # as the typed words were: no punctuation reaches the full-text parser (`e-mail`)
    return fts_text + " " + "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in added)
