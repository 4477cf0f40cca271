#!/usr/bin/env python3
"""Benchmark `anchorfs lsp` (issue 41): diagnostics for an opened file, warm server, at 1,000 and 10,000 memories.

The workspaces are bench_budgets.py's (imported: the Django 5.1.4 tree, N memories with whole-file,
`path:START-END` and `path#Symbol` anchors; its `edit` target with two memories, one staled here by an
edit of its first line). A real server runs over stdio (`python -m anchorfs lsp`, pytest-lsp's client),
warmed by one open of each file; then, per round, untimed close, and timed: the file's `didOpen` until
its `publishDiagnostics` arrives (the whole round trip, as an editor waits for it). Beside it, in the
same rounds, the SDK's `Workspace.drift()` of the same memories in this process, warm: the ratio of the
two medians travels between machines where milliseconds do not. Budget: diagnostics within 50 ms at
10,000 memories (the `edit` target). Two files: the `edit` target and the file with most memories.

Run (about 4 minutes on 2 cores, most of it building the 10,000-memory workspace):
    .venv/bin/python scripts/bench_lsp.py [--memories 1000,10000] [--rounds 30] [--write]
`--write` puts the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, write_section  # noqa: E402
from bench_budgets import build, django_tree, p95, sources  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUDGET_MS = 50.0


async def opens(root: Path, files: list[str], rounds: int, drift: "callable[[], float]") -> dict[str, list[float]]:
    """Per file, the timed didOpen -> publishDiagnostics of each round; under "drift", the SDK pass's."""
    from lsprotocol import types as lsp
    from pytest_lsp import client_capabilities, make_test_lsp_client

    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "anchorfs", "lsp", cwd=str(root))
    await client.initialize_session(lsp.InitializeParams(capabilities=client_capabilities("neovim"),
                                                         root_uri=root.as_uri()))
    texts = {rel: (root / rel).read_text() for rel in files}
    got: dict[str, list[float]] = {rel: [] for rel in files}
    got["drift"] = []
    version = 0

    async def open_once(rel: str) -> float:
        nonlocal version
        version += 1
        uri = (root / rel).as_uri()
        t = time.perf_counter()
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", version,
                                                                                         texts[rel])))
        while True:
            params = await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri and params.version == version:
                break
        took = time.perf_counter() - t
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
        await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)  # the close's empty list
        return took

    for rel in files:  # warm: the fold, the index, the imports
        await open_once(rel)
    drift()
    for _ in range(rounds):
        got["drift"].append(drift())
        for rel in files:
            got[rel].append(await open_once(rel))
    await client.shutdown_session()
    await client.stop()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--tree", default=None, help="a Django 5.1.4 tree (default: bench_budgets's cache)")
    ap.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = ap.parse_args()
    import anchorfs

    tree = django_tree(args.tree)
    srcs = sources(tree)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="anchorfs-bench-lsp-"))
    try:
        for n in (int(x) for x in args.memories.split(",")):
            twin = build([str(REPO)], tree, work, n, False, srcs)[0]
            twin.write("edit", twin.staled("edit", 1))  # one of its two memories stale
            with anchorfs.open(twin.root) as ws:
                counts = {p: len(ids) for p, ids in ws.anchored_paths().items()}
                edit = twin.targets["edit"]
                most = max((p for p in counts if p != edit), key=counts.__getitem__)

                def drift() -> float:
                    t = time.perf_counter()
                    ws.drift()
                    return time.perf_counter() - t

                got = asyncio.run(opens(twin.root, [edit, most], args.rounds, drift))
            base = statistics.median(got["drift"])
            rows.append(f"| {n:,} | SDK `drift()`, every memory | {base * 1e3:.1f} | {p95(got['drift']) * 1e3:.1f} | 1.00 | |")
            for rel, what in ((edit, f"`edit` target ({counts[edit]} memories, 1 stale)"),
                              (most, f"most anchored file ({counts[most]} memories)")):
                med, tail = statistics.median(got[rel]), p95(got[rel])
                ok = "met" if med * 1e3 <= BUDGET_MS else "over"
                rows.append(f"| {n:,} | diagnostics, {what} | {med * 1e3:.1f} | {tail * 1e3:.1f} | "
                            f"{med / base:.3f} | {ok if rel == edit and n >= 10000 else ''} |")
            print("\n".join(rows[-3:]), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = ("| memories | what | median ms | p95 ms | median / drift() | budget (50 ms at 10,000) |\n"
             "|---:|---|---:|---:|---:|---|\n" + "\n".join(rows))
    body = (f"Machine: {machine()}.\n\nCommand: `.venv/bin/python scripts/bench_lsp.py --memories {args.memories} "
            f"--rounds {args.rounds}{' --write' if args.write else ''}`\n\nA warm `anchorfs lsp` over stdio: an opened "
            "file's `didOpen` until its `publishDiagnostics` (the round trip an editor waits), each file opened once "
            "before the timed rounds; beside it, in the same rounds, the SDK's `Workspace.drift()` of every memory, "
            f"warm, in the benchmark's process. {args.rounds} rounds; p95 interpolated.\n\n{table}\n")
    print(body)
    if args.write:
        write_section("The language server (issue 41)", body)


if __name__ == "__main__":
    main()
