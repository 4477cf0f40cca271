#!/usr/bin/env python3
"""Benchmark the ledger fold a new process pays, with and without the fold snapshot.

A synthetic ledger of N entries (records, one anchor each, every 20th memory then superseded,
as the writer stamps them) is folded:

- from the ledger's first line, as every process did before the snapshot (`catchup.follow`
  from nothing, then `ledger.fold`): the "before" row;
- from `.anchorfs/fold.snap` while its prefix holds (`foldsnap.current`, settled: the ledger is
  not read): the "after" row;
- from the snapshot when 100 lines were appended since (checksum of the prefix, the new lines
  parsed and folded in); and the cost of writing the snapshot.

All in one run, each the median of `--repeat`. Usage: python scripts/bench_fold.py
[--entries 100000] [--repeat 5] [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, write_section  # noqa: E402

import orjson  # noqa: E402

from anchorfs.ledger import catchup, foldsnap  # noqa: E402
from anchorfs.ledger.log import Entry, FoldState, Ledger, fold  # noqa: E402
from anchorfs.core.model import AnchorRef, Memory, utcnow  # noqa: E402


def build(led: Ledger, n: int) -> None:
    """`n` entries written as the writer stamps them (`seq`, `deps`), in batches."""
    now = utcnow()
    lines: list[bytes] = []
    seq = 0
    records: list[tuple[Memory, str]] = []
    for i in range(n):
        seq += 1
        if i % 20 == 19 and records:  # a supersede of an earlier memory
            old, dep = records.pop()
            new = Memory(id=f"s{i:07d}{'x' * 18}", content=f"corrected fact {i} about module {i % 700}",
                         kind="constraint", anchors=old.anchors, supersedes=old.id, recorded_at=now, valid_from=now)
            gone = old.replace(status="superseded", superseded_by=new.id, valid_until=now)
            e = Entry.new("supersede", [gone, new], at=now)
            e = dataclasses.replace(e, seq=seq, deps=((old.id, (dep,)), (new.id, ())))
        else:
            rel = f"pkg{i % 70:02d}/mod{i % 700:04d}.py"
            m = Memory(id=f"m{i:07d}{'x' * 18}", content=f"fact {i} about module {i % 700}", kind="constraint",
                       anchors=(AnchorRef(rel, "0" * 64, f"f{i % 40}", None, "1" * 64, "a" * 40, False),),
                       recorded_at=now, valid_from=now)
            e = dataclasses.replace(Entry.new("record", [m], at=now), seq=seq, deps=((m.id, ()),))
            records.append((m, e.tx))
        lines.append(orjson.dumps(e.to_dict()) + b"\n")
    led.path.parent.mkdir(parents=True, exist_ok=True)
    led.path.write_bytes(b"".join(lines))


def median(fn: Callable[[], object], repeat: int) -> float:
    """The median CPU time of `fn` (this process's user + sys: a loaded machine inflates it far
    less than wall time)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write the figures into docs/benchmarks.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="anchorfs-bench-fold-") as tmp:
        led = Ledger(Path(tmp) / ".anchorfs")
        build(led, args.entries)
        size = led.size()
        time.sleep(catchup.FINE_NS / 1e9 + 0.05)  # out of the ledger's racy window, as a ledger between writes

        def before() -> FoldState:
            return fold(catchup.follow(led, None).entries)

        full = before()
        t_before = median(before, args.repeat)
        t_write = median(lambda: foldsnap.save(led, catchup.Folded(catchup.follow(led, None).prefix, full)), 1)
        Path(foldsnap.snap_file(led)).unlink()
        first = foldsnap.current(led)  # writes the snapshot (a fresh fold)
        assert first.saved is not None and dict(first.state) == dict(full)
        snap_size = Path(foldsnap.snap_file(led)).stat().st_size
        time.sleep(catchup.FINE_NS / 1e9 + 0.05)
        t_after = median(lambda: foldsnap.current(led), args.repeat)
        assert dict(foldsnap.current(led).state) == dict(full)

        with open(led.path, "ab") as fh:  # 100 lines appended since the snapshot
            fh.write(b"".join(orjson.dumps(dataclasses.replace(
                Entry.new("record", [Memory(id=f"late{k:05d}{'y' * 17}", content=f"late {k}")]),
                seq=args.entries + k + 1, deps=()).to_dict()) + b"\n" for k in range(100)))
        t_grown = median(lambda: foldsnap.current(led, None, write=False), args.repeat)
        grown = foldsnap.current(led, None, write=False)
        assert len(grown.state) == len(full) + 100
        memories = len(full)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [
        ("fold from the ledger's first line (before: every process)", t_before, "1.00x"),
        ("from `fold.snap`, prefix settled (after)", t_after, f"{t_after / t_before:.2f}x"),
        ("from `fold.snap` + 100 lines appended since", t_grown, f"{t_grown / t_before:.2f}x"),
        ("writing `fold.snap` (encode, fsync, replace)", t_write, f"{t_write / t_before:.2f}x"),
    ]
    table = "| case | CPU time (median of {}) | vs the full fold |\n|---|---:|---:|\n".format(args.repeat)
    table += "\n".join(f"| {name} | {secs * 1000:.0f} ms | {ratio} |" for name, secs, ratio in rows)
    text = f"""Machine: {machine()}. Load average at the end of the run: {load}.

`python scripts/bench_fold.py --entries {args.entries}`: a synthetic ledger of {args.entries:,} entries
({size / 1e6:.0f} MB: records with one anchor each, every 20th a supersede), {memories:,} memories; the
snapshot is {snap_size / 1e6:.0f} MB. One run; each row the
median of {args.repeat}.

{table}

The snapshot keeps the fold (each memory's snapshot, the heads, the ids named as replaced, the
top `seq`) and the ledger prefix it was folded from; a reader trusts it on the ledger's settled
stat, else on the prefix's checksum, and folds in only the lines after it. What is left is
reading it: every memory is built again (its rules ran when it was folded from the ledger).
Reproduce: `python scripts/bench_fold.py --write`.
"""
    print(text)
    if args.write:
        write_section("Ledger fold snapshot", text)


if __name__ == "__main__":
    main()
