"""The store: a LanceDB table at `.anchorfs/memories.lance`, the searchable index of memories.

The ledger is the record; this table is derived from it and can be rebuilt by `reindex`. It
holds every memory (any status) with its vector, an expanded text for the native full-text
index (identifier parts added, since the tokenizer does not split `getUserById`), filter
columns, and the last known drift, so `list --drift stale` answers without re-checking.
LanceDB is imported lazily: it costs about a second, and drift checks never need it.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import warnings
from datetime import timedelta
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import orjson

from .errors import EmbedderError, StoreError
from .ledger import fault
from .model import Memory

if TYPE_CHECKING:
    import numpy as np

    from .embedders import Embedder

__all__ = ["Store", "SearchRow", "search_text", "embed_text", "fuse", "TABLE", "SCHEMA_VERSION"]

TABLE = "memories"
NPROBES = 24
"""IVF partitions a query through the vector index visits (of about rows / 1,500)."""
REFINE = 5
"""The index's best REFINE x limit candidates are re-ranked by their exact cosine."""
SCHEMA_VERSION = "1"
_T = TypeVar("_T")


def embed_text(memory: Memory) -> str:
    """What the embedder sees: content, tags, anchor paths and symbols, as written.

    Not the expanded full-text: the hashing embedder splits identifiers itself (the added
    parts would count twice) and a model reads the prose better without a word list after it.
    Nor the anchored code: measured, it blurs the vectors (hashing MRR 0.745 -> 0.720, e5 no
    gain); code vocabulary is a full-text matter.
    """
    parts = [memory.content]
    if memory.tags:
        parts.append(" ".join(memory.tags))
    for anchor in memory.anchors:
        parts.append(anchor.path)
        if anchor.symbol:
            parts.append(anchor.symbol)
    return "\n".join(parts)


def search_text(memory: Memory, code: str = "") -> str:
    """What the full-text index sees: `embed_text` plus identifier parts and exact-name keys,
    then the vocabulary of the anchored `code` (see `anchorfs.codetext`), split the same way."""
    from .codetext import code_vocabulary
    from .textutil import compound_keys, expand_for_search

    raw = embed_text(memory)
    keys = compound_keys(raw)
    text = expand_for_search(raw)
    text = text + "\n" + " ".join(keys) if keys else text
    vocabulary = code_vocabulary(code) if code else ""
    if vocabulary:
        text += "\n" + expand_for_search(vocabulary)
    return text


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def id_filter(ids: Iterable[str]) -> str:
    return "id IN (" + ", ".join(_quote(i) for i in ids) + ")"


def _retry(fn: Callable[[], _T], what: str) -> _T:
    """LanceDB commits are optimistic: retry a conflicting commit a few times before giving up."""
    delay = 0.02
    for attempt in range(8):
        try:
            return fn()
        except Exception as exc:  # lancedb raises plain RuntimeError / OSError for conflicts
            text = str(exc).lower()
            if attempt < 7 and ("conflict" in text or "retryable" in text or "commit" in text):
                time.sleep(delay)
                delay *= 2
                continue
            raise StoreError(f"store {what} failed: {exc}; run `anchorfs reindex` if it persists") from exc
    raise AssertionError("unreachable")


def _read(fn: Callable[[], _T], what: str) -> _T:
    """A read of a damaged table (data files deleted or garbled) is a StoreError, never a traceback."""
    try:
        return fn()
    except Exception as exc:  # lancedb raises plain RuntimeError / OSError / ValueError
        brief = " ".join(str(exc).split())[:300]  # one line for the CLI, however lance words it
        raise StoreError(f"store {what} failed ({brief}); run `anchorfs reindex` to rebuild it from the ledger") from exc


# -- fusion --------------------------------------------------------------------------------

# Standard deviations below which a side's scores count as ties: a handful of near-equal
# candidates must not be spread out to +-1 just because there are few of them.
_COSINE_FLOOR = 0.01
_BM25_FLOOR = 0.05  # of the best BM25 score
_BM25_REFS = 10
# Added to the fused score (in standard deviations) when a candidate is anchored where the
# query points: the file (`src/auth/token.py`), or exactly the lines or symbol it names.
_BONUS_FILE = 0.8
_BONUS_EXACT = 3.0
# A candidate that names (without anchoring) something the queried file defines is about that
# file as much as one anchored to it somewhere.
_BONUS_NAMED = _BONUS_FILE
_REF_HINT = re.compile(r"[./\\#:_]|[a-z0-9][A-Z]")
_LINES_RE = re.compile(r"^(.*?):(\d+)(?:-(\d+))?$")


def _standardize(values: Sequence[float], floor: float) -> list[float]:
    count = len(values)
    mean = sum(values) / count
    std = (sum((v - mean) ** 2 for v in values) / count) ** 0.5
    scale = max(std, floor, 1e-12)
    return [(v - mean) / scale for v in values]


def _zscores(similarities: Sequence[float] | None, bm25: Sequence[float] | None,
             count: int) -> tuple[list[float], list[float]]:
    """Each side's standardized scores: how far a candidate stands out on it.

    - vectors: every candidate's exact cosine, standardized over all candidates;
    - full-text: BM25 (0 = no match) standardized over the matches plus one no-match
      reference, and only ever positive (clipped at 0): a lone match stands out, a crowd of
      weak matches on common words hardly counts, and no match costs nothing.
    """
    zv = _standardize(similarities, _COSINE_FLOOR) if similarities is not None and count else [0.0] * count
    zt = [0.0] * count
    if bm25 is not None and count:
        matched = [v for v in bm25 if v > 0]
        if matched:
            # at least `_BM25_REFS` scores, padded with no-match zeros: a lone match stands out
            # as far in a store of three memories as in one of thousands
            ref = [*matched, *[0.0] * max(1, _BM25_REFS - len(matched))]
            mean = sum(ref) / len(ref)
            std = (sum((v - mean) ** 2 for v in ref) / len(ref)) ** 0.5
            scale = max(std, _BM25_FLOOR * max(matched))
            zt = [max(0.0, (v - mean) / scale) if v > 0 else 0.0 for v in bm25]
    return zv, zt


def fuse(
    similarities: Sequence[float] | None,
    bm25: Sequence[float] | None,
    bonus: Sequence[float] | None = None,
    *,
    vector_weight: float = 1.0,
    text_weight: float = 1.0,
) -> list[int]:
    """Candidate indexes, best first, by the weighted mean of each side's z-scores plus `bonus`.

    The relative half of the ranking (see `_zscores`): reciprocal rank fusion gives the top of
    a side the same weight however weak it is, z-scores count how far a candidate stands
    out. `Store.search` adds the absolute evidence (`calibrated_relevance`). `None` leaves a
    side out; ties go to the lower index.
    """
    count = len(similarities) if similarities is not None else len(bm25 or bonus or ())
    zv, zt = _zscores(similarities, bm25, count)
    total = (vector_weight if similarities is not None else 0.0) + (text_weight if bm25 is not None else 0.0)
    fused = [0.0] * count
    if total > 0:
        fused = [(vector_weight * a * (similarities is not None) + text_weight * b * (bm25 is not None)) / total
                 for a, b in zip(zv, zt)]
    if bonus:
        fused = [f + b for f, b in zip(fused, bonus)]
    return sorted(range(count), key=lambda j: (-fused[j], j))


class Calibration(NamedTuple):
    """Logistic weights turning one candidate's evidence into a probability of relevance.

    Fitted per embedder on the labeled set (evals/retrieval, `scripts/bench_retrieval.py
    --calibrate`) at the default fusion weights; a side's terms scale with its configured
    weight over that default, so `vector_weight = 0` drops the vector evidence.
    """

    intercept: float
    vec_z: float  # the cosine standardized over the candidates (stands out)
    vec_cos: float  # the raw cosine (absolute: a query about nothing has low ones)
    text_z: float  # BM25 standardized over the matches (stands out)
    text_cover: float  # share of the query's terms the memory holds, rarer terms weighing more
    anchor_file: float  # anchored to (or naming what is defined in) the file the query names
    anchor_exact: float  # anchored to exactly the symbol or lines the query names
    vector_weight: float = 1.0  # the fusion weights it was fitted at
    text_weight: float = 0.5


# Fitted on evals/retrieval (its fresh queries, the CJK ones and the queries about nothing
# in the store; `python scripts/bench_retrieval.py --calibrate`), L2 1.0, default weights.
# The z-score of the cosine is not used (0): next to the raw cosine it carried nothing, and
# made relevance depend on how many memories the store holds.
CALIBRATIONS: dict[str, Calibration] = {
    "hashing": Calibration(-6.784, 0.0, 1.48, 1.16, 2.98, 1.687, 1.818),
    "e5": Calibration(-8.245, 0.0, 1.999, 1.162, 3.156, 1.753, 1.871),
    "minilm": Calibration(-6.964, 0.0, 4.122, 1.102, 2.435, 1.806, 1.722),
}
RUNNER_UP_GAMMA = 1.0
"""How hard a candidate is discounted for falling behind the query's best one (see `search`)."""
_GENERIC = "hashing"


_SYNONYM_CREDIT = 0.5  # a query term found only as a synonym counts half


def _coverage(query: str, texts: Sequence[str]) -> list[float]:
    """Per candidate, the share of the query's terms its full-text holds, each term weighted
    by how rare it is among the candidates (a term none holds weighs most: the store knows
    nothing of it); a term found only as a synonym counts half. Absolute where BM25 is not:
    a query about nothing covers little of any memory, however they compare among themselves.
    """
    from .lexicon import synonyms
    from .textutil import search_terms, term_key

    terms = list(dict.fromkeys(search_terms(query)))
    if not terms or not texts:
        return [0.0] * len(texts)
    docs = [frozenset(search_terms(t)) for t in texts]
    syn = [frozenset(term_key(w) for w in synonyms(t)) - {t} for t in terms]
    n = len(docs)
    weights = [math.log(1.0 + (n + 1.0) / (sum(1 for d in docs if t in d) + 0.5)) for t in terms]
    total = sum(weights)
    out = []
    for d in docs:
        got = 0.0
        for t, w, alt in zip(terms, weights, syn):
            if t in d:
                got += w
            elif alt and not alt.isdisjoint(d):
                got += _SYNONYM_CREDIT * w
        out.append(got / total)
    return out


def calibrated_relevance(features: Sequence[float], cal: Calibration, *, vector_weight: float,
                         text_weight: float) -> float:
    """Relevance in [0, 1] from one candidate's `features` (zv, cos, zt, cover, file, exact)."""
    zv, cos, zt, cover, file_hit, exact = features
    vr = vector_weight / cal.vector_weight if cal.vector_weight else 0.0
    tr = text_weight / cal.text_weight if cal.text_weight else 0.0
    logit = (cal.intercept + vr * (cal.vec_z * zv + cal.vec_cos * cos) + tr * (cal.text_z * zt + cal.text_cover * cover)
             + cal.anchor_file * file_hit + cal.anchor_exact * exact)
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    e = math.exp(logit)
    return e / (1.0 + e)


def _anchor_refs(text: str) -> list[tuple[str, str, str | None, tuple[int, int] | None]]:
    """Code references in a query: (token, path, symbol, lines) for `PATH`, `PATH#SYM`,
    `PATH:N-M` and bare dotted or snake/camel names; plain words are no references."""
    from .textutil import _tokens

    out: list[tuple[str, str, str | None, tuple[int, int] | None]] = []
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


def _anchor_bonus(refs: Sequence[tuple[str, str, str | None, tuple[int, int] | None]],
                  anchors: Iterable[dict[str, Any]]) -> float:
    best = 0.0
    for anchor in anchors:
        apath = anchor.get("path") or ""
        asym = anchor.get("symbol")
        alines = anchor.get("lines")
        for token, path, symbol, lines in refs:
            if asym and token == asym:  # a bare `TokenIssuer.issue` or `lock_key`
                return _BONUS_EXACT
            if not path or not (apath == path or (("/" in path or "." in path) and apath.endswith("/" + path))):
                continue
            if symbol is not None:
                exact = symbol == asym
            else:
                exact = lines is not None and alines is not None and alines[0] <= lines[1] and lines[0] <= alines[1]
            best = max(best, _BONUS_EXACT if exact else _BONUS_FILE)
    return best


def _fts_query(fts_text: str, file_names: Sequence[str] = ()) -> str:
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


class SearchRow:
    """One candidate from the store: the memory, raw cosine similarity, calibrated relevance
    in [0, 1] and the evidence it was computed from (`calibrated_relevance`'s features)."""

    __slots__ = ("memory", "similarity", "relevance", "features", "match")

    def __init__(self, memory: Memory, similarity: float, relevance: float,
                 features: tuple[float, ...] = ()) -> None:
        self.memory = memory
        self.similarity = similarity
        self.relevance = relevance
        self.features = features
        self.match = relevance
        """The calibrated probability on its own, before the runner-up discount: what the
        relevance floor judges, so a second good match is never called weak only for having
        a better one beside it."""


class Store:
    def __init__(self, state_dir: Path, embedder: "Embedder", *, compact_fragments: int = 64,
                 root: str | os.PathLike[str] | None = None, index_rows: int = 50_000) -> None:
        self.path = state_dir / f"{TABLE}.lance"
        self.root_real = os.path.realpath(state_dir.parent if root is None else root)
        self.embedder = embedder
        self.compact_fragments = compact_fragments
        self.index_rows = index_rows
        self._db: Any = None
        self._table: Any = None
        self._indexed: str | None = None  # the vector index's type, once seen (it is never dropped but by `drop`)
        self._index_job: Any = None  # a background build started from here (`maybe_index`)

    # -- opening -------------------------------------------------------------------------

    def _schema(self) -> Any:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("content", pa.string()),
                pa.field("kind", pa.string()),
                pa.field("tags", pa.list_(pa.string())),
                pa.field("status", pa.string()),
                pa.field("author", pa.string()),
                pa.field("recorded_at", pa.int64()),
                pa.field("valid_until", pa.int64()),
                pa.field("anchored", pa.bool_()),
                pa.field("drift", pa.string()),
                pa.field("text", pa.string()),
                pa.field("text_hash", pa.string()),
                pa.field("doc", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), self.embedder.dim)),
            ],
            metadata={
                "anchorfs.schema": SCHEMA_VERSION,
                "anchorfs.embedder": self.embedder.name,
                "anchorfs.dim": str(self.embedder.dim),
            },
        )

    def _connect(self) -> Any:
        """The LanceDB connection, made only once the folder is known to hold no link: LanceDB
        follows links, so one planted in a cloned `.anchorfs/` would make it read (or write)
        outside the workspace (`statefs.check_store_dir`)."""
        if self._db is None:
            from .statefs import check_state_dir, check_store_dir

            check_state_dir(self.path.parent)
            check_store_dir(self.path)
            folder = str(self.path.parent)
            try:
                folder.encode("utf-8")
            except UnicodeEncodeError:  # LanceDB takes UTF-8 paths only; it would fail with a traceback
                raise StoreError(f"LanceDB cannot open {folder!r}: the path is not valid UTF-8; "
                                 "rename the folder to use search") from None
            from .lazyimport import import_lancedb

            lancedb = import_lancedb()  # without its REST client (never used here) and override checks

            # Always read the latest version: other processes write the same table.
            self._db = lancedb.connect(folder, read_consistency_interval=timedelta(0))
        return self._db

    def exists(self) -> bool:
        """Whether anything is at the store's path (a link there is refused, not followed)."""
        from .statefs import refuse_link

        refuse_link(self.path, "store folder")
        return os.path.lexists(self.path)

    def table(self, *, create: bool = True) -> Any:
        if self._table is not None:
            return self._table
        db = self._connect()
        if self.exists():
            try:
                table = db.open_table(TABLE)
            except Exception as exc:
                raise StoreError(f"cannot open the store {self.path}: {exc}; run `anchorfs reindex`") from exc
            self._check_embedder(table)
        elif create:
            table = self._create(db)
        else:
            raise StoreError(f"no store at {self.path}; run `anchorfs reindex`")
        self._table = table
        return table

    def _create(self, db: Any) -> Any:
        from lancedb.index import FTS

        try:
            table = db.create_table(TABLE, schema=self._schema(), exist_ok=True)
            if not table.list_indices():
                table.create_index("text", config=FTS(with_position=False))
        except Exception as exc:
            raise StoreError(f"cannot create the store {self.path}: {exc}") from exc
        return table

    def _check_embedder(self, table: Any) -> None:
        meta = table.schema.metadata or {}
        name = meta.get(b"anchorfs.embedder", b"").decode()
        dim = meta.get(b"anchorfs.dim", b"0").decode()
        if name != self.embedder.name or dim != str(self.embedder.dim):
            use = (f"set `embedder = \"{name}\"` in .anchorfs.toml (or ANCHORFS_EMBEDDER={name}) to use it, or "
                   if name else "")
            raise EmbedderError(
                f"the store was built with embedder {name or '?'!r} (dim {dim}), not the "
                f"{self.embedder.name!r} (dim {self.embedder.dim}) asked for (`embedder =` in .anchorfs.toml, "
                f"ANCHORFS_EMBEDDER or an argument); {use}run `anchorfs reindex --embedder {self.embedder.name}` to rebuild it"
            )

    def stored_embedder(self) -> str | None:
        """The embedder the table on disk was built with, without opening it for writes."""
        if not self.path.exists():
            return None
        try:
            table = self._connect().open_table(TABLE)
        except Exception:
            return None
        meta = table.schema.metadata or {}
        return meta.get(b"anchorfs.embedder", b"").decode() or None

    # -- writing -------------------------------------------------------------------------

    def _rows(self, memories: Sequence[Memory], reuse: dict[str, tuple[str, Any]],
              drift: dict[str, str | None]) -> list[dict[str, Any]]:
        from .codetext import anchored_text

        codes = [anchored_text(self.root_real, m) if m.anchors else "" for m in memories]
        texts = [search_text(m, c) for m, c in zip(memories, codes)]
        vec_texts = [embed_text(m) for m in memories]
        # The hash covers both texts: a row is re-embedded when either would change.
        hashes = [hashlib.sha256(f"{t}\0{v}".encode()).hexdigest() for t, v in zip(texts, vec_texts)]
        todo = [i for i, (m, h) in enumerate(zip(memories, hashes)) if reuse.get(m.id, ("",))[0] != h]
        vectors: dict[int, Any] = {}
        if todo:
            embedded = self.embedder.embed_documents([vec_texts[i] for i in todo])
            vectors = {i: embedded[j] for j, i in enumerate(todo)}
        rows = []
        for i, m in enumerate(memories):
            vec = vectors[i] if i in vectors else reuse[m.id][1]
            rows.append(
                {
                    "id": m.id,
                    "content": m.content,
                    "kind": m.kind,
                    "tags": list(m.tags),
                    "status": m.status,
                    "author": m.author,
                    "recorded_at": int(m.recorded_at.timestamp() * 1_000_000),
                    "valid_until": int(m.valid_until.timestamp() * 1_000_000) if m.valid_until else None,
                    "anchored": bool(m.anchors),
                    "drift": drift.get(m.id) or "fresh",  # fresh when recorded: anchors just hashed
                    "text": texts[i],
                    "text_hash": hashes[i],
                    "doc": orjson.dumps(m.to_dict()).decode(),
                    "vector": vec,
                }
            )
        return rows

    def _existing(self, ids: Sequence[str]) -> dict[str, tuple[str, Any, str | None]]:
        """text_hash, vector and drift of rows already stored, to skip re-embedding."""
        table = self.table()
        out: dict[str, tuple[str, Any, str | None]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = _read(
                lambda: table.search()
                .where(id_filter(chunk))
                .select(["id", "text_hash", "vector", "drift"])
                .limit(len(chunk))
                .to_list(),
                "read",
            )
            for r in rows:
                out[r["id"]] = (r["text_hash"], r["vector"], r["drift"])
        return out

    def add(self, memories: Sequence[Memory]) -> None:
        """Insert memories known to be new (the fast path of `record`)."""
        if not memories:
            return
        rows = self._rows(memories, {}, {})
        table = self.table()

        def add() -> None:
            fault("store-write")
            table.add(rows)

        _retry(add, "add")
        self.maybe_compact()

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace by id; idempotent, so replaying a ledger tail twice is harmless."""
        if not memories:
            return
        latest: dict[str, Memory] = {}
        for m in memories:
            latest[m.id] = m
        mems = list(latest.values())
        existing = self._existing([m.id for m in mems])
        reuse = {k: (v[0], v[1]) for k, v in existing.items()}
        drift = {k: v[2] for k, v in existing.items()}
        rows = self._rows(mems, reuse, drift)
        table = self.table()

        def go() -> None:
            fault("store-write")
            (
                table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )

        _retry(go, "write")
        self.maybe_compact()

    def set_drift(self, changes: dict[str, str]) -> None:
        """Write back drift that changed since the last check, one update per drift value."""
        if not changes:
            return
        table = self.table()
        by_value: dict[str, list[str]] = {}
        for mid, value in changes.items():
            by_value.setdefault(value, []).append(mid)
        for value, ids in by_value.items():
            def update(ids: list[str] = ids, value: str = value) -> None:
                fault("store-write")
                table.update(where=id_filter(ids), values={"drift": value})

            _retry(update, "drift update")

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the rows of `ids`: the ledger no longer holds them (a checkout, reset or rewrite)."""
        if not ids:
            return
        table = self.table()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start:start + 500])

            def go(chunk: list[str] = chunk) -> None:
                fault("store-write")
                table.delete(id_filter(chunk))

            _retry(go, "delete")

    def docs(self) -> dict[str, str | None]:
        """Every row's id and `doc` (the memory's JSON), None for an id stored more than once,
        to reconcile the store with the ledger's fold without re-reading vectors."""
        if not self.path.exists():
            return {}
        table = self.table()
        data = _read(lambda: table.search().select(["id", "doc"]).limit(max(1, table.count_rows())).to_arrow(),
                     "read")
        out: dict[str, str | None] = {}
        for mid, doc in zip(data.column("id").to_pylist(), data.column("doc").to_pylist()):
            out[mid] = None if mid in out else doc
        return out

    def maybe_compact(self, *, force: bool = False, keep: timedelta = timedelta(minutes=5)) -> bool:
        """Compact when fragments pile up: many single-row appends slow filtered search ~10x.

        Versions older than `keep` are deleted with it (LanceDB keeps every version otherwise:
        the folder grew to twice its live data); 5 minutes leaves a reader of an older version
        in another process time to finish. Past `index_rows` rows, a vector index is built in
        the background (`maybe_index`); compaction also folds new rows into an existing one.
        """
        table = self.table()
        try:
            fragments = table.stats()["fragment_stats"]["num_fragments"]
        except Exception:
            return False
        self.maybe_index()
        if not force and fragments < self.compact_fragments:
            return False
        def optimize() -> None:
            with warnings.catch_warnings():  # keep=0 is asked for knowingly (`reindex`, under the lock)
                warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
                table.optimize(cleanup_older_than=keep)

        try:
            _retry(optimize, "compaction")
        except StoreError:
            # Only speed is at stake (readers' drift updates keep preempting it under load): the
            # write before it has landed, so it must not fail; the next write tries again.
            return False
        return True

    # -- the vector index ----------------------------------------------------------------

    def vector_index(self) -> str | None:
        """The type of the vector column's index (`IVF_PQ`), None while there is none."""
        if self._indexed is not None:
            return self._indexed
        if not self.path.exists():
            return None
        try:
            found = [i for i in self.table().list_indices() if "vector" in i.columns]
        except Exception:
            return None
        if found:
            self._indexed = str(found[0].index_type)
        return self._indexed

    def index_params(self, rows: int) -> dict[str, Any]:
        """IVF-PQ sized to the table: about 1,500 rows a partition (so a query's `NPROBES`
        partitions stay a fraction of them) and 16 dimensions a sub-vector."""
        dim = int(self.embedder.dim)
        sub = max(1, dim // 16)
        while dim % sub:
            sub -= 1
        return {"num_partitions": max(1, min(1024, rows // 1500)), "num_sub_vectors": sub}

    def build_index(self) -> bool:
        """Build (or rebuild) the vector index now, whatever the row count; False when the
        table is too small to train one (PQ needs 256 rows) or the build failed."""
        table = self.table()
        rows = int(_read(table.count_rows, "count"))
        if rows < 256:
            return False
        params = self.index_params(rows)
        from lancedb.index import IvfPq

        config = IvfPq(distance_type="cosine", **params)
        try:
            _retry(lambda: table.create_index("vector", config=config, replace=True), "vector index")
        except StoreError:
            return False
        self._indexed = None
        return self.vector_index() is not None

    def maybe_index(self, *, background: bool = True) -> bool:
        """Past `index_rows` rows without a vector index, build one: in a detached process by
        default (`anchorfs.indexer`), so the write that crossed the threshold does not wait and
        a CLI call that exits at once does not cut it short. Returns whether a build started."""
        if self.index_rows <= 0 or self._indexed is not None:
            return False
        if self._index_job is not None and self._index_job.poll() is None:
            return False  # one already running from here
        table = self.table()
        try:
            rows = int(table.count_rows())
        except Exception:
            return False
        if rows < max(256, self.index_rows) or self.vector_index() is not None:
            return False
        if not background:
            return self.build_index()
        import subprocess
        import sys

        try:
            self._index_job = subprocess.Popen(
                [sys.executable, "-m", "anchorfs.indexer", str(self.path.parent), str(self.root_real)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True)
        except OSError:
            return False
        return True

    def vector_query(self, query_vector: Any, where: str | None = None) -> Any:
        """The vector side of `search`: through the index when there is one (`NPROBES`
        partitions, the best `REFINE` x limit re-ranked by exact cosine), else a flat scan
        (the two settings are ignored then)."""
        vq = self.table().search(query_vector, vector_column_name="vector").distance_type("cosine")
        vq = vq.nprobes(NPROBES).refine_factor(REFINE)
        return vq.where(where, prefilter=True) if where else vq

    def wait_index(self) -> int | None:
        """Wait for a background index build started here; its exit code (None if none ran)."""
        job, self._index_job = self._index_job, None
        if job is None:
            return None
        code = job.wait()
        self._indexed = None
        return code

    # -- reading -------------------------------------------------------------------------

    def count(self, where: str | None = None) -> int:
        if not self.path.exists():
            return 0
        table = self.table()
        return int(_read(lambda: table.count_rows(where), "count"))

    def drift_map(self, where: str | None = None) -> dict[str, str | None]:
        if not self.path.exists():
            return {}
        table = self.table()
        q = table.search().select(["id", "drift"]).limit(max(1, _read(table.count_rows, "count")))
        if where:
            q = q.where(where)
        return {r["id"]: r["drift"] for r in _read(q.to_list, "read")}

    def search(
        self,
        text: str,
        query_vector: "np.ndarray",
        *,
        k: int,
        where: str | None,
        candidates: int,
        rrf_k: float,
        vector_weight: float,
        text_weight: float,
    ) -> list[SearchRow]:
        """Hybrid search: full-text and vector candidates, each with a relevance in [0, 1].

        A side whose weight is 0 is not searched at all (full-text alone, vectors alone).
        Relevance is a calibrated probability (`calibrated_relevance`, fitted per embedder)
        from absolute evidence (the cosine, the share of the query's terms a memory holds) and
        relative evidence (how far its BM25 stands out, anchor matches), discounted for
        falling behind the query's best candidate. Returns up to `k` candidates, most relevant
        first (ties by id); the caller demotes and cuts. `rrf_k` is no longer used.
        """
        import numpy as np

        from .textutil import compound_keys, expand_for_search

        table = self.table()
        n = max(1, candidates, k)
        # LanceDB breaks ties at the cut as rows happen to lie on disk (which a drift write-back
        # reshuffles): take more, order by score then id, keep n, so the same query always
        # gets the same candidates.
        fetch = 2 * n + 10
        cols = ["id", "doc", "vector", "text"]  # drift is not read: every hit is checked afresh
        use_text = text_weight > 0
        use_vector = vector_weight > 0 or not use_text
        vec_rows: list[dict[str, Any]] = []
        if use_vector:
            vq = self.vector_query(query_vector, where)
            vec_rows = _read(vq.select([*cols, "_distance"]).limit(fetch).to_list, "search")
            vec_rows = sorted(vec_rows, key=lambda r: (float(r["_distance"]), r["id"]))[:n]
        fts_rows: list[dict[str, Any]] = []
        refs = _anchor_refs(text)
        file_names = self._file_names(refs) if refs else []
        fts_text = " ".join([*expand_for_search(text).split(), *compound_keys(text)])
        fts_text = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in fts_text).strip()
        if fts_text and use_text:
            fq = table.search(_fts_query(fts_text, file_names), query_type="fts", fts_columns="text")
            if where:
                fq = fq.where(where, prefilter=True)
            try:
                fts_rows = fq.select([*cols, "_score"]).limit(fetch).to_list()
                fts_rows = sorted(fts_rows, key=lambda r: (-float(r["_score"]), r["id"]))[:n]
            except Exception:  # an odd query the FTS parser refuses still gets vector hits
                fts_rows = []
        rows: dict[str, dict[str, Any]] = {}
        bm25: dict[str, float] = {}
        for r in fts_rows:
            rows[r["id"]] = r
            bm25[r["id"]] = float(r["_score"])
        for r in vec_rows:
            rows.setdefault(r["id"], r)
        if not rows:
            return []
        # Ties broken by id, not by where rows sit on disk, so a reindexed store ranks the same.
        ids = sorted(rows)
        q = np.asarray(query_vector, dtype=np.float32)
        matrix = np.asarray([rows[i]["vector"] for i in ids], dtype=np.float32).reshape(len(ids), -1)
        # The exact cosine of every candidate, also of those only full-text found.
        sims = [float(x) for x in matrix @ q]
        docs: dict[str, dict[str, Any]] = {}  # each candidate's JSON parsed at most once

        def doc(mid: str) -> dict[str, Any]:
            if mid not in docs:
                docs[mid] = orjson.loads(rows[mid]["doc"])
            return docs[mid]

        bonus = [0.0] * len(ids)
        if refs:
            from .codetext import name_keys

            defined = set(file_names)
            for j, mid in enumerate(ids):
                bonus[j] = _anchor_bonus(refs, doc(mid).get("anchors") or ())
                if defined and bonus[j] < _BONUS_NAMED and name_keys(doc(mid).get("content") or "") & defined:
                    bonus[j] = _BONUS_NAMED
        zv, zt = _zscores(sims if use_vector else None, [bm25.get(i, 0.0) for i in ids] if use_text else None, len(ids))
        cover = _coverage(fts_text, [rows[i].get("text") or "" for i in ids]) if use_text else [0.0] * len(ids)
        cal = CALIBRATIONS.get(self.embedder.name, CALIBRATIONS[_GENERIC])
        out = []
        for j, mid in enumerate(ids):
            features = (zv[j], sims[j] if use_vector else 0.0, zt[j], cover[j],
                        1.0 if 0 < bonus[j] < _BONUS_EXACT else 0.0, 1.0 if bonus[j] >= _BONUS_EXACT else 0.0)
            rel = calibrated_relevance(features, cal, vector_weight=vector_weight if use_vector else 0.0,
                                       text_weight=text_weight if use_text else 0.0)
            out.append(SearchRow(Memory.from_dict(doc(mid)), sims[j], rel, features))
        # The probability of each candidate, discounted by how far it falls behind the best one
        # (p x (p / p_best) ** gamma): the best keeps its probability, a close second nearly
        # all of it, a distant one little. So the gap between the answer and what merely
        # resembles it survives a stale demotion (x 0.5): on the stale variant of the labeled
        # set (hashing), stale MRR 0.84 x fresh with gamma 0, 0.93 x with 1, 0.97 x with 3; but
        # a higher gamma also pushes a second relevant memory under the floor (of the relevant
        # hits in the top 10, 80% clear it with gamma 0, 75% with 1, 71% with 3).
        best = max((c.relevance for c in out), default=0.0)
        if best > 0:
            for c in out:
                c.match = c.relevance
                c.relevance = c.relevance * (c.relevance / best) ** RUNNER_UP_GAMMA
        out.sort(key=lambda c: (-c.relevance, c.memory.id))
        return out[:k]

    def _file_names(self, refs: Sequence[tuple[str, str, str | None, tuple[int, int] | None]]) -> list[str]:
        """Name keys of what the files a query names (`src/billing/dunning.py`) define."""
        from .codetext import MAX_NAMES, defined_names

        out: list[str] = []
        for _, path, symbol, _ in refs:
            if symbol is not None or "." not in path.rsplit("/", 1)[-1]:
                continue  # `path#Symbol` asks about the symbol; a bare name is no file
            for key in defined_names(self.root_real, path):
                if key not in out:
                    out.append(key)
        return out[:MAX_NAMES]

    def drop(self) -> None:
        import shutil

        from .statefs import refuse_link

        self._table = None
        self._db = None
        self._indexed = None
        refuse_link(self.path, "store folder")  # rmtree never follows a link inside, so a rebuild clears those
        if self.path.is_dir():
            shutil.rmtree(self.path)
        elif os.path.lexists(self.path):  # a stray file where the table belongs
            self.path.unlink()
