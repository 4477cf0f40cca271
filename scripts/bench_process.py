#!/usr/bin/env python3
"""Whole-process cost of the CLI: `query`, `record`, `context`, `list`, `drift --json` against
`python3 -c pass`, measured in the same run, over a real source tree (issue 19); `query`,
`context`, `list` and `record` again with a warm server running (`anchorfs serve --detach`),
which the command hands them to; and a person's second `query`, the first one typed at a
terminal having started the server behind it (`serve.auto`, issue 38).

The tree is the pinned Django sdist (fetched once with pip into the bench cache, see
`_benchlib.source_tree`), else a synthetic one. Memories are anchored to its Python files
(whole file or a line range), recorded in batches; the workspace is a git repo. Each command
is timed as a user runs it (the venv's `anchorfs` entry point), medians of `--repeat` runs,
the commands taking turns with the baseline.

`--second-query` times only that one, taking turns with `python3 -c pass` and the client's import
(`--repeat` rounds; medians and p95), for the issue 38 section.

Usage: python scripts/bench_process.py [--sizes 1000,10000] [--repeat 7] [--offline] [--write] [--second-query]
"""

from __future__ import annotations

import argparse
import os
import pty
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, median_run, source_tree, write_section  # noqa: E402

import anchorfs  # noqa: E402
import anchorfs.cli.server  # noqa: E402

WORDS = ("request response middleware session cache queryset filter migration model field form "
         "template render url route view admin auth user permission signal database index "
         "transaction timezone locale translation static file storage email test").split()


def _served(root: Path) -> int:
    """The warm server's request count (asked again if a loaded machine made one ping slow)."""
    for _ in range(20):
        info = anchorfs.cli.server.ping(root)
        if info is not None:
            return int(info["served"])
        time.sleep(0.5)
    raise SystemExit("the server does not answer (stopped: anchorfs's sources changed under it?)")


def _typed_query(cmd: list[str], text: str) -> None:
    """One `anchorfs query` with a terminal as its stdout, as a person types it: it starts the warm server."""
    primary, secondary = pty.openpty()
    try:
        subprocess.run([*cmd, "query", text], stdout=secondary, stderr=subprocess.DEVNULL, check=True)
    finally:
        os.close(secondary)
        os.close(primary)


def _second_query(cmd: list[str], root: Path, queries: Iterator[str], repeat: int) -> dict[str, list[float]]:
    """A person's second query (the first, at a terminal, started the server), taking turns with
    `python3 -c pass` and the client's import: every round's wall times, in seconds."""
    _typed_query(cmd, next(queries))
    runs: dict[str, list[float]] = {"`python3 -c pass`": [], "`anchorfs query`, the second one typed": [],
                                    "the client's import alone (`import anchorfs.cli.server`)": []}
    try:
        served = _served(root)
        for _ in range(repeat):
            for label, argv in zip(runs, ([sys.executable, "-c", "pass"], [*cmd, "query", next(queries)],
                                          [sys.executable, "-c", "import anchorfs.cli.server"])):
                t = time.perf_counter()
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                runs[label].append(time.perf_counter() - t)
        if _served(root) - served != repeat:
            raise SystemExit("a second query was not served")
    finally:
        subprocess.run([*cmd, "serve", "--stop"], check=False, capture_output=True)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--offline", action="store_true", help="the synthetic tree, no fetch")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--second-query", action="store_true", help="time only a person's second query (issue 38)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    exe = shutil.which("anchorfs", path=str(Path(sys.executable).parent)) or "anchorfs"
    rng = random.Random(19)
    rows: list[str] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="anchorfs-bench-process-") as tmp:
        root = Path(tmp) / "tree"
        t = time.perf_counter()
        what, files = source_tree(root, offline=args.offline)
        py = [f for f in files if f.endswith(".py") and (root / f).stat().st_size > 0]
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b"}
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "tree"], check=True, env=env)
        anchorfs.init(root)
        setup = time.perf_counter() - t
        done = 0
        cmd = [exe, "--root", str(root)]
        for target in sizes:
            with anchorfs.open(root) as ws:
                while done < target:
                    n = min(1000, target - done)
                    items = []
                    for i in range(done, done + n):
                        f = py[i % len(py)]
                        lines = (root / f).read_text(errors="replace").count("\n")
                        anchor = f if i % 2 or lines < 3 else f"{f}:1-{min(lines, 3)}"
                        words = " ".join(rng.sample(WORDS, 6))
                        items.append({"content": f"{words} in {Path(f).stem} #{i}", "anchors": [anchor]})
                    ws.record_many(items)
                    done += n
                ws.query("warm up")  # the store caught up, the hash cache saved
                ws.drift()
            queries = iter([" ".join(rng.sample(WORDS, 3)) for _ in range(10 * args.repeat)])
            texts = iter([f"bench note {rng.random()}" for _ in range(10 * args.repeat)])
            if args.second_query:
                runs = _second_query(cmd, root, queries, args.repeat)
                base = statistics.median(runs["`python3 -c pass`"])
                for label, secs in runs.items():
                    p95 = sorted(secs)[min(len(secs) - 1, round(0.95 * len(secs)))]
                    rows.append(f"| {target:,} | {label} | {statistics.median(secs) * 1000:.1f} ms | "
                                f"{p95 * 1000:.1f} ms | {statistics.median(secs) / base:.2f}x |")
                print("\n".join(rows[-3:]), f"(load average {os.getloadavg()[0]:.1f})", flush=True)
                continue
            base = median_run([sys.executable, "-c", "pass"], args.repeat)
            subprocess.run([*cmd, "query", "catch up"], check=True, capture_output=True)  # after the records above
            timed = {
                "`anchorfs query` (k=10)": lambda: median_run([*cmd, "query", next(queries)], args.repeat),
                "`anchorfs context`": lambda: median_run([*cmd, "context", next(queries)], args.repeat),
                "`anchorfs record` (one unanchored memory)": lambda: median_run([*cmd, "record", next(texts)],
                                                                               args.repeat),
                "`anchorfs drift --json` (warm: memo replayed)": lambda: median_run([*cmd, "--json", "drift"],
                                                                                    args.repeat),
            }
            got = {}
            for label, fn in timed.items():
                got[label] = fn()
            # what LanceDB's import costs, with and without its REST namespace client's __init__
            got["for scale: `import lancedb`"] = median_run([sys.executable, "-c", "import lancedb"], args.repeat)
            got["for scale: `import lancedb`, namespace client deferred"] = median_run(
                [sys.executable, "-c", "from anchorfs.store.table import defer_namespace_client as d; d(); import lancedb"],
                args.repeat)
            got["for scale: `import lancedb` as the store does (`anchorfs.store.table.import_lancedb`)"] = median_run(
                [sys.executable, "-c", "from anchorfs.store.table import import_lancedb; import_lancedb()"], args.repeat)
            # a query right after those records pays their catch-up: timed apart
            got["`anchorfs query` right after 7 one-shot records (catches them up)"] = median_run(
                [*cmd, "query", next(queries)], 1)
            # the same commands handed to a warm server (`anchorfs serve`, issue 19), in the same run
            subprocess.run([*cmd, "serve", "--detach", "--idle-timeout", "900"], check=True, capture_output=True)
            try:
                subprocess.run([*cmd, "query", "warm"], check=True, capture_output=True)
                served_before = _served(root)
                got["`anchorfs query` (k=10), served"] = median_run([*cmd, "query", next(queries)], args.repeat)
                got["`anchorfs context`, served"] = median_run([*cmd, "context", next(queries)], args.repeat)
                got["`anchorfs list --limit 20`, served"] = median_run([*cmd, "list", "--limit", "20"], args.repeat)
                got["`anchorfs record` (one unanchored memory), served"] = median_run(
                    [*cmd, "record", next(texts)], args.repeat)
                served = _served(root) - served_before
                notes.append(f"{target:,}: {served} of the {4 * args.repeat} calls timed as served were served "
                             "(a busy server's caller runs in process)")
            finally:
                subprocess.run([*cmd, "serve", "--stop"], check=False, capture_output=True)
            # a person's second query: the first, typed at a terminal, started the server behind it (issue 38)
            _typed_query(cmd, next(queries))
            try:
                _served(root)  # it answers once it has started
                got["`anchorfs query`, the second one typed (the first started the server)"] = median_run(
                    [*cmd, "query", next(queries)], args.repeat)
            finally:
                subprocess.run([*cmd, "serve", "--stop"], check=False, capture_output=True)
            got["`anchorfs list --limit 20` (in process)"] = median_run([*cmd, "list", "--limit", "20"], args.repeat)
            got["for scale: the client alone (`import anchorfs.cli.server`)"] = median_run(
                [sys.executable, "-c", "import anchorfs.cli.server"], args.repeat)
            base2 = median_run([sys.executable, "-c", "pass"], args.repeat)
            base = min(base, base2)
            load = os.getloadavg()[0]
            rows.append(f"| {target:,} | `python3 -c pass` (baseline; load average {load:.1f}) | {base * 1000:.0f} ms | 1.0x |")
            for label, secs in got.items():
                rows.append(f"| {target:,} | {label} | {secs * 1000:.0f} ms | {secs / base:.1f}x |")
            print("\n".join(rows[-len(got) - 1:]), flush=True)
    body = (
        f"Machine: {machine()}.\n\n"
        f"`python scripts/bench_process.py --sizes {args.sizes} --repeat {args.repeat}`: {what}, a git repo, "
        f"memories anchored to its Python files (half whole-file, half a line range), recorded with `record_many` "
        f"(set-up {setup:.0f} s, not timed). Each row is the median of {args.repeat} runs of the venv's `anchorfs` "
        "entry point; the baseline is `python3 -c pass` with the same interpreter, in the same run (the lower of "
        "two medians, taken before and after).\n\n"
        "| memories | command | wall time | vs baseline |\n|---|---|---:|---:|\n" + "\n".join(rows)
        + "\n\n" + "; ".join(notes) + ".\n"
    )
    if args.second_query:
        body = (f"Machine: {machine()}.\n\n| memories | command | median | p95 | vs `python3 -c pass` |\n"
                "|---|---|---:|---:|---:|\n" + "\n".join(rows) + "\n")
    print(body)
    if args.write and not args.second_query:
        write_section("CLI processes", body)


if __name__ == "__main__":
    main()
