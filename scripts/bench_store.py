#!/usr/bin/env python3
"""Benchmark the store: record throughput and query latency, against bare LanceDB in the same run.

- record throughput: N anchored memories recorded in batches (ledger append + fsync, anchors
  taken and hashed, embedded, written to LanceDB);
- query latency at 10k and 100k memories: `Workspace.query` (hybrid search + drift pass +
  demotion) against a bare LanceDB vector search and a bare native hybrid search of the same
  table, each run on the same queries;
- the vector index (issue 19): at sizes >= `--index-rows`, the same queries again after
  `reindex` built the IVF-PQ index: p50, and recall@10 of `Workspace.query` against its own
  flat answers before the index, on the labeled set's queries (evals/retrieval, its 246
  memories recorded first, the synthetic ones around them) and the synthetic queries;
- `.anchorfs/` on disk per 1,000 memories, and the LanceDB folder against the live table's
  data (`total_bytes`), after compaction (5-minute version window) and after `reindex`.

- `--reuse DIR`: the query rows only, on workspaces kept in DIR (`DIR/ws10000`, ...; built
  there by the first run as above, reindexed), so a second run measures the same tables; recall
  is then against the flat scan of the same table (`bypass_vector_index`), not of the one
  before `reindex`. Each row gives wall p50 / p95 and CPU p50 (`process_time`: this process
  and LanceDB's threads, less sensitive to other load than wall time) of `Workspace.query` and
  of a bare native hybrid search of the same table, same filter, k=10.
- `--git`: with `--reuse`, the workspaces sit in a git repo (`DIR/ws10000-git`, ...): the files
  committed before the memories are recorded (their anchors name that commit), a second commit
  after (so an envelope says "1 commit since"), as issue 19's "<= 1.2x bare hybrid in a git
  repo" asks; every hit's envelope then names its commit.

Usage: python scripts/bench_store.py [--sizes 10000,100000] [--index-rows 50000] [--reuse DIR [--git]] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, write_section  # noqa: E402

import anchorfs  # noqa: E402

WORDS = ("token expiry auth session cache invoice billing user account retry queue worker "
         "migration schema index config deploy region timeout limit header cookie jwt refresh "
         "payment webhook email template render route handler middleware logger metric").split()
IDENTS = ["getUserById", "TokenIssuer.issue", "invoice_total", "RetryPolicy", "parseConfig",
          "SessionStore.get", "render_template", "WebhookHandler", "max_retries", "refreshToken"]


def text(rng: random.Random, i: int) -> str:
    words = rng.sample(WORDS, 8)
    return f"{' '.join(words[:4])} {rng.choice(IDENTS)} {' '.join(words[4:])} #{i}"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


def du(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--index-rows", type=int, default=50000)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--reuse", default=None)
    ap.add_argument("--git", action="store_true", help="with --reuse: the workspaces sit in a git repo")
    args = ap.parse_args()
    if args.reuse:
        reuse(args)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)] + IDENTS

    rows_tp: list[str] = []
    rows_q: list[str] = []
    rows_ann: list[str] = []
    rows_size: list[str] = []
    evals = Path(__file__).resolve().parent.parent / "evals" / "retrieval"
    eval_mems = [json.loads(line) for line in (evals / "memories.jsonl").read_text().splitlines() if line.strip()]
    eval_queries = [json.loads(line)["query"] for line in (evals / "queries.jsonl").read_text().splitlines()
                    if line.strip()]
    with tempfile.TemporaryDirectory(prefix="anchorfs-bench-") as tmp:
        root = Path(tmp) / "ws"
        (root / "src").mkdir(parents=True)
        for f in range(args.files):
            (root / "src" / f"m{f:04d}.py").write_text(
                "".join(f"def fn{j}(x):\n    return x + {f * 100 + j}\n\n" for j in range(30)))
        anchorfs.init(root)
        # recorded and first measured with the exact (flat) vector scan: no index built meanwhile
        os.environ["ANCHORFS_STORE_INDEX_ROWS"] = "0"
        ws = anchorfs.open(root)
        ws.record_many([{"content": m["content"], "kind": m.get("kind", "note"), "tags": m.get("tags") or []}
                        for m in eval_mems])
        done = len(eval_mems)
        for target in sizes:
            t = time.perf_counter()
            n_new = target - done
            while done < target:
                n = min(args.batch, target - done)
                items = []
                for i in range(done, done + n):
                    f = i % args.files
                    anchor = [f"src/m{f:04d}.py#fn{i % 30}"] if i % 2 else [f"src/m{f:04d}.py"]
                    items.append({"content": text(rng, i), "kind": "note", "anchors": anchor})
                ws.record_many(items)
                done += n
            elapsed = time.perf_counter() - t
            rows_tp.append(f"| {n_new:,} anchored memories (to {target:,}) | {elapsed:.1f} s | {n_new / elapsed:,.0f} memories/s |")
            ws.store.maybe_compact(force=True)
            table = ws.store.table()
            emb = ws.embedder
            ws.query("warm up", k=10)

            ours, bare_vec, bare_hybrid = [], [], []
            for q in queries:
                t = time.perf_counter()
                ws.query(q, k=10)
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                table.search(emb.embed_query(q), vector_column_name="vector").distance_type("cosine") \
                    .where("status = 'active'", prefilter=True).select(["id", "doc"]).limit(10).to_list()
                bare_vec.append(time.perf_counter() - t)
                t = time.perf_counter()
                table.search(query_type="hybrid", vector_column_name="vector", fts_columns="text") \
                    .vector(emb.embed_query(q)).text(q).where("status = 'active'", prefilter=True) \
                    .select(["id", "doc"]).limit(10).to_list()
                bare_hybrid.append(time.perf_counter() - t)
            p50, p95 = statistics.median(ours), pct(ours, 0.95)
            v50, h50 = statistics.median(bare_vec), statistics.median(bare_hybrid)
            rows_q.append(
                f"| {target:,} | {p50 * 1000:.1f} ms | {p95 * 1000:.1f} ms | {v50 * 1000:.1f} ms | {h50 * 1000:.1f} ms "
                f"| {p50 / v50:.2f}x | {p50 / h50:.2f}x |")
            print(rows_tp[-1], rows_q[-1], sep="\n", flush=True)
            state = root / ".anchorfs"
            lance = state / "memories.lance"
            live = int(table.stats()["total_bytes"])
            rows_size.append(f"| {target:,} | after compaction (versions of the last 5 min kept) | "
                             f"{du(state) / target * 1000 / 1e6:.2f} MB | {du(lance) / live:.2f}x |")
            if target >= args.index_rows:
                allq = eval_queries + queries
                flat = {q: [h.memory.id for h in ws.query(q, k=10)] for q in allq}
                os.environ["ANCHORFS_STORE_INDEX_ROWS"] = str(args.index_rows)
                ws.close()
                ws = anchorfs.open(root)
                t = time.perf_counter()
                ws.reindex()
                os.environ["ANCHORFS_STORE_INDEX_ROWS"] = "0"  # the next size is recorded flat again
                built = time.perf_counter() - t
                live = int(ws.store.table().stats()["total_bytes"])
                rows_size.append(f"| {target:,} | after `reindex` (index built, old versions deleted) | "
                                 f"{du(state) / target * 1000 / 1e6:.2f} MB | {du(lance) / live:.2f}x |")
                ws.query("warm up", k=10)
                lat = []
                got = {}
                for q in allq:
                    t = time.perf_counter()
                    got[q] = [h.memory.id for h in ws.query(q, k=10)]
                    lat.append(time.perf_counter() - t)
                def recall(qs: list[str]) -> float:
                    return statistics.mean(len(set(got[q]) & set(flat[q])) / max(1, len(flat[q])) for q in qs)
                rows_ann.append(
                    f"| {target:,} | {ws.store.vector_index()} ({ws.store.index_params(target)['num_partitions']} "
                    f"partitions; `reindex` {built:.0f} s) | {statistics.median(lat) * 1000:.1f} ms | "
                    f"{pct(lat, 0.95) * 1000:.1f} ms | {recall(eval_queries):.3f} | {recall(queries):.3f} |")
                print(rows_size[-2:], rows_ann[-1], flush=True)

    body = (
        f"Machine: {machine()}.\n\n"
        f"`python scripts/bench_store.py --sizes {args.sizes}`: memories of ~12 words with code identifiers, "
        f"anchored to {args.files:,} Python files (half whole-file, half to a function), default `hashing` embedder, "
        f"recorded in batches of {args.batch:,} (`record_many`: anchors taken and hashed, one fsynced ledger append "
        "and one LanceDB write per batch). Queries: "
        f"{len(queries)} (3 random words, or one identifier), k=10, after compaction.\n\n"
        "| recorded | time | throughput |\n|---|---|---|\n" + "\n".join(rows_tp) + "\n\n"
        "`query` is the whole read path: hybrid search (full-text + vector, fused), the drift pass over the hits, "
        "demotion and re-sorting. The baselines are bare LanceDB searches of the same table, same filter, same k.\n\n"
        "| memories | query p50 | query p95 | bare vector p50 | bare native hybrid p50 | query / bare vector | query / bare hybrid |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows_q)
    )
    if rows_ann:
        body += (
            "\n\nThe vector index: the same workspace after `reindex` built it (`store.index_rows` = "
            f"{args.index_rows:,}; the rows above were recorded and searched with no index: an exact scan). Recall@10: of the ten hits `Workspace.query` gave with the flat vector scan, "
            "the share it still gives with the index, averaged over the labeled set's "
            f"{len(eval_queries)} queries (its {len(eval_mems)} memories are in the table among the synthetic ones) "
            "and over the synthetic queries.\n\n"
            "| memories | index | query p50 | query p95 | recall@10, labeled queries | recall@10, synthetic |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows_ann)
        )
    body += (
        "\n\nOn disk: `.anchorfs/` (ledger, store, caches) per 1,000 memories, and the LanceDB folder against "
        "the live table's data (`total_bytes`: the latest version's rows).\n\n"
        "| memories | when | `.anchorfs/` per 1,000 | LanceDB folder / live data |\n|---|---|---|---|\n"
        + "\n".join(rows_size)
    )
    print(body)
    if args.write:
        write_section("Store", body)


def _git(root: Path, *argv: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
    subprocess.run(["git", *argv], cwd=root, env=env, check=True, capture_output=True)


def _build(root: Path, args: argparse.Namespace, target: int, eval_mems: list[dict[str, object]]) -> None:
    """A kept workspace of `target` memories (the labeled set's first), reindexed; in a git
    repo with `--git` (the files committed before recording, one more commit after)."""
    (root / "src").mkdir(parents=True)
    for f in range(args.files):
        (root / "src" / f"m{f:04d}.py").write_text(
            "".join(f"def fn{j}(x):\n    return x + {f * 100 + j}\n\n" for j in range(30)))
    if args.git:
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "src")
        _git(root, "commit", "-q", "-m", "the files")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": m["content"], "kind": m.get("kind", "note"), "tags": m.get("tags") or []}
                        for m in eval_mems])
        done, trng = len(eval_mems), random.Random(7)
        while done < target:
            n = min(args.batch, target - done)
            ws.record_many([{"content": text(trng, i), "kind": "note",
                             "anchors": [f"src/m{i % args.files:04d}.py#fn{i % 30}"] if i % 2
                             else [f"src/m{i % args.files:04d}.py"]} for i in range(done, done + n)])
            done += n
        ws.reindex()
    if args.git:
        (root / "NOTES.md").write_text("later work\n")
        _git(root, "add", "NOTES.md")
        _git(root, "commit", "-q", "-m", "later work")


def reuse(args: argparse.Namespace) -> None:
    """Query p50 against bare LanceDB, and with the index its recall@10 against the flat scan
    of the same table, on workspaces kept in `args.reuse` (each built once, with `reindex`)."""
    import anchorfs.store.table as store_mod

    rng = random.Random(7)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)] + IDENTS
    evals = Path(__file__).resolve().parent.parent / "evals" / "retrieval"
    eval_mems = [json.loads(line) for line in (evals / "memories.jsonl").read_text().splitlines() if line.strip()]
    eval_queries = [json.loads(line)["query"] for line in (evals / "queries.jsonl").read_text().splitlines()
                    if line.strip()]
    print("| memories | git | index | query p50 | query p95 | query CPU p50 | bare hybrid p50 | bare hybrid CPU p50 "
          "| query / bare hybrid | CPU ratio | recall@10 labeled | recall@10 synthetic |", flush=True)
    for target in [int(x) for x in args.sizes.split(",")]:
        root = Path(args.reuse) / (f"ws{target}-git" if args.git else f"ws{target}")
        if not root.exists():
            _build(root, args, target, eval_mems)
        ws = anchorfs.open(root)
        table, emb = ws.store.table(), ws.embedder
        ws.query("warm up", k=10)
        ours, bare_hybrid, ours_cpu, bare_cpu = [], [], [], []
        for q in queries:
            t, c = time.perf_counter(), time.process_time()
            ws.query(q, k=10)
            ours.append(time.perf_counter() - t)
            ours_cpu.append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            table.search(query_type="hybrid", vector_column_name="vector", fts_columns="text") \
                .vector(emb.embed_query(q)).text(q).where("status = 'active'", prefilter=True) \
                .select(["id", "doc"]).limit(10).to_list()
            bare_hybrid.append(time.perf_counter() - t)
            bare_cpu.append(time.process_time() - c)
        p50, h50 = statistics.median(ours), statistics.median(bare_hybrid)
        c50, b50 = statistics.median(ours_cpu), statistics.median(bare_cpu)
        line = (f"| {target:,} | {'yes' if args.git else 'no'} | {ws.store.vector_index() or 'none (flat)'} | "
                f"{p50 * 1000:.1f} ms | {pct(ours, 0.95) * 1000:.1f} ms | {c50 * 1000:.1f} ms | {h50 * 1000:.1f} ms | "
                f"{b50 * 1000:.1f} ms | {p50 / h50:.2f}x | {c50 / b50:.2f}x |")
        if ws.store.vector_index():
            allq = eval_queries + queries
            got = {q: [h.memory.id for h in ws.query(q, k=10)] for q in allq}
            indexed = store_mod.Store.vector_query
            store_mod.Store.vector_query = lambda self, v, where=None: indexed(self, v, where).bypass_vector_index()  # type: ignore[method-assign]
            flat = {q: [h.memory.id for h in ws.query(q, k=10)] for q in allq}
            store_mod.Store.vector_query = indexed  # type: ignore[method-assign]

            def recall(qs: list[str]) -> float:
                return statistics.mean(len(set(got[q]) & set(flat[q])) / max(1, len(flat[q])) for q in qs)

            line += f" {recall(eval_queries):.3f} | {recall(queries):.3f} |"
        else:
            line += " | |"
        load = os.getloadavg()
        print(f"{line} load {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}", flush=True)
        ws.close()

if __name__ == "__main__":
    main()
