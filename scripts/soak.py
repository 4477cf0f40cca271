"""Soak: writers and readers in separate processes on one workspace for a bounded time, then
prove that nothing was lost: every acknowledged write is in the ledger and in the store, the
ledger parses to the last byte, and every read answered without an error.

    python scripts/soak.py --writers 4 --readers 8 --seconds 300
    python scripts/soak.py --root /tmp/soak-ws --seconds 60 --json figures.json --keep

Writers record (some anchored: symbols, lines, whole files) and supersede the heads of their
own chains; writer 0 also rewrites a few anchored files now and then (atomically), so readers
find stale memories and write drift back while writers commit. Readers query, run the full
drift pass, list, and re-check single memories. Every process keeps one workspace open (like
the MCP server) and re-opens it every 100 operations (like CLI calls). Each logs every
operation with its latency; a write is acknowledged when the call returned. Exit 0 when every
check passes, 1 otherwise. Figures are printed, and written as JSON with `--json`.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine  # noqa: E402

WORDS = ("token expiry handler session cache retry queue deploy config parser user login "
         "billing invoice webhook timeout backoff schema migration index search ranking "
         "logging metrics tracing limit quota export import batch stream worker lock").split()
STABLE = 8  # src/mod{i}.py: anchored by symbol, lines and whole file; never edited
CHURN = 4  # churn/c{i}.txt: anchored whole, rewritten by writer 0
REOPEN_EVERY = 100


def _module(i: int) -> str:
    funcs = "\n\n".join(f"def func{j}(x):\n    '''{WORDS[(i + j) % len(WORDS)]}'''\n    return x + {j}\n"
                        for j in range(6))
    return f'"""module {i}"""\n\n{funcs}'


def setup(root: Path, seed_memories: int = 20) -> None:
    import anchorfs

    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "churn").mkdir(exist_ok=True)
    for i in range(STABLE):
        (root / "src" / f"mod{i}.py").write_text(_module(i))
    for i in range(CHURN):
        (root / "churn" / f"c{i}.txt").write_text(f"churn file {i} version 0\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": f"seed memory {i} about {WORDS[i % len(WORDS)]}",
                         "anchors": [f"src/mod{i % STABLE}.py#func{i % 6}"] if i % 2 else []}
                        for i in range(seed_memories)])


def _text(rng: random.Random, n: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _anchor(rng: random.Random) -> str:
    i, j = rng.randrange(STABLE), rng.randrange(6)
    return rng.choice([f"src/mod{i}.py#func{j}", f"src/mod{i}.py:{3 + 5 * j}-{5 + 5 * j}",
                       f"src/mod{i}.py", f"churn/c{rng.randrange(CHURN)}.txt"])


def _rewrite(root: Path, rng: random.Random, version: int) -> None:
    path = root / "churn" / f"c{rng.randrange(CHURN)}.txt"
    tmp = path.with_name(path.name + ".edit")
    tmp.write_text(f"{path.stem} version {version}\n")
    os.replace(tmp, path)  # atomic, as editors and git do: a reader never sees half a file


# -- workers -----------------------------------------------------------------------------------


def _count_store_retries(counts: dict[str, int]) -> None:
    """Count LanceDB commit retries (optimistic-concurrency conflicts) per kind of store write."""
    from anchorfs.store import table as store

    real = store._retry

    def counting(fn: Any, what: str) -> Any:
        attempts = 0

        def once() -> Any:
            nonlocal attempts
            attempts += 1
            return fn()

        try:
            return real(once, what)
        finally:
            if attempts > 1:
                counts[what] = counts.get(what, 0) + attempts - 1

    store._retry = counting  # type: ignore[assignment]


def worker(kind: str, index: int, root: Path, log: Path, go: Path, seed: int) -> int:
    import anchorfs
    from anchorfs.core.errors import AnchorfsError

    rng = random.Random(seed * 1000 + index + (0 if kind == "writer" else 500))
    out = log.open("ab", buffering=0)

    def emit(**rec: Any) -> None:
        out.write(orjson.dumps(rec) + b"\n")

    retries: dict[str, int] = {}
    _count_store_retries(retries)
    ws = anchorfs.open(root)
    ws.query("warm up the embedder and the store")  # imports and first open outside the clock
    emit(op="ready")
    while not go.exists():
        time.sleep(0.02)
    until = float(go.read_text())
    mine: list[str] = []  # this writer's chain heads (active)
    ops = edits = 0
    while time.time() < until:
        ops += 1
        if ops % REOPEN_EVERY == 0:
            ws.close()
            ws = anchorfs.open(root)
        if kind == "writer" and index == 0 and rng.random() < 0.05:
            edits += 1
            _rewrite(root, rng, edits)
        roll = rng.random()
        if kind == "writer":
            op = "supersede" if mine and roll < 0.25 else "record_anchored" if roll < 0.55 else "record"
        else:
            op = "query" if roll < 0.7 else "drift" if roll < 0.8 else "list" if roll < 0.9 else "check"
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"op": op}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if op == "record":
                    rec["id"] = ws.record(f"{kind} {index} note {ops}: {_text(rng)}").id
                    mine.append(rec["id"])
                elif op == "record_anchored":
                    spec = _anchor(rng)
                    rec["id"] = ws.record(f"{kind} {index} fact {ops} on {spec}: {_text(rng)}", anchors=[spec]).id
                    mine.append(rec["id"])
                elif op == "supersede":
                    old = mine.pop(rng.randrange(len(mine)))
                    rec["old"] = old
                    rec["id"] = ws.supersede(old, f"{kind} {index} correction {ops}: {_text(rng)}",
                                             reason="soak").id
                    mine.append(rec["id"])
                elif op == "query":
                    rec["n"] = len(ws.query(_text(rng, 3), k=10))
                elif op == "drift":
                    rec["n"] = len(ws.drift().memories)
                elif op == "list":
                    rec["n"] = len(ws.list(limit=50))
                else:
                    listed = ws.list(limit=200)
                    if listed:
                        ws.check_id(rng.choice(listed).id)
                    rec["n"] = len(listed)
            except AnchorfsError as exc:
                rec["error"] = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # a bug: counted, logged, and the soak goes on
                rec["error"] = f"BUG {type(exc).__name__}: {exc}"
        rec["ms"] = round((time.perf_counter() - t0) * 1000, 3)
        if retries:
            rec["retries"] = dict(retries)
            retries.clear()
        if caught:
            rec["warnings"] = [str(w.message) for w in caught]
        emit(**rec)
    ws.close()
    emit(op="done", edits=edits)
    return 0


# -- the run and its checks --------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _lat(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(_pct(values, 0.5), 1), "p95_ms": round(_pct(values, 0.95), 1),
            "max_ms": round(max(values, default=0.0), 1)}


def verify(root: Path, logs: list[tuple[str, Path]]) -> tuple[dict[str, Any], list[str]]:
    """Read every log and the workspace back; return (figures, failed checks)."""
    import anchorfs
    from anchorfs.ledger.log import Ledger, fold
    from anchorfs.sdk import storesync

    failures: list[str] = []
    expected: dict[str, str] = {}  # acknowledged id -> status it must have now
    by_op: dict[str, list[float]] = {}
    errors: list[str] = []
    warned: list[str] = []
    retried: dict[str, int] = {}
    done = 0
    for kind, path in logs:
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            op = rec["op"]
            if op == "done":
                done += 1
            if op in ("ready", "done"):
                continue
            if "error" in rec:
                errors.append(f"{kind} {op}: {rec['error']}")
            else:
                by_op.setdefault(op, []).append(rec["ms"])
                if kind == "writer":
                    expected[rec["id"]] = "active"
                    if op == "supersede":
                        expected[rec["old"]] = "superseded"
            warned.extend(f"{kind} {op}: {w}" for w in rec.get("warnings", ()))
            for what, n in rec.get("retries", {}).items():
                key = f"{kind} {what}"
                retried[key] = retried.get(key, 0) + n
    if done != len(logs):
        failures.append(f"only {done} of {len(logs)} workers finished")

    state = root / ".anchorfs"
    raw = (state / "ledger.jsonl").read_bytes()
    if not raw.endswith(b"\n"):
        failures.append("the ledger ends in half a line")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entries = list(Ledger(state).read())
    lines = raw.count(b"\n")
    if caught or len(entries) != lines:
        failures.append(f"the ledger does not parse fully: {len(entries)} entries for {lines} lines")
    folded = {mid: m.status for mid, m in fold(entries).items()}
    missing = [mid for mid in expected if mid not in folded]
    wrong = [mid for mid, st in expected.items() if mid in folded and folded[mid] != st]
    if missing:
        failures.append(f"{len(missing)} acknowledged writes are not in the ledger, e.g. {missing[:3]}")
    if wrong:
        failures.append(f"{len(wrong)} acknowledged writes have another status in the ledger, e.g. {wrong[:3]}")
    with anchorfs.open(root) as ws:
        table = ws.store.table()
        rows = table.search().select(["id", "status"]).limit(max(1, table.count_rows())).to_list()
        stored = {r["id"]: r["status"] for r in rows}
        if len(rows) != len(stored):
            failures.append(f"{len(rows) - len(stored)} memories are in the store twice")
        not_stored = [mid for mid in expected if mid not in stored]
        if not_stored:
            failures.append(f"{len(not_stored)} acknowledged writes are not in the store, e.g. {not_stored[:3]}")
        if stored != folded:
            diff = [mid for mid in set(stored) | set(folded) if stored.get(mid) != folded.get(mid)]
            failures.append(f"store and ledger disagree on {len(diff)} memories, e.g. {diff[:3]}")
        if storesync.applied(ws.state) != ws.ledger.size():
            failures.append("the store's checkpoint does not match the ledger")
        active = sum(1 for s in folded.values() if s == "active")
    leftovers = sorted(p.name for p in state.iterdir() if p.name.endswith(".tmp"))
    if leftovers:
        failures.append(f"temp files left behind: {leftovers}")
    if errors:
        failures.append(f"{len(errors)} operations failed, e.g. {errors[:3]}")

    figures: dict[str, Any] = {
        "acknowledged_writes": sum(len(by_op.get(op, [])) for op in ("record", "record_anchored", "supersede")),
        "reads": sum(len(by_op.get(op, [])) for op in ("query", "drift", "list", "check")),
        "errors": len(errors),
        "warnings": len(warned),
        "warning_examples": sorted(set(w.split(": ", 1)[1][:160] for w in warned))[:5],
        "store_conflict_retries": dict(sorted(retried.items())),
        "ops": {op: {"n": len(v), **_lat(v)} for op, v in sorted(by_op.items())},
        "writes": _lat([ms for op in ("record", "record_anchored", "supersede") for ms in by_op.get(op, [])]),
        "ledger_lines": len(entries),
        "ledger_bytes": len(raw),
        "memories": len(folded),
        "active": active,
        "store_rows": len(rows),
    }
    return figures, failures


def run(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="anchorfs-soak-")) / "ws"
    if (root / ".anchorfs").is_dir() and not (root / "src" / "mod0.py").is_file():
        print(f"{root} is a workspace the soak did not create; give a new folder", file=sys.stderr)
        return 2
    if not (root / ".anchorfs").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        setup(root)
    logs_dir = Path(tempfile.mkdtemp(prefix="anchorfs-soak-logs-"))
    go = logs_dir / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    procs: list[tuple[str, Path, subprocess.Popen[bytes], Any]] = []
    for kind, n in (("writer", args.writers), ("reader", args.readers)):
        for i in range(n):
            log = logs_dir / f"{kind}{i}.jsonl"
            err = (logs_dir / f"{kind}{i}.err").open("wb")
            cmd = [sys.executable, __file__, "--worker", kind, "--index", str(i), "--root", str(root),
                   "--log", str(log), "--go", str(go), "--seed", str(args.seed)]
            procs.append((kind, log, subprocess.Popen(cmd, env=env, stdout=err, stderr=err), err))
    print(f"soak: {args.writers} writers, {args.readers} readers, {args.seconds:g} s on {root}", flush=True)
    deadline = time.time() + 600
    while time.time() < deadline:
        ready = sum(1 for _, log, _, _ in procs if log.exists() and b'"ready"' in log.read_bytes()[:64])
        dead = [p for _, _, p, _ in procs if p.poll() is not None]
        if ready == len(procs) or dead:
            break
        time.sleep(0.1)
    started = time.time()
    go.write_text(repr(started + args.seconds))
    rcs = [p.wait(timeout=args.seconds + 600) for _, _, p, _ in procs]
    elapsed = time.time() - started
    for _, _, _, err in procs:
        err.close()
    figures, failures = verify(root, [(kind, log) for kind, log, _, _ in procs if log.exists()])
    for (kind, log, _, _), rc in zip(procs, rcs):
        if rc != 0:
            tail = (logs_dir / f"{log.stem}.err").read_text(errors="replace")[-1500:]
            failures.append(f"{log.stem} exited {rc}: {tail}")
    seconds = float(args.seconds)
    figures.update(
        machine=machine(),
        date=time.strftime("%Y-%m-%d"),
        writers=args.writers,
        readers=args.readers,
        seconds=seconds,
        elapsed=round(elapsed, 1),
        writes_per_s=round(figures["acknowledged_writes"] / seconds, 1),
        reads_per_s=round(figures["reads"] / seconds, 1),
        queries_per_s=round(figures["ops"].get("query", {}).get("n", 0) / seconds, 1),
        ok=not failures,
        failures=failures,
        root=str(root),
        logs=str(logs_dir),
    )
    print(f"machine: {figures['machine']}")
    print(f"acknowledged writes: {figures['acknowledged_writes']} ({figures['writes_per_s']}/s), "
          f"reads: {figures['reads']} ({figures['reads_per_s']}/s), errors: {figures['errors']}, "
          f"warnings: {figures['warnings']}")
    for op, f in figures["ops"].items():
        print(f"  {op:16} n={f['n']:6}  p50 {f['p50_ms']:8.1f} ms  p95 {f['p95_ms']:8.1f} ms  max {f['max_ms']:8.1f} ms")
    print(f"store commit retries after a conflict: {figures['store_conflict_retries'] or 'none'}")
    print(f"ledger: {figures['ledger_lines']} lines, {figures['ledger_bytes']} bytes; memories: "
          f"{figures['memories']} ({figures['active']} active); store rows: {figures['store_rows']}")
    print("checks: " + ("all passed" if not failures else "FAILED"))
    for f in failures:
        print(f"  - {f}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    if failures or args.keep:
        print(f"kept: the workspace {root} and the logs {logs_dir}")
    else:
        shutil.rmtree(logs_dir, ignore_errors=True)
        if not args.root:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0 if not failures else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--readers", type=int, default=8)
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--root", help="where to build the workspace, or one a previous soak built (default: a temp folder)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the temp workspace and the logs even when all passes")
    p.add_argument("--worker", choices=("writer", "reader"), help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--go", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.index, Path(args.root), Path(args.log), Path(args.go), args.seed)
    if args.writers < 0 or args.readers < 0 or args.writers + args.readers == 0 or args.seconds <= 0:
        p.error("need at least one worker and a positive --seconds")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
