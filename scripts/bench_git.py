#!/usr/bin/env python3
"""Benchmark what git costs the write and read paths, against the same workspace without `.git`.

- `record_many` throughput: N anchored memories in batches, in a git repo and with `.git`
  moved away (same files, same memories), and the git processes each batch starts;
- `ws.query()` p50 at N memories in the git repo and without `.git`, against a bare native
  LanceDB hybrid search of the same table, and the git processes each query starts (the
  history envelope: HEAD once per query, commit names once per commit and HEAD).

Git processes are counted by wrapping `subprocess.Popen` (every `subprocess.run` goes
through it). Usage: python scripts/bench_git.py [--memories 10000] [--files 1000]
[--batch 1000] [--queries 60] [--write]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, write_section  # noqa: E402

import anchorfs  # noqa: E402

WORDS = ("token expiry auth session cache invoice billing user account retry queue worker "
         "migration schema index config deploy region timeout limit header cookie jwt refresh").split()

_git_processes = [0]
_RealPopen = subprocess.Popen


class _CountingPopen(_RealPopen):  # type: ignore[misc, type-arg]
    def __init__(self, args: Any, *rest: Any, **kw: Any) -> None:
        if isinstance(args, (list, tuple)) and args and args[0] == "git":
            _git_processes[0] += 1
        super().__init__(args, *rest, **kw)


subprocess.Popen = _CountingPopen  # type: ignore[misc]


def _git(cwd: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    _RealPopen(["git", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL).wait()


def build(root: Path, files: int) -> None:
    (root / "src").mkdir(parents=True)
    for f in range(files):
        (root / "src" / f"m{f:04d}.py").write_text(
            "".join(f"def fn{j}(x):\n    return x + {f * 100 + j}\n\n" for j in range(30)))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "tree")
    anchorfs.init(root)


def items(rng: random.Random, start: int, n: int, files: int) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + n):
        f = i % files
        anchor = [f"src/m{f:04d}.py#fn{i % 30}"] if i % 2 else [f"src/m{f:04d}.py"]
        out.append({"content": f"{' '.join(rng.sample(WORDS, 6))} fn{i % 30} #{i}", "anchors": anchor})
    return out


def record(root: Path, n: int, files: int, batch: int) -> tuple[float, float]:
    """(memories/s, git processes per batch)."""
    rng = random.Random(7)
    ws = anchorfs.open(root)
    ws.record_many(items(rng, 0, 10, files))  # warm: embedder, store, top level
    _git_processes[0] = 0
    t = time.perf_counter()
    done = batches = 0
    while done < n:
        k = min(batch, n - done)
        ws.record_many(items(rng, 10 + done, k, files))
        done += k
        batches += 1
    elapsed = time.perf_counter() - t
    per_batch = _git_processes[0] / batches
    ws.close()
    return n / elapsed, per_batch


def query(root: Path, queries: list[str]) -> tuple[float, float, float]:
    """(query p50 s, bare hybrid p50 s, git processes per query)."""
    ws = anchorfs.open(root)
    ws.store.maybe_compact(force=True)
    table, emb = ws.store.table(), ws.embedder
    for q in queries[:5]:
        ws.query(q, k=10)
    ours, bare = [], []
    _git_processes[0] = 0
    for q in queries:
        t = time.perf_counter()
        ws.query(q, k=10)
        ours.append(time.perf_counter() - t)
    per_query = _git_processes[0] / len(queries)
    for q in queries:
        t = time.perf_counter()
        table.search(query_type="hybrid", vector_column_name="vector", fts_columns="text") \
            .vector(emb.embed_query(q)).text(q).where("status = 'active'", prefilter=True) \
            .select(["id", "doc"]).limit(10).to_list()
        bare.append(time.perf_counter() - t)
    ws.close()
    return statistics.median(ours), statistics.median(bare), per_query


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rng = random.Random(11)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
    rows_w, rows_q = [], []
    with tempfile.TemporaryDirectory(prefix="anchorfs-bench-git-") as tmp:
        for label in ("git repo", "no .git"):
            root = Path(tmp) / label.replace(" ", "-").replace(".", "")
            build(root, args.files)
            if label == "no .git":
                shutil.rmtree(root / ".git")
            rate, per_batch = record(root, args.memories, args.files, args.batch)
            rows_w.append(f"| {label} | {args.memories:,} | {rate:,.0f} memories/s | {per_batch:.1f} |")
            if label == "git repo":
                _git(root, "commit", "-q", "--allow-empty", "-m", "later")  # envelopes count commits since
            p50, bare, per_query = query(root, queries)
            rows_q.append(f"| {label} | {args.memories + 10:,} | {p50 * 1000:.1f} ms | {bare * 1000:.1f} ms "
                          f"| {p50 / bare:.2f}x | {per_query:.2f} |")
            print(rows_w[-1], rows_q[-1], sep="\n", flush=True)
    body = (
        f"Machine: {machine()}.\n\n"
        f"`python scripts/bench_git.py --memories {args.memories} --files {args.files} --batch {args.batch}`: "
        f"anchored memories (half whole-file, half to a function) over {args.files:,} committed Python files, "
        f"recorded with `record_many` in batches of {args.batch:,}, in a git repo and in the same tree "
        "without `.git`. Git processes are counted by wrapping `subprocess.Popen`.\n\n"
        "| workspace | memories | record_many | git processes per batch |\n|---|---|---|---|\n"
        + "\n".join(rows_w) + "\n\n"
        f"`ws.query()` (k=10, {len(queries)} queries of 3 words, all hits fresh, one commit after the anchors) "
        "against a bare native LanceDB hybrid search of the same table:\n\n"
        "| workspace | memories | query p50 | bare hybrid p50 | ratio | git processes per query |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows_q)
    )
    print(body)
    if args.write:
        write_section("Git costs", body)


if __name__ == "__main__":
    main()
