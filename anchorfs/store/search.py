"""The store's search path: both sides of a hybrid query, fused into calibrated relevances.

Each side reads only the columns the fusion needs; the memory's JSON (`doc`, the widest
column) is read by row id for the few candidates the drift pass reads (`_Docs`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ..core.errors import StoreError
from ..core.model import Memory
from .ranking import SearchRow, Terms

if TYPE_CHECKING:
    import numpy as np

    from .table import Store

__all__ = ["search", "SIDE_COLUMNS", "TERMS_KEPT"]

SIDE_COLUMNS = ["id", "text", "vector"]
"""What each side reads of its rows: not `doc` (read by row id, only when a memory is read)."""
TERMS_KEPT = 65_536
"""Full-texts whose term sets a store keeps between queries (`_term_sets`)."""
_DOC_BATCH = 16
"""Docs read at once when a memory is read: the drift pass reads the best candidates in order."""
FLAT_ROWS = 20_000
"""Up to this many rows (no vector index yet), a process that queries one table version twice
holds its vectors (`_Flat`): a server's vector side is then a product in numpy, not a scan."""
_FLAT_WHERE = {"status = 'active'": ("active", True), "status != 'proposed'": ("proposed", False)}

_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _side_pool() -> ThreadPoolExecutor:
    """One thread for a query's full-text side while the caller runs its vector side (per process)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="anchorfs-fts"))
    return _POOL[1]


def _vectors(data: Any) -> "np.ndarray":
    """The vector column as one (rows, dim) float32 matrix, without a Python list per row."""
    import numpy as np

    col = data.column("vector").combine_chunks()
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(col), -1)


class _Side:
    """One side's answer (an Arrow table, or None): its best `n` rows by score then id."""

    def __init__(self, data: Any, key: str, sign: float, n: int) -> None:
        self.data = data
        self._columns: dict[str, list[Any]] = {}
        self.ids: list[str] = [] if data is None else data.column("id").to_pylist()
        self.scores: list[float] = [] if data is None else [float(x) for x in data.column(key).to_pylist()]
        self.order = sorted(range(len(self.ids)), key=lambda j: (sign * self.scores[j], self.ids[j]))[:n]

    def column(self, name: str) -> list[Any]:
        if name not in self._columns:
            self._columns[name] = self.data.column(name).to_pylist()
        return self._columns[name]


class _Flat:
    """A table version's rows held in memory: `side` is LanceDB's flat vector query (cosine distance) for
    the filters a query uses, `rows` the rows whose scores a full-text query read (it reads nothing else)."""

    def __init__(self, version: int, data: Any) -> None:
        import numpy as np

        self.version = version
        status = np.asarray(data.column("status").to_pylist(), dtype=object)
        self.rows_of = {where: np.flatnonzero((status == value) == equal)
                        for where, (value, equal) in _FLAT_WHERE.items()}
        self.data = data.drop_columns(["status", "doc"]).combine_chunks()  # one chunk: `take` is then cheap
        self.docs: list[str | None] = data.column("doc").to_pylist()
        self.at = {rid: j for j, rid in enumerate(self.data.column("_rowid").to_pylist())}
        self.matrix = _vectors(self.data)
        norms = np.linalg.norm(self.matrix, axis=1)
        self.norms = np.where(norms > 0, norms, np.inf)  # a zero vector: at distance 1 from all

    def side(self, query: "np.ndarray", where: str | None, n: int) -> Any:
        import numpy as np
        import pyarrow as pa

        q = np.asarray(query, dtype=np.float32)
        dist = 1.0 - (self.matrix @ q) / (self.norms * (float(np.linalg.norm(q)) or 1.0))
        keep = np.arange(len(dist)) if where is None else self.rows_of[where]  # the filter's rows, found at load
        if len(keep) > n:  # the n nearest, and any tied with the last (`_Side` orders ties by id)
            keep = keep[dist[keep] <= np.partition(dist[keep], n - 1)[n - 1]]
        return self.data.take(pa.array(keep)).append_column("_distance", pa.array(dist[keep], pa.float32()))

    def rows(self, scored: Any) -> Any:
        """The held rows of `scored` (row ids and `_score`), or None when one is not held (a newer version)."""
        import pyarrow as pa

        at = [self.at.get(rid) for rid in scored.column("_rowid").to_pylist()]
        if None in at:
            return None
        return self.data.take(pa.array(at, pa.int64())).append_column("_score", scored.column("_score"))


def flat(store: "Store", table: Any, where: str | None) -> _Flat | None:
    """The vectors held for `table`'s version, read when a version is queried twice (never by a one-shot
    process); None past `FLAT_ROWS`, with a vector index, or for a filter `_Flat` does not know."""
    if where is not None and where not in _FLAT_WHERE:
        return None
    version = table.version
    held, seen = store._flat or (None, None)
    if held is not None and held.version == version:
        return held
    store._flat = (None, version)
    if seen != version or not 0 < int(table.count_rows()) <= FLAT_ROWS or store.vector_index() is not None:
        return None
    data = table.search().select(["id", "status", "text", "vector", "doc"]).with_row_id(True).limit(FLAT_ROWS).to_arrow()
    store._flat = (_Flat(version, data), version)
    return store._flat[0]


class _Docs:
    """The candidates' `doc` (a memory's JSON), read by row id when first needed (moved rows by id)."""

    def __init__(self, store: "Store", rowids: dict[str, int]) -> None:
        self.store = store
        self.rowids = rowids
        self.rank: list[str] = []  # best first, set once the candidates are ranked
        self._at: dict[str, int] = {}
        self.got: dict[str, str | None] = {}

    def ranked(self, ids: list[str]) -> None:
        self.rank = ids
        self._at = {mid: j for j, mid in enumerate(ids)}

    def get(self, mid: str) -> str | None:
        if mid not in self.got:
            j = self._at.get(mid, 0)
            want = [m for m in self.rank[j:j + max(_DOC_BATCH, len(self.got))] if m not in self.got]
            self.fetch(want if mid in want else [mid, *want])
        return self.got.get(mid)

    def fetch(self, ids: Sequence[str]) -> None:
        """Read the docs of `ids` not read yet: by row id, then by id for any row that moved."""
        todo = [m for m in dict.fromkeys(ids) if m not in self.got]
        if not todo:
            return
        table = self.store.table()
        want = {self.rowids[m]: m for m in todo if m in self.rowids}
        if want:
            try:
                data = table.take_row_ids(list(want)).select(["id", "doc"]).with_row_id().to_arrow()
            except Exception:  # noqa: BLE001 - a row id gone with a compaction: read by id below
                data = None
            if data is not None:
                for rid, mid, doc in zip(data.column("_rowid").to_pylist(), data.column("id").to_pylist(),
                                         data.column("doc").to_pylist()):
                    if want.get(rid) == mid:
                        self.got[mid] = doc
        moved = [m for m in todo if m not in self.got]
        if moved:
            rows = _read(lambda: table.search().where(id_filter(moved)).select(["id", "doc"])
                         .limit(len(moved)).to_arrow(), "read")
            for mid, doc in zip(rows.column("id").to_pylist(), rows.column("doc").to_pylist()):
                self.got.setdefault(mid, doc)
            for mid in moved:
                self.got.setdefault(mid, None)  # deleted meanwhile


class _LazyRow(SearchRow):
    """A candidate whose `Memory` is built from its JSON at the first read."""

    __slots__ = ("id", "_docs", "_memory")

    def __init__(self, mid: str, docs: _Docs, similarity: float, relevance: float,
                 features: tuple[float, ...], memory: Memory | None = None) -> None:
        self.id = mid
        self._docs = docs
        super().__init__(None, similarity, relevance, features)  # type: ignore[arg-type]
        self._memory: Memory | None = memory

    @property  # type: ignore[override]
    def memory(self) -> Memory:
        if self._memory is None:
            doc = self._docs.get(self.id)
            if doc is None:
                raise StoreError(f"memory {self.id} left the store while it was read; run the query again")
            self._memory = Memory.from_dict(orjson.loads(doc))
        return self._memory

    @memory.setter
    def memory(self, value: Memory | None) -> None:
        self._memory = value


_T = TypeVar("_T")


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def id_filter(ids: Iterable[str]) -> str:
    return "id IN (" + ", ".join(_quote(i) for i in ids) + ")"


def _read(fn: Callable[[], _T], what: str) -> _T:
    """A read of a damaged table (data files deleted or garbled) is a StoreError, never a traceback."""
    try:
        return fn()
    except Exception as exc:  # lancedb raises plain RuntimeError / OSError / ValueError
        brief = " ".join(str(exc).split())[:300]  # one line for the CLI, however lance words it
        raise StoreError(f"store {what} failed ({brief}); run `anchorfs reindex` to rebuild it from the ledger") from exc


def search(store: "Store", text: str, query_vector: "np.ndarray", *, k: int, where: str | None, candidates: int,
           vector_weight: float, text_weight: float, memories: Mapping[str, Memory] | None = None) -> list[SearchRow]:
    """`Store.search` (see there): full-text and vector candidates, fused by calibrated relevance."""
    import numpy as np

    from .ranking import (BONUS_EXACT, BONUS_NAMED, anchor_bonus, anchor_refs, bm25_units, calibrated_relevance,
                          calibration, coverage, fts_query, term_sets)
    from ..core.textutil import compound_keys, expand_for_search, search_terms

    table = store.table()
    n = max(1, candidates, k)
    # LanceDB breaks ties at the cut by disk order: take more, order by score then id, keep n
    fetch = 2 * n + 10
    cols = SIDE_COLUMNS  # drift is not read: every hit is checked afresh
    use_text = text_weight > 0
    use_vector = vector_weight > 0 or not use_text
    refs = anchor_refs(text)
    file_names = _file_names(store, refs) if refs else []
    fts_text = " ".join([*expand_for_search(text).split(), *compound_keys(text)])
    fts_text = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in fts_text).strip()
    kept = _read(lambda: flat(store, table, where), "search") if use_vector else None
    pending: Future[Any] | None = None
    if fts_text and use_text:
        fq = table.search(fts_query(fts_text, file_names), query_type="fts", fts_columns="text")
        if where:
            fq = fq.where(where, prefilter=True)
        # the two sides are independent: the full-text one runs while the vector one does
        pending = _side_pool().submit(fq.select(["_score"] if kept is not None else [*cols, "_score"])
                                      .with_row_id(True).limit(fetch).to_arrow)
    vec: Any = None
    try:
        if kept is not None:
            vec = kept.side(query_vector, where, fetch)
        elif use_vector:
            vq = store.vector_query(query_vector, where).select([*cols, "_distance"]).with_row_id(True).limit(fetch)
            vec = _read(vq.to_arrow, "search")
    finally:
        fts: Any = None
        if pending is not None:
            try:
                fts = pending.result()
            except Exception:  # an odd query the FTS parser refuses still gets vector hits
                fts = None
    # the held rows of the scores read; a row written since the held version: LanceDB reads the side again
    if fts is not None and kept is not None and (fts := kept.rows(fts)) is None:
        fts = _read(fq.select([*cols, "_score"]).with_row_id(True).limit(fetch).to_arrow, "search")
    sides = [_Side(fts, "_score", -1.0, n), _Side(vec, "_distance", 1.0, n)]
    # id -> (side, row), full-text first
    rows: dict[str, tuple[_Side, int]] = {}
    for side in sides:
        for j in side.order:
            rows.setdefault(side.ids[j], (side, j))
    if not rows:
        return []
    ids = sorted(rows)
    q = np.asarray(query_vector, dtype=np.float32)
    matrix = np.empty((len(ids), q.shape[0]), dtype=np.float32)
    for side in sides:
        at = [j for j, mid in enumerate(ids) if rows[mid][0] is side]
        if at:
            matrix[at] = _vectors(side.data)[[rows[ids[j]][1] for j in at]]
    # The exact cosine of every candidate, also of those only full-text found.
    sims = [float(x) for x in matrix @ q]
    docs = _Docs(store, {mid: int(side.column("_rowid")[j]) for mid, (side, j) in rows.items()})
    if kept is not None:  # a row id names one row for good (fragments are immutable): its doc is held
        docs.got.update((mid, kept.docs[kept.at[rid]]) for mid, rid in docs.rowids.items() if rid in kept.at)
    parsed: dict[str, dict[str, Any]] = {}  # each candidate's JSON parsed at most once

    def doc(mid: str) -> dict[str, Any]:
        if mid not in parsed:
            raw = docs.get(mid)
            parsed[mid] = orjson.loads(raw) if raw is not None else {}
        return parsed[mid]

    bonus = [0.0] * len(ids)
    if refs:
        from ..anchor.anchors import name_keys

        docs.fetch(ids)  # every candidate's anchors are read: all docs in one read
        defined = set(file_names)
        for j, mid in enumerate(ids):
            bonus[j] = anchor_bonus(refs, doc(mid).get("anchors") or ())
            if defined and bonus[j] < BONUS_NAMED and name_keys(doc(mid).get("content") or "") & defined:
                bonus[j] = BONUS_NAMED
    if use_text:
        docs_terms = _term_sets(store, [rows[i][0].column("text")[rows[i][1]] or "" for i in ids], term_sets)
        if refs and any(bonus):
            # a memory anchored where the query points holds the reference's terms
            named = " ".join(" ".join([expand_for_search(tok), *compound_keys(tok)]) for tok, *_ in refs)
            ref_terms = frozenset(search_terms("".join(ch if ch.isalnum() or ch.isspace() else " " for ch in named)))
            cover = coverage(search_terms(fts_text), [d | ref_terms if b > 0 else d
                                                      for d, b in zip(docs_terms, bonus)])
        else:
            cover = coverage(search_terms(fts_text), docs_terms)
        # the terms searched for, their document frequencies counted over the candidates
        asked = frozenset(search_terms(fts_query(fts_text, file_names)))
        df: dict[str, int] = {}
        for d in docs_terms:
            for t in asked.intersection(d):
                df[t] = df.get(t, 0) + 1
        table_rows = len(kept.docs) if kept else int(_read(table.count_rows, "count"))  # BM25's idf grows with it
        units = [bm25_units(d, asked, table_rows, df) for d in docs_terms]
    else:
        units = cover = [0.0] * len(ids)
    cal = calibration(store.embedder.name)
    out: list[_LazyRow] = []
    for j, mid in enumerate(ids):
        features = (sims[j] if use_vector else 0.0, units[j], cover[j],
                    1.0 if 0 < bonus[j] < BONUS_EXACT else 0.0, 1.0 if bonus[j] >= BONUS_EXACT else 0.0)
        rel = calibrated_relevance(features, cal, vector_weight=vector_weight if use_vector else 0.0,
                                   text_weight=text_weight if use_text else 0.0)
        held = memories.get(mid) if memories is not None else None
        if held is None and parsed.get(mid):
            held = Memory.from_dict(parsed[mid])
        out.append(_LazyRow(mid, docs, sims[j], rel, features, held))
    # best relevance first, ties by id: the id the row holds (its Memory is built only when read)
    out.sort(key=lambda r: (-r.relevance, r.id))
    best: list[SearchRow] = [*out[:k]]
    docs.ranked([r.id for r in out[:k]])
    return best


def _term_sets(store: "Store", texts: list[str], term_sets: Callable[[Sequence[str]], list[Terms]]
               ) -> list[Terms]:
    """`ranking.term_sets` of the candidates' full-texts, each text's kept between queries."""
    memo = store._terms
    missing = list(dict.fromkeys(t for t in texts if t not in memo))
    if missing:
        if len(memo) + len(missing) > TERMS_KEPT:  # bounded: a long-lived server sees every memory
            memo.clear()
            missing = list(dict.fromkeys(texts))
        memo.update(zip(missing, term_sets(missing)))
    return [memo[t] for t in texts]


def _file_names(store: "Store", refs: Sequence[tuple[str, str, str | None, tuple[int, int] | None]]) -> list[str]:
    """Name keys of what the files a query names (`src/billing/dunning.py`) define."""
    from ..anchor.anchors import MAX_NAMES, defined_names

    out: list[str] = []
    for _, path, symbol, _ in refs:
        if symbol is not None or "." not in path.rsplit("/", 1)[-1]:
            continue  # `path#Symbol` asks about the symbol; a bare name is no file
        for key in defined_names(store.root_real, path):
            if key not in out:
                out.append(key)
    return out[:MAX_NAMES]
