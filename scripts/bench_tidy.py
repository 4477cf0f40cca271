#!/usr/bin/env python3
"""How well `similar` and `conflicts` are found (issue 40, item 3), and what finding them costs a write.

Quality: every pair of `evals/tidy/pairs.jsonl` (labelled duplicate, conflict, unrelated or
refinement; written from the Quillpay code without the detector) judged as a write judges it:
the two memories' ground first (their anchors, or a path one's text names), then the texts.
Precision and recall of `conflicts` against the `conflict` label and of `similar` against
`duplicate`, on the whole set and on its odd and even halves (the rules were written before the
set was, then adjusted once against it: the halves show how much that fitted).

Cost: in a store of N memories (`--memories`, anchored over 400 files), one `record` with and
without the candidate search, medians of `--repeat` runs in one process, side by side.

    python scripts/bench_tidy.py [--memories 10000] [--repeat 15] [--base DIR] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "evals" / "tidy"))

from tidy_pairs import load_pairs  # noqa: E402

from anchorfs.anchor.anchors import parse_spec  # noqa: E402
from anchorfs.core.model import Memory  # noqa: E402
from anchorfs.sdk.tidy import Ground  # noqa: E402

WANTED = {"conflicts": "conflict", "similar": "duplicate"}


def judge(pair: dict) -> str | None:
    """What a write of `b` says about `a`: `conflicts`, `similar` or None."""
    a, b = (Memory(id=f"{pair['id']}{side}", content=pair[side]["content"], kind=pair[side]["kind"],
                   anchors=tuple(parse_spec(s) for s in pair[side]["anchors"])) for side in "ab")
    found = Ground([a]).candidates([b])[b.id]
    return found[0].kind if found else None


def scores(pairs: list[dict]) -> dict[str, dict[str, float]]:
    out = {}
    said = [(p["label"], judge(p)) for p in pairs]
    for kind, label in WANTED.items():
        tp = sum(1 for lab, got in said if got == kind and lab == label)
        fp = sum(1 for lab, got in said if got == kind and lab != label)
        fn = sum(1 for lab, got in said if got != kind and lab == label)
        out[kind] = {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
                     "tp": tp, "fp": fp, "fn": fn}
    return out


def misses(pairs: list[dict]) -> list[str]:
    out = []
    for p in pairs:
        got = judge(p)
        if (got is not None and WANTED[got] != p["label"]) or (p["label"] in WANTED.values() and got is None):
            out.append(f"{p['id']} {p['label']} -> {got}: {p['why']}")
    return out


def by_meaning(pairs: list[dict], names: list[str]) -> list[str]:
    """Whether an embedder's cosine of the two texts tells the labels apart (the alternative to
    form rules): per embedder, the median cosine of each label, and the best near-duplicate
    precision any cosine threshold reaches (fitted on the set: an upper bound) with its recall,
    alone and gated by the form rules (no conflict found, same quantities and polarity, both
    sides reworded, not two names)."""
    from anchorfs.sdk.tidy import Claim, compare
    from anchorfs.store.embedders import get_embedder

    def gate(p: dict) -> bool:
        a, b = p["a"]["content"], p["b"]["content"]
        ca, cb = Claim.of(a), Claim.of(b)
        only_a, only_b = ca.terms - cb.terms, cb.terms - ca.terms
        return ((compare(a, b) or ("",))[0] != "conflicts" and ca.negated == cb.negated and not ca.flipped ^ cb.flipped
                and ca.quantities == cb.quantities and bool(only_a) and bool(only_b)
                and not (only_a & ca.code and only_b & cb.code))

    def best(cos: list[float], keep: list[bool]) -> str:
        dups = sum(p["label"] == "duplicate" for p in pairs)
        top = (0.0, 0.0, 0.0)
        for t in sorted(set(cos)):
            said = [p["label"] for c, p, k in zip(cos, pairs, keep) if c >= t and k]
            if said.count("duplicate") >= 3:
                top = max(top, (said.count("duplicate") / len(said), said.count("duplicate") / dups, t))
        return f"{top[0]:.2f} (>= {top[2]:.3f}, recall {top[1]:.2f})"

    gated = [gate(p) for p in pairs]
    out = ["| embedder | duplicate | conflict | refinement | unrelated | best `similar` precision (threshold, recall) "
           "| the same, gated by the form rules |", "|---|---:|---:|---:|---:|---|---|"]
    for name in names:
        try:
            emb = get_embedder(name)
            a = emb.embed_documents([p["a"]["content"] for p in pairs])
            b = emb.embed_documents([p["b"]["content"] for p in pairs])
        except Exception as exc:  # an optional model not installed: say so, measure the rest
            out.append(f"| {name} | not available: {exc} | | | | | |")
            continue
        cos = [float(x) for x in (a * b).sum(axis=1)]
        med = {lab: statistics.median(c for c, p in zip(cos, pairs) if p["label"] == lab)
               for lab in ("duplicate", "conflict", "refinement", "unrelated")}
        out.append(f"| {name} | {med['duplicate']:.2f} | {med['conflict']:.2f} | {med['refinement']:.2f} | "
                   f"{med['unrelated']:.2f} | {best(cos, [True] * len(pairs))} | {best(cos, gated)} |")
    return out


def cost(n: int, repeat: int, base: str | None = None) -> tuple[float, float, dict[str, float]]:
    """Median ms of one `record` in a store of `n` memories, with and without the candidate search
    (in one warm process); and of a one-shot `anchorfs record` process beside `python3 -c pass`
    (and beside the code at `base`, a checkout before the search, when given), taking turns."""
    import anchorfs
    from anchorfs.sdk import workspace

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / "src").mkdir()
        files = [f"src/m{i}.py" for i in range(400)]
        for f in files:
            (root / f).write_text(f"def f{f[5:-3]}():\n    return {f[5:-3]}\n")
        anchorfs.init(root)
        ws = anchorfs.open(root)
        words = "cache retry token invoice email webhook ledger export import session".split()
        texts = [f"the {words[i % 10]} code of {files[i % 400]} is load-bearing for {words[i // 400 % 10]}s "
                 f"and {words[i // 4000 % 10]}s" for i in range(n)]
        assert len(set(texts)) == n, "every memory its own text: a repeat is not written"
        ws.record_many([{"content": t, "anchors": [files[i % 400]]} for i, t in enumerate(texts)])
        real = workspace.Workspace._candidates
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(repeat):
            for on in (True, False):
                workspace.Workspace._candidates = real if on else (lambda self, ms, retiring=None: {m.id: () for m in ms})
                t = time.perf_counter()
                ws.record(f"the export code of {files[i]} runs in {i + 2} seconds", anchors=[files[i]])
                times[on].append((time.perf_counter() - t) * 1000)
        workspace.Workspace._candidates = real
        codes = {"python3 -c pass": None, "anchorfs record": str(ROOT), **({"anchorfs record at base": base} if base else {})}
        runs: dict[str, list[float]] = {name: [] for name in codes}
        import shutil

        twin = Path(tmp + "-base")  # its own copy: the two codes' fold snapshots are of different versions
        shutil.copytree(root, twin, symlinks=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for i in range(repeat):
            for name, code in codes.items():
                argv = [sys.executable, "-c", "pass"] if code is None else [
                    sys.executable, "-m", "anchorfs", "record", f"the export code of {files[100 + i]} runs in {i + 3} seconds",
                    "--anchor", files[100 + i]]
                t = time.perf_counter()
                subprocess.run(argv, cwd=twin if name.endswith("base") else root, env={**env, "PYTHONPATH": code or ""},
                               check=True, capture_output=True)
                runs[name].append((time.perf_counter() - t) * 1000)
        shutil.rmtree(twin)
        return statistics.median(times[True]), statistics.median(times[False]), {k: statistics.median(v) for k, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--base", default=None, metavar="DIR", help="A checkout before the candidate search, timed beside.")
    ap.add_argument("--write", action="store_true", help="Replace the section in docs/benchmarks.md.")
    ap.add_argument("--embedders", default="", metavar="NAMES",
                    help="Only this: how each embedder's cosine (comma-separated names) separates the labels.")
    args = ap.parse_args()
    pairs = load_pairs()
    if args.embedders:
        print("\n".join(by_meaning(pairs, args.embedders.split(","))))
        return
    rows = [("all", pairs), ("odd ids", [p for p in pairs if int(p["id"][1:]) % 2]),
            ("even ids", [p for p in pairs if not int(p["id"][1:]) % 2])]
    lines = ["| pairs | n | conflicts precision | conflicts recall | similar precision | similar recall |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, ps in rows:
        s = scores(ps)
        lines.append(f"| {name} | {len(ps)} | {s['conflicts']['precision']:.2f} ({s['conflicts']['fp']} false) | "
                     f"{s['conflicts']['recall']:.2f} | {s['similar']['precision']:.2f} ({s['similar']['fp']} false) | "
                     f"{s['similar']['recall']:.2f} |")
    with_c, without, procs = cost(args.memories, args.repeat, args.base)
    py = procs["python3 -c pass"]
    text = "\n".join([
        "## Similar and conflicting memories (issue 40)", "",
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; {date.today()}.", "",
        f"`python scripts/bench_tidy.py --memories {args.memories} --repeat {args.repeat}"
        f"{' --base ' + args.base if args.base else ''}`: the labelled set "
        "`evals/tidy/` (232 pairs about Quillpay), each pair judged as a write judges it (ground, then the texts).", "",
        *lines, "",
        f"One `record` in a store of {args.memories:,} memories (SDK, warm process, median of {args.repeat}): "
        f"{with_c:.1f} ms with the candidate search, {without:.1f} ms without. One-shot processes, medians of "
        f"{args.repeat} taking turns: " + "; ".join(f"{name} {ms:.0f} ms ({ms / py:.1f}x)" for name, ms in procs.items())
        + ".", "",
    ])
    print(text)
    print("\n".join(misses(pairs)), file=sys.stderr)
    if args.write:
        doc = ROOT / "docs" / "benchmarks.md"
        old = doc.read_text()
        start = old.find("## Similar and conflicting memories (issue 40)")
        if start >= 0:
            end = old.find("\n## ", start + 3)
            old = old[:start] + old[end + 1:] if end >= 0 else old[:start]
        doc.write_text(old.rstrip("\n") + "\n\n" + text)


if __name__ == "__main__":
    main()
