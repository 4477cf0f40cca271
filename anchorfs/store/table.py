"""The store: a LanceDB table at `.anchorfs/memories.lance`, the searchable index of memories.

Derived from the ledger and rebuilt by `reindex`. It holds every memory (any status) with its
vector, an expanded text for the full-text index (identifier parts added: the tokenizer does
not split `getUserById`), filter columns and the last known drift. LanceDB is imported lazily.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import types
import warnings
from datetime import timedelta
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ..core.errors import EmbedderError, StoreError
from ..core.statefs import check_state_dir, check_store_dir, fault, open_state, refuse_link
from ..core.model import Memory
from .ranking import SearchRow
from .search import _read, id_filter

if TYPE_CHECKING:
    import numpy as np

    from .embedders import Embedder
    from .ranking import Terms

__all__ = ["Store", "SearchRow", "search_text", "embed_text", "TABLE", "SCHEMA_VERSION", "import_lancedb"]

TABLE = "memories"
NPROBES = 8
"""IVF partitions a query through the vector index visits (of about rows / 1,500)."""
REFINE = 2
"""The index's best REFINE x limit candidates are re-ranked by their exact cosine."""
TEXT_SYNC_ROWS = 5_000
"""Up to this many rows a write rebuilds the full-text index before it returns (`Store.settle`);
past it the background indexer folds new rows in, so a write never waits on a growing cost."""
TEXT_LAG_ROWS = 256
TEXT_LAG_SHARE = 64
"""Past `TEXT_SYNC_ROWS`, unindexed rows (about 50 us a query each) are searched flat up to max(`TEXT_LAG_ROWS`,
rows / `TEXT_LAG_SHARE`); the background indexer then builds the full-text index again, its files alone (no
fragment rewritten). Relevance does not read LanceDB's BM25, so they rank the same."""
SCHEMA_VERSION = "1"
_T = TypeVar("_T")


def embed_text(memory: Memory) -> str:
    """What the embedder sees: content, tags, anchor paths and symbols, as written."""
    parts = [memory.content]
    if memory.tags:
        parts.append(" ".join(memory.tags))
    for anchor in memory.anchors:
        parts.append(anchor.path)
        if anchor.symbol:
            parts.append(anchor.symbol)
    return "\n".join(parts)


def search_text(memory: Memory, code: str = "") -> str:
    """What the full-text index sees: `embed_text`, identifier parts, name keys, the `code`'s vocabulary."""
    from ..anchor.anchors import code_vocabulary
    from ..core.textutil import compound_keys, expand_for_search

    raw = embed_text(memory)
    keys = compound_keys(raw)
    text = expand_for_search(raw)
    text = text + "\n" + " ".join(keys) if keys else text
    vocabulary = code_vocabulary(code) if code else ""
    if vocabulary:
        text += "\n" + expand_for_search(vocabulary)
    return text


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


def _indexer_running(state: Path) -> bool:
    """Whether a background indexer holds `.anchorfs/index.lock` (it re-checks after letting go)."""
    import fcntl

    try:
        fd = open_state(state / "index.lock", os.O_RDWR | os.O_CREAT)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


@contextmanager
def indexer_excluded(state: Path) -> Iterator[None]:
    """Hold `.anchorfs/index.lock` (waiting for a background indexer) while a rebuild drops the table."""
    import fcntl

    fd = open_state(state / "index.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


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
        self._status_indexed = False  # the `status` index seen or built (`status_index`)
        self._index_job: Any = None  # a background build started from here (`maybe_index`)
        self._terms: dict[str, "Terms"] = {}  # full-text -> its term set (`store_search._term_sets`)
        self._flat: Any = None  # the vectors held at one version, and the last version queried (`search.flat`)
        self.settle_writes = True  # `rebuild` turns it off while it bulk-loads, then optimizes once

    # -- opening -------------------------------------------------------------------------

    def _schema(self) -> Any:
        import pyarrow as pa

        s = pa.string()
        columns = [("content", s), ("kind", s), ("tags", pa.list_(s)), ("status", s), ("author", s),
                   ("recorded_at", pa.int64()), ("valid_until", pa.int64()), ("anchored", pa.bool_()), ("drift", s),
                   ("text", s), ("text_hash", s), ("doc", s), ("vector", pa.list_(pa.float32(), self.embedder.dim))]
        return pa.schema([pa.field("id", s, nullable=False), *(pa.field(n, t) for n, t in columns)],
                         metadata={"anchorfs.schema": SCHEMA_VERSION, "anchorfs.embedder": self.embedder.name,
                                   "anchorfs.dim": str(self.embedder.dim)})

    def _connect(self) -> Any:
        """The LanceDB connection, made only once the folder is known to hold no link."""
        if self._db is None:
            check_state_dir(self.path.parent)
            check_store_dir(self.path)
            folder = str(self.path.parent)
            try:
                folder.encode("utf-8")
            except UnicodeEncodeError:  # LanceDB takes UTF-8 paths only; it would fail with a traceback
                raise StoreError(f"LanceDB cannot open {folder!r}: the path is not valid UTF-8; "
                                 "rename the folder to use search") from None
            lancedb = import_lancedb()
            # Always read the latest version: other processes write the same table.
            self._db = lancedb.connect(folder, read_consistency_interval=timedelta(0))
        return self._db

    def exists(self) -> bool:
        """Whether anything is at the store's path (a link there is refused, not followed)."""
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
        self._table = table
        self.status_index()
        return table

    def status_index(self) -> bool:
        """The bitmap index on `status` built if missing (writers only); False when it could not be."""
        if self._status_indexed:
            return True
        table = self.table()
        try:
            if not any("status" in i.columns for i in table.list_indices()):
                from lancedb.index import Bitmap

                _retry(lambda: table.create_index("status", config=Bitmap(), replace=False), "status index")
        except Exception:  # noqa: BLE001 - StoreError from _retry, or list_indices on a damaged table
            return False
        self._status_indexed = True
        return True

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
        from ..anchor.anchors import anchored_text

        codes = [anchored_text(self.root_real, m) if m.anchors else "" for m in memories]
        texts = [search_text(m, c) for m, c in zip(memories, codes)]
        vec_texts = [embed_text(m) for m in memories]
        hashes = [hashlib.sha256(f"{t}\0{v}".encode()).hexdigest() for t, v in zip(texts, vec_texts)]
        todo = [i for i, (m, h) in enumerate(zip(memories, hashes)) if reuse.get(m.id, ("",))[0] != h]
        vectors: dict[int, Any] = {}
        if todo:
            embedded = self.embedder.embed_documents([vec_texts[i] for i in todo])
            vectors = {i: embedded[j] for j, i in enumerate(todo)}
        rows = []
        for i, m in enumerate(memories):
            vec = vectors[i] if i in vectors else reuse[m.id][1]
            rows.append({
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
            })
        return rows

    def _existing(self, ids: Sequence[str]) -> dict[str, tuple[str, Any, str | None]]:
        """text_hash, vector and drift of rows already stored, to skip re-embedding."""
        table = self.table()
        out: dict[str, tuple[str, Any, str | None]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = _read(lambda: table.search().where(id_filter(chunk))
                         .select(["id", "text_hash", "vector", "drift"]).limit(len(chunk)).to_list(), "read")
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
        self.settle()

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace by id; idempotent, so replaying a ledger tail twice is harmless."""
        if not memories:
            return
        mems = list({m.id: m for m in memories}.values())
        existing = self._existing([m.id for m in mems])
        reuse = {k: (v[0], v[1]) for k, v in existing.items()}
        drift = {k: v[2] for k, v in existing.items()}
        rows = self._rows(mems, reuse, drift)
        table = self.table()

        def go() -> None:
            fault("store-write")
            table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)

        _retry(go, "write")
        self.settle()

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
        self.settle()  # an update rewrites its rows: they leave the full-text index until folded in

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
        self.settle()

    def docs(self) -> dict[str, str | None]:
        """Every row's id and `doc` (the memory's JSON), None for an id stored more than once."""
        if not self.path.exists():
            return {}
        table = self.table()
        data = _read(lambda: table.search().select(["id", "doc"]).limit(max(1, table.count_rows())).to_arrow(),
                     "read")
        out: dict[str, str | None] = {}
        for mid, doc in zip(data.column("id").to_pylist(), data.column("doc").to_pylist()):
            out[mid] = None if mid in out else doc
        return out

    def settle(self) -> None:
        """After a write: fold the rows it wrote into the full-text (and vector) index, at once up
        to `TEXT_SYNC_ROWS` rows, else by compaction or the background indexer (`TEXT_LAG_SHARE`)."""
        if not self.settle_writes:
            self.maybe_compact()  # compaction by fragment count alone
            return
        try:
            rows = int(self.table().count_rows())
        except Exception:
            return
        if rows <= TEXT_SYNC_ROWS:
            self.maybe_compact()
            self.rebuild_text_index()
            return
        if self.maybe_compact():  # by fragment count: that folds the new rows in too
            return
        if self.text_unindexed() <= max(TEXT_LAG_ROWS, rows // TEXT_LAG_SHARE):
            return  # searched flat until more pile up (`TEXT_LAG_SHARE`)
        if self._index_job is None or self._index_job.poll() is not None:
            self._index_job = self._spawn_indexer("--text") if not _indexer_running(self.path.parent) else None

    def rebuild_text_index(self) -> bool:
        """The full-text index built again over every row now; False when it failed."""
        from lancedb.index import FTS

        table = self.table()
        try:
            _retry(lambda: table.create_index("text", config=FTS(with_position=False), replace=True), "text index")
        except StoreError:
            return False
        return True

    def text_unindexed(self) -> int:
        """Rows the full-text index does not hold yet (0 when none, or when it cannot tell)."""
        try:
            for index in self.table().list_indices():
                if "text" in index.columns:
                    return int(self.table().index_stats(index.name).num_unindexed_rows)
        except Exception:
            return 0
        return 0

    def _spawn_indexer(self, *args: str) -> Any:
        import subprocess
        import sys

        try:
            return subprocess.Popen(
                [sys.executable, "-c", _INDEXER, str(self.path.parent), str(self.root_real), *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True)
        except OSError:
            return None

    def maybe_compact(self, *, force: bool = False, keep: timedelta = timedelta(minutes=5)) -> bool:
        """Compact when fragments pile up (they slow filtered search), deleting versions older than
        `keep`; past `index_rows` rows, a vector index is built in the background."""
        table = self.table()
        try:
            fragments = table.stats()["fragment_stats"]["num_fragments"]
        except Exception:
            return False
        self.maybe_index()
        self.status_index()
        if not force and fragments < self.compact_fragments:
            return False
        def optimize() -> None:
            with warnings.catch_warnings():  # keep=0 is asked for knowingly (`reindex`, under the lock)
                warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
                table.optimize(cleanup_older_than=keep)

        try:
            _retry(optimize, "compaction")
        except StoreError:
            return False  # only speed is at stake: the write has landed; the next one tries again
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
        """IVF-PQ sized to the table: about 1,500 rows a partition, 16 dimensions a sub-vector."""
        dim = int(self.embedder.dim)
        sub = max(1, dim // 16)
        while dim % sub:
            sub -= 1
        return {"num_partitions": max(1, min(1024, rows // 1500)), "num_sub_vectors": sub}

    def build_index(self) -> bool:
        """Build (or rebuild) the vector index now; False under 256 rows or when the build failed."""
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
        """Past `index_rows` rows without a vector index, build one (detached); whether one started."""
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
        self._index_job = self._spawn_indexer()
        return self._index_job is not None

    def vector_query(self, query_vector: Any, where: str | None = None) -> Any:
        """The vector side of `search`: through the index when there is one, else a flat scan."""
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

    def search(self, text: str, query_vector: "np.ndarray", *, k: int, where: str | None, candidates: int,
               rrf_k: float, vector_weight: float, text_weight: float,
               memories: "Mapping[str, Memory] | None" = None) -> list[SearchRow]:
        """Hybrid search: up to `k` candidates with a calibrated relevance (`ranking`), best first.
        `rrf_k` is no longer used; `memories` (the fold) supplies each `Memory` instead of a read."""
        from .search import search

        return search(self, text, query_vector, k=k, where=where, candidates=candidates,
                      vector_weight=vector_weight, text_weight=text_weight, memories=memories)

    def drop(self) -> None:
        import shutil

        self._table = None
        self._db = None
        self._indexed = None
        self._status_indexed = False
        refuse_link(self.path, "store folder")  # rmtree never follows a link inside, so a rebuild clears those
        if self.path.is_dir():
            shutil.rmtree(self.path)
        elif os.path.lexists(self.path):  # a stray file where the table belongs
            self.path.unlink()


_INDEXER = "import sys; from anchorfs.store.table import index_main; sys.exit(index_main(sys.argv[1:]))"


class _Named:
    """The embedder as the table names it: all the store needs to open and index it."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim


def index_main(argv: list[str]) -> int:
    """The background indexer, `STATE ROOT [--text]`: build the vector index if missing (not with
    `--text`), then fold unindexed rows in; look again after letting `.anchorfs/index.lock` go."""
    import fcntl

    state, root, text_only = Path(argv[0]), argv[1], "--text" in argv[2:]

    code = 0
    for _ in range(4):  # bounded: a steady stream of writes leaves the rest to the next write
        try:
            fd = open_state(state / "index.lock", os.O_RDWR | os.O_CREAT)
        except OSError:
            return 1
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return code  # another builder has it
            probe = Store(state, _Named("", 0), root=root)  # type: ignore[arg-type]
            table = probe._connect().open_table("memories")
            meta = table.schema.metadata or {}
            name = meta.get(b"anchorfs.embedder", b"").decode()
            dim = int(meta.get(b"anchorfs.dim", b"0").decode() or 0)
            store = Store(state, _Named(name, dim), root=root)  # type: ignore[arg-type]
            if not text_only and store.vector_index() is None:
                code = 0 if store.build_index() else 1
            if store.text_unindexed():
                store.rebuild_text_index()
        except Exception:  # noqa: BLE001 - a detached helper: nobody reads a traceback; the table is as it was
            return 1
        finally:
            os.close(fd)
        if not store.text_unindexed():
            return code
    return code

# Loading LanceDB without the REST namespace client it imports and a local table never uses.
# `import lancedb` imports `lance_namespace_urllib3_client`, whose `__init__` (generated REST API
# modules, `urllib3`) is about two thirds of the import. `defer_namespace_client` puts a stand-in
# for that package in `sys.modules`: its `models` import as usual through the real `__path__`,
# and the first use of anything else runs the real `__init__` in place first.

DEFERRED = "lance_namespace_urllib3_client"
"""The package whose `__init__` is deferred."""


class _DeferredPackage(types.ModuleType):
    """A package whose `__init__` runs at the first attribute it does not already hold."""

    def __getattr__(self, name: str) -> Any:  # only called for attributes not found
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._anchorfs_load()
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def _anchorfs_load(self) -> None:
        lock: threading.RLock = self.__dict__["_anchorfs_lock"]
        with lock:
            if self.__dict__.get("_anchorfs_loaded"):
                return
            self.__dict__["_anchorfs_loaded"] = True
            spec = self.__spec__
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(self)  # the real __init__, in this very module object


class _Trigger:
    """A meta path finder running the deferred `__init__` before a submodule outside `models` loads."""

    def __init__(self, module: _DeferredPackage) -> None:
        self.module = module

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        prefix = DEFERRED + "."
        if fullname.startswith(prefix) and not self.module.__dict__.get("_anchorfs_loaded"):
            rest = fullname[len(prefix):]
            if rest != "models" and not rest.startswith("models."):
                self.module._anchorfs_load()
        return None  # the usual finders import it

    def invalidate_caches(self) -> None:
        pass


def defer_namespace_client() -> bool:
    """Install the stand-in unless the package is imported or missing; returns whether it was."""
    if DEFERRED in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(DEFERRED)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = _DeferredPackage(DEFERRED)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = DEFERRED
    module.__dict__["_anchorfs_lock"] = threading.RLock()
    module.__dict__["_anchorfs_loaded"] = False
    if sys.modules.setdefault(DEFERRED, module) is not module:
        return False
    sys.meta_path.insert(0, _Trigger(module))  # type: ignore[arg-type]
    return True


def _mark_override(method: Any = None, **_: Any) -> Any:
    """`overrides.override` without its checks: the flag `EnforceOverrides` reads, nothing else."""
    if method is None:
        return _mark_override
    method.__override__ = True
    return method


def import_lancedb() -> Any:
    """`import lancedb`, the namespace client deferred and, on Python < 3.12, the costly `overrides`
    decorator reduced to the flag it sets while LanceDB's classes are defined."""
    defer_namespace_client()
    if "lancedb" in sys.modules or sys.version_info >= (3, 12):
        import lancedb

        return lancedb
    try:
        import overrides
    except ImportError:
        import lancedb

        return lancedb
    saved = overrides.override, getattr(overrides, "overrides", None)
    overrides.override = _mark_override  # type: ignore[assignment]
    if saved[1] is not None:
        overrides.overrides = _mark_override  # type: ignore[attr-defined]
    try:
        import lancedb
    finally:
        overrides.override = saved[0]  # type: ignore[assignment]
        if saved[1] is not None:
            overrides.overrides = saved[1]  # type: ignore[attr-defined]
    return lancedb
