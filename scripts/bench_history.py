#!/usr/bin/env python3
"""Benchmark `bisect` over a few hundred first-parent commits against `git log -L` in one run.

Both sides answer the same question about the same lines: which commits touched them.
`git log --first-parent -L START,END:FILE BASE..HEAD` is git's own line-history walk, the
fastest thing a person would run by hand; `bisect` also judges every step and carries the span.

Usage: python scripts/bench_history.py [REPO] [--commits 300] [--file PATH] [--lines S-E]
                                       [--repeat 5] [--write]
Without REPO a synthetic repo (the tests' token module, with merges and binary noise) is built.
With REPO (any local clone), the most-touched text file of its last --commits first-parent
commits is anchored at the oldest of them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, median_of, write_section  # noqa: E402

from anchorfs.anchors import narrowed_text, text_hash  # noqa: E402
from anchorfs.history import bisect, log  # noqa: E402
from anchorfs.model import AnchorRef, Memory, new_id  # noqa: E402

TOKEN_PY = '''"""Token helpers."""
import jwt


class TokenIssuer:
    def __init__(self, key):
        self.key = key

    def issue(self, user):
        """Issue a JWT for the user."""
        return jwt.encode({"sub": user, "exp": EXPIRY_HOURS}, self.key)


EXPIRY_HOURS = 24


def verify(token):
    return jwt.decode(token, KEY)
'''


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, input=input, check=True, capture_output=True).stdout


def build_synthetic(root: Path, commits: int) -> None:
    """`commits` first-parent commits through fast-import: the anchored module is edited above
    and below its spans in a third of them, other files and binaries churn, a side branch is
    merged every 40 commits, and the expiry line changes at 90%."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    lines = TOKEN_PY.splitlines()
    out: list[bytes] = []
    mark = 0

    def data(payload: bytes) -> bytes:
        return b"data %d\n" % len(payload) + payload + b"\n"

    def add_commit(branch: str, msg: str, files: dict[str, bytes], when: int, merge: int | None = None) -> int:
        nonlocal mark
        mark += 1
        out.append(b"commit refs/heads/%s\nmark :%d\n" % (branch.encode(), mark))
        out.append(b"author Bench <b@example.com> %d +0000\n" % when)
        out.append(b"committer Bench <b@example.com> %d +0000\n" % when)
        out.append(data(msg.encode()))
        if merge is not None:
            out.append(b"merge :%d\n" % merge)
        for path, payload in files.items():
            out.append(b"M 100644 inline %s\n" % path.encode() + data(payload))
        return mark

    t0 = 1_780_000_000
    last_main = add_commit("main", "add token module", {"auth/token.py": (TOKEN_PY).encode()}, t0)
    side_n = 0
    for n in range(1, commits):
        when = t0 + n * 3600
        files: dict[str, bytes] = {f"pkg/mod{n % 25:02d}.py": f"VALUE = {n}\n".encode()}
        if n % 7 == 0:
            files[f"assets/blob{n % 5}.bin"] = bytes([n % 256, 0, 255]) * 64
        if n == int(commits * 0.9):
            lines[lines.index("EXPIRY_HOURS = 24")] = "EXPIRY_HOURS = 168"
            files["auth/token.py"] = ("\n".join(lines) + "\n").encode()
        elif n % 3 == 0:
            lines.insert(1, f"# note {n}")  # above every span
            files["auth/token.py"] = ("\n".join(lines) + "\n").encode()
        elif n % 3 == 1:
            lines.append(f"# tail {n}")  # below every span
            files["auth/token.py"] = ("\n".join(lines) + "\n").encode()
        if n % 40 == 0:
            side_n += 1
            out.append(b"reset refs/heads/side%d\nfrom :%d\n\n" % (side_n, last_main))
            side = add_commit(f"side{side_n}", f"side work {side_n}", {f"side/{side_n}.txt": b"x\n"}, when - 60)
            last_main = add_commit("main", f"Merge side{side_n}", files, when, merge=side)
        else:
            last_main = add_commit("main", f"commit {n}", files, when)
    _git(root, "fast-import", "--quiet", input=b"".join(out))
    _git(root, "checkout", "-q", "-f", "main")


def pick_file(repo: Path, base: str) -> str:
    """The most-touched text file of base..HEAD (first parent) that exists at both ends."""
    out = _git(repo, "log", "--first-parent", "--format=", "--name-only", f"{base}..HEAD").decode()
    counts: dict[str, int] = {}
    for name in out.splitlines():
        if name:
            counts[name] = counts.get(name, 0) + 1
    for name, _ in sorted(counts.items(), key=lambda kv: -kv[1]):
        probe = subprocess.run(["git", "cat-file", "-e", f"{base}:{name}"], cwd=repo, capture_output=True)
        if probe.returncode or not (repo / name).is_file():
            continue
        blob = _git(repo, "show", f"{base}:{name}")
        if b"\0" not in blob[:8192] and blob.count(b"\n") >= 10:
            return name
    raise SystemExit("no text file is touched in that range; pass --file")


def anchor_at(repo: Path, base: str, path: str, *, lines: tuple[int, int] | None = None,
              symbol: str | None = None) -> AnchorRef:
    data = _git(repo, "show", f"{base}:{path}")
    ref = AnchorRef(path, sha256=hashlib.sha256(data).hexdigest(), lines=lines, symbol=symbol, commit=base)
    content_hash = text_hash(narrowed_text(ref, data)[0]) if lines or symbol else None
    return AnchorRef(path, sha256=ref.sha256, lines=lines, symbol=symbol,
                     content_hash=content_hash, commit=base, dirty=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?", help="a local clone (default: a synthetic repo)")
    ap.add_argument("--commits", type=int, default=300, help="first-parent commits to walk")
    ap.add_argument("--file", help="file to anchor (repo-relative)")
    ap.add_argument("--lines", help="START-END to anchor (default: five lines in the middle)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write the figures into docs/benchmarks.md")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="anchorfs-bench-history-")
    if args.repo:
        repo = Path(args.repo).resolve()
        what = f"local clone `{repo.name}`"
    else:
        repo = Path(tmp.name) / "synthetic"
        t = time.perf_counter()
        build_synthetic(repo, args.commits)
        what = f"synthetic repo ({args.commits} commits, merges, binaries; built in {time.perf_counter() - t:.1f}s)"
    top = Path(_git(repo, "rev-parse", "--show-toplevel").decode().strip())
    chain = _git(top, "rev-list", "--first-parent", "-n", str(args.commits + 1), "HEAD").decode().split()
    base = chain[-1]
    walked = len(chain) - 1

    cases: list[tuple[str, AnchorRef]] = []
    if args.repo:
        path = args.file or pick_file(top, base)
        n_lines = _git(top, "show", f"{base}:{path}").count(b"\n")
        if args.lines:
            a, _, b = args.lines.partition("-")
            span = (int(a), int(b or a))
        else:
            mid = max(1, n_lines // 2 - 2)
            span = (mid, min(n_lines, mid + 4))
        cases.append((f"`{path}:{span[0]}-{span[1]}`", anchor_at(top, base, path, lines=span)))
    else:
        base_lines = _git(top, "show", f"{base}:auth/token.py").decode().splitlines()
        expiry = base_lines.index("EXPIRY_HOURS = 24") + 1
        cases.append(("lines: `auth/token.py` expiry line", anchor_at(top, base, "auth/token.py", lines=(expiry, expiry))))
        cases.append(("lines: `auth/token.py` 3-line span", anchor_at(top, base, "auth/token.py", lines=(9, 11))))
        cases.append(("symbol: `TokenIssuer.issue`", anchor_at(top, base, "auth/token.py", symbol="TokenIssuer.issue")))
        cases.append(("whole file: `auth/token.py`", anchor_at(top, base, "auth/token.py")))

    rows = []
    for label, ref in cases:
        memory = Memory(id=new_id(), content=label, anchors=(ref,))
        result = bisect(top, memory)
        hist = result.anchors[0]
        steps = len(log(top, memory).steps)
        t_bisect = median_of(lambda: bisect(top, memory), args.repeat)
        # git log -L on the same lines, named as they stand at HEAD (log -L reads them there).
        head_blob = _git(top, "show", f"HEAD:{ref.path}")
        head_len = max(1, head_blob.count(b"\n"))
        if ref.symbol:
            try:
                span = narrowed_text(ref, head_blob)[1]
            except Exception:
                span = (1, head_len)
        elif ref.lines:
            span = hist.lines_now or ref.lines
        else:
            span = (1, head_len)
        span = (min(span[0], head_len), min(span[1], head_len))
        cmd = ["git", "log", "--first-parent", "--format=%H", f"-L{span[0]},{span[1]}:{ref.path}", f"{base}..HEAD"]

        def run_log() -> None:
            subprocess.run(cmd, cwd=top, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        t_log = median_of(run_log, args.repeat)
        culprit = result.culprit
        rows.append((label, walked, steps, culprit.short if culprit else "none", t_bisect, t_log))

    header = "| anchor | commits walked | steps touching | culprit | bisect | `git log -L` | ratio |"
    lines = [header, "|---|---:|---:|---|---:|---:|---:|"]
    for label, w, s, c, tb, tl in rows:
        lines.append(f"| {label} | {w} | {s} | {c} | {tb * 1000:.0f} ms | {tl * 1000:.0f} ms | {tb / tl:.2f}x |")
    table = "\n".join(lines)
    print(f"{what}\n{machine()}\n\n{table}")
    if args.write:
        body = f"""Machine: {machine()}.

`python scripts/bench_history.py{' ' + args.repo if args.repo else ''} --commits {args.commits} --write` on a {what}.
Median of {args.repeat} runs. `bisect` walks the first-parent chain from the anchor's commit to
HEAD and the working tree (one `rev-list`, one streaming `diff-tree --stdin -p -U0` limited to
the path, one `cat-file --batch`), judging every step that touched the file. The baseline is
`git log --first-parent -L START,END:FILE BASE..HEAD` for the same lines (as they stand at HEAD),
run in the same process of the benchmark; ratio = bisect / git log -L (below 1 is faster).

{table}
"""
        write_section("History (bisect)", body)
        print("\nwrote docs/benchmarks.md")
    tmp.cleanup()


if __name__ == "__main__":
    main()
