"""The numpy path against today's torch path (anchorfs MiniLMEmbedder) on 200 varied texts: 1 - cosine.

    python compare.py                 # computes the torch vectors (needs torch) and keeps them in torch_ref.npy
    python compare.py torch_ref.npy   # against vectors kept before: no torch needed
    MODULE=variant_erf_gelu python compare.py torch_ref.npy

texts.json is corpus.texts() frozen once (the repository it samples changes under us): 50 short queries,
40 paragraphs of docs and code over 256 word pieces, 40 identifiers and code lines, 40 unicode and edge cases
(accents, Greek final sigma, CJK incl. the 0x2B820 range, emoji, controls, zero-width, words of 100/101 chars,
empty), 30 paths, URLs, hashes, JSON, numbers and base64.
"""
import importlib, json, os, sys
import numpy as np
from modeldir import model_dir

minilm_np = importlib.import_module(os.environ.get("MODULE", "minilm_np"))
texts = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "texts.json")))
m = minilm_np.MiniLM(model_dir())
lens = np.array([len(m.tokenize(t)) for t in texts])
mine = m.embed(texts)
one = np.stack([m.embed([t])[0] for t in texts])  # one text per call (the query path)
if len(sys.argv) > 1:
    ref = np.load(sys.argv[1]).astype(np.float32)
else:
    from anchorfs.store.embedders import MiniLMEmbedder
    ref = MiniLMEmbedder().embed_documents(texts)
    np.save("torch_ref.npy", ref)
n_uni = len(texts) - 130 - 30
groups = {"short": slice(0, 50), "long": slice(50, 90), "code": slice(90, 130), "unicode": slice(130, 130 + n_uni),
          "misc": slice(130 + n_uni, len(texts))}
for name, v in (("batched", mine), ("one by one", one)):
    d = 1.0 - np.sum(v * ref, axis=1) / np.linalg.norm(v, axis=1) / np.linalg.norm(ref, axis=1)
    print(f"{name}: {len(texts)} texts, 1-cos max {d.max():.2e} mean {d.mean():.2e}, max |diff| {np.abs(v - ref).max():.2e}; "
          + ", ".join(f"{g} {d[s].max():.1e}" for g, s in groups.items()))
print(f"pieces per text: min {lens.min()}, median {int(np.median(lens))}, max {lens.max()} ({(lens == 256).sum()} cut at 256);"
      f" |norm - 1| max {np.abs(np.linalg.norm(mine, axis=1) - 1).max():.1e}; dtype {mine.dtype}")
