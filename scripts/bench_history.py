#!/usr/bin/env python3
"""Benchmark `bisect` over a few hundred first-parent commits against `git log -L` in one run.

Both sides answer the same question about the same lines: which commits touched them.
`git log --first-parent -L START,END:FILE BASE..HEAD` is git's own line-history walk, the
fastest thing a person would run by hand; `bisect` also judges every step and carries the span.

Usage: python scripts/bench_history.py [REPO | --real] [--commits 300] [--file PATH] [--lines S-E]
                                       [--repeat 5] [--write]
Without REPO a synthetic repo is built (the tests' token module, with merges and binary noise,
and a 4,000-line TypeScript file touched 5 times). With REPO (any local clone), the most-touched
text file of its last --commits first-parent commits is anchored at the oldest of them. `--real`
is the real clone with long files: zod (TypeScript, 2,000+ first-parent commits), cloned once
into the benchmark cache folder; offline without that clone, the synthetic repo alone runs.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import cache_dir, machine, write_section  # noqa: E402

from anchorfs.anchor.anchors import narrowed_text, narrowed_tokens, text_hash  # noqa: E402
from anchorfs.history import bisect, log  # noqa: E402
from anchorfs.core.model import AnchorRef, Memory, new_id  # noqa: E402

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


REAL = ("zod", "https://github.com/colinhacks/zod.git", "packages/zod/src/v4/core/schemas.ts", 900)
"""The real clone: name, where it is cloned from once, its long file (4,981 lines, touched 142
times), and how many first-parent commits to walk (the file's life, nearly)."""
LONG_TS = "".join(f"export function handler{i}(req: Request, res: Response): number {{\n"
                  f"  const value{i} = compute(req.body.items, {i});\n  return value{i} * 2;\n}}\n\n" for i in range(800))
"""The synthetic repo's 4,000-line TypeScript file."""


def real_clone() -> Path | None:
    """The real clone in the cache folder, cloned on first use; None when it cannot be had."""
    name, url = REAL[0], REAL[1]
    dest = cache_dir() / name
    if not (dest / ".git").is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["git", "clone", "-q", url, str(dest)], capture_output=True).returncode:
            return None
    return dest


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
    long_ts = LONG_TS.splitlines()
    last_main = add_commit("main", "add token module", {"auth/token.py": (TOKEN_PY).encode(),
                                                        "web/big.ts": LONG_TS.encode()}, t0)
    ts_touches = {int(commits * f): k for k, f in enumerate((0.1, 0.3, 0.5, 0.7, 0.9))}
    side_n = 0
    for n in range(1, commits):
        when = t0 + n * 3600
        files: dict[str, bytes] = {f"pkg/mod{n % 25:02d}.py": f"VALUE = {n}\n".encode()}
        if n % 7 == 0:
            files[f"assets/blob{n % 5}.bin"] = bytes([n % 256, 0, 255]) * 64
        if n in ts_touches:  # above the anchored line, below it, and at last the line itself
            k = ts_touches[n]
            if k == 4:
                long_ts[long_ts.index("  return value400 * 2;")] = "  return value400 * 3;"
            elif k % 2:
                long_ts.insert(10, f"// note {n}")
            else:
                long_ts.append(f"// tail {n}")
            files["web/big.ts"] = ("\n".join(long_ts) + "\n").encode()
        if n == int(commits * 0.9):
            lines[lines.index("EXPIRY_HOURS = 24")] = "EXPIRY_HOURS = 168"
            files["auth/token.py"] = ("\n".join(lines) + "\n").encode()
        elif n % 3 == 0:
            lines.insert(1, f"NOTE_{n} = {n}")  # above every span
            files["auth/token.py"] = ("\n".join(lines) + "\n").encode()
        elif n % 3 == 1:
            lines.append(f"TAIL_{n} = {n}")  # below every span
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
    return AnchorRef(path, sha256=ref.sha256, lines=lines, symbol=symbol, content_hash=content_hash,
                     commit=base, dirty=False, token_hash=narrowed_tokens(ref, data))  # as `take` records it


def alternate(fa: Callable[[], object], fb: Callable[[], object], repeat: int) -> tuple[float, float, float, float]:
    """Medians of `fa` and `fb`, run turn about so a busy machine slows both alike: wall times,
    then CPU times (this process and the git processes it waited for), which a machine shared with
    other work disturbs less."""
    import resource

    def cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    ta: list[float] = []
    tb: list[float] = []
    ca: list[float] = []
    cb: list[float] = []
    for _ in range(repeat):
        for fn, out, used in ((fa, ta, ca), (fb, tb, cb)):
            c, t = cpu(), time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
            used.append(cpu() - c)
    m = statistics.median
    return m(ta), m(tb), m(ca), m(cb)


def bench(repo_arg: str | None, commits: int, args: argparse.Namespace, tmp: Path) -> tuple[str, str]:
    """One repo, one size: (what was measured, markdown table)."""
    if repo_arg:
        repo = Path(repo_arg).resolve()
        head = _git(repo, "rev-parse", "--short=9", "HEAD").decode().strip()
        what = f"local clone `{repo.name}` at {head}, last {commits} first-parent commits"
    else:
        repo = tmp / f"synthetic-{commits}"
        t = time.perf_counter()
        build_synthetic(repo, commits)
        what = (f"synthetic repo: {commits} first-parent commits, a merge every 40, binary churn "
                f"(built in {time.perf_counter() - t:.1f}s)")
    top = Path(_git(repo, "rev-parse", "--show-toplevel").decode().strip())
    chain = _git(top, "rev-list", "--first-parent", "-n", str(commits + 1), "HEAD").decode().split()
    base = chain[-1]
    walked = len(chain) - 1

    cases: list[tuple[str, AnchorRef]] = []
    if repo_arg:
        path = args.file or pick_file(top, base)
        if not args.lines:  # one line a third of the way in, as well as the five in the middle
            third = max(1, _git(top, "show", f"{base}:{path}").count(b"\n") // 3)
            cases.append((f"one line: `{path}:{third}`", anchor_at(top, base, path, lines=(third, third))))
        n_lines = _git(top, "show", f"{base}:{path}").count(b"\n")
        if args.lines:
            a, _, b = args.lines.partition("-")
            span = (int(a), int(b or a))
        else:
            mid = max(1, n_lines // 2 - 2)
            span = (mid, min(n_lines, mid + 4))
        cases.append((f"lines: `{path}:{span[0]}-{span[1]}`", anchor_at(top, base, path, lines=span)))
    else:
        base_lines = _git(top, "show", f"{base}:auth/token.py").decode().splitlines()
        expiry = base_lines.index("EXPIRY_HOURS = 24") + 1
        cases.append(("lines: expiry line (broken at 90%)", anchor_at(top, base, "auth/token.py", lines=(expiry, expiry))))
        cases.append(("lines: 3-line span (holds)", anchor_at(top, base, "auth/token.py", lines=(9, 11))))
        cases.append(("symbol: `TokenIssuer.issue` (holds)", anchor_at(top, base, "auth/token.py", symbol="TokenIssuer.issue")))
        cases.append(("whole file (broken at once)", anchor_at(top, base, "auth/token.py")))
        line = LONG_TS.splitlines().index("  return value400 * 2;") + 1
        cases.append(("one line of a 4,000-line TypeScript file, touched 5 times (broken at 90%)",
                      anchor_at(top, base, "web/big.ts", lines=(line, line))))

    rows = []
    for label, ref in cases:
        memory = Memory(id=new_id(), content=label, anchors=(ref,))
        result = bisect(top, memory)
        hist = result.anchors[0]
        steps = len(log(top, memory).steps)
        # git log -L on the same lines, named as they stand at HEAD (log -L reads them there).
        path_now = hist.path_now or ref.path
        head_blob = _git(top, "show", f"HEAD:{path_now}")
        head_len = max(1, head_blob.count(b"\n"))
        if ref.symbol:
            try:
                span = narrowed_text(ref, head_blob)[1]
            except Exception:
                span = (1, head_len)
        elif ref.lines:
            span = hist.lines_now or ref.lines
            culprit = result.culprit
            added = [ln[1:] for ln in (culprit.hunk.lines if culprit and culprit.hunk else ()) if ln.startswith("+")]
            head_lines = head_blob.decode("utf-8", "replace").splitlines()
            if hist.lines_now is None and added and added[0] in head_lines:
                # Broken: follow the lines that replaced the anchored ones, as they stand at HEAD.
                start = head_lines.index(added[0]) + 1
                span = (start, start + ref.lines[1] - ref.lines[0])
        else:
            span = (1, head_len)
        span = (min(span[0], head_len), min(span[1], head_len))
        cmd = ["git", "log", "--first-parent", "--format=%H", f"-L{span[0]},{span[1]}:{path_now}", f"{base}..HEAD"]

        def run_log() -> None:
            subprocess.run(cmd, cwd=top, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        try:
            run_log()
        except subprocess.CalledProcessError:  # git cannot follow these lines: bisect alone
            t_bisect, _, c_bisect, _ = alternate(lambda: bisect(top, memory), lambda: None, args.repeat)
            t_log = c_log = None
        else:
            t_bisect, t_log, c_bisect, c_log = alternate(lambda: bisect(top, memory), run_log, args.repeat)
        culprit = result.culprit
        rows.append((label, walked, steps, culprit.short if culprit else "none (holds)", t_bisect, t_log,
                     c_bisect / c_log if c_log else None))

    lines = ["| anchor | commits walked | steps touching | culprit | bisect | `git log -L` | ratio | CPU ratio |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for label, w, n, c, tb, tl, cr in rows:
        log_cell, ratio = (f"{tl * 1000:.0f} ms", f"{tb / tl:.2f}x") if tl else ("fails", "-")
        lines.append(f"| {label} | {w} | {n} | {c} | {tb * 1000:.0f} ms | {log_cell} | {ratio} | "
                     f"{f'{cr:.2f}x' if cr else '-'} |")
    return what, "\n".join(lines)


def phases(commits: int, runs: int, tmp: Path) -> str:
    """Where one walk's time goes, on the synthetic repo's 3-line span: its phases timed inside
    the walk (medians over `runs` walks), and how long it waited for git's stream."""
    from anchorfs.core import git as core_git
    from anchorfs.history import patch, repo as history_repo, tracker

    repo = tmp / f"phases-{commits}"
    build_synthetic(repo, commits)
    base = _git(repo, "rev-list", "--first-parent", "HEAD").decode().split()[-1]
    memory = Memory(id=new_id(), content="span", anchors=(anchor_at(repo, base, "auth/token.py", lines=(9, 11)),))
    spent: dict[str, float] = {}

    def timed(owner: object, name: str, label: str) -> None:
        real = getattr(owner, name)

        def wrapper(*a: object, **k: object) -> object:
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
        setattr(owner, name, wrapper)

    timed(history_repo._Repo, "__init__", "setup (top level, cat-file, HEAD)")
    timed(history_repo._Repo, "chain", "rev-list")
    timed(tracker._Tracker, "__init__", "the anchored version read and judged")
    timed(patch._PatchParser, "feed", "parsing the stream")
    timed(tracker._Tracker, "step", "carrying the span through the steps")
    timed(core_git._Blobs, "close", "closing")
    real_read = patch._read

    def read(proc: Any, what: str) -> Any:  # the time blocked on git's stream
        stdout = proc.stdout

        class Waiting:
            def read1(self, n: int) -> bytes:
                t = time.perf_counter()
                try:
                    return stdout.read1(n)
                finally:
                    spent["waiting for the stream"] = spent.get("waiting for the stream", 0.0) + time.perf_counter() - t

            def close(self) -> None:
                stdout.close()
        proc.stdout = Waiting()
        return real_read(proc, what)
    patch._read = read
    bisect(repo, memory)
    rows: dict[str, list[float]] = {}
    for _ in range(runs):
        spent.clear()
        t = time.perf_counter()
        bisect(repo, memory)
        rows.setdefault("the whole walk", []).append(time.perf_counter() - t)
        for k, v in spent.items():
            rows.setdefault(k, []).append(v)
    return "\n".join(["| phase | ms (median) |", "|---|---:|"] + [
        f"| {k} | {statistics.median(v) * 1000:.1f} |" for k, v in rows.items()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?", help="a local clone (default: a synthetic repo)")
    ap.add_argument("--real", action="store_true", help=f"the real clone ({REAL[0]}), cloned once into the cache folder")
    ap.add_argument("--commits", default="300", help="first-parent commits to walk; a comma list runs several sizes")
    ap.add_argument("--file", help="file to anchor (repo-relative)")
    ap.add_argument("--lines", help="START-END to anchor (default: five lines in the middle)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write the figures into docs/benchmarks.md")
    ap.add_argument("--note", default="", help="a sentence to add under the figures")
    ap.add_argument("--phases", action="store_true",
                    help="only this: where one walk's time goes, phase by phase (the synthetic repo, each size)")
    args = ap.parse_args()
    if args.phases:
        with tempfile.TemporaryDirectory(prefix="anchorfs-bench-history-") as tmp:
            for n in [int(x) for x in str(args.commits).split(",") if x.strip()]:
                print(f"synthetic repo, {n} commits, the 3-line span, {args.repeat} walks:\n\n"
                      f"{phases(n, args.repeat, Path(tmp))}\n")
        return
    runs = [(args.repo, [int(x) for x in str(args.commits).split(",") if x.strip()])]
    if args.real and not args.repo:  # the synthetic sizes, then the real clone, in one run
        clone = real_clone()
        if clone is None:
            print(f"{REAL[0]} could not be cloned (offline?): the synthetic repo only")
        else:
            runs.append((str(clone), [REAL[3]]))

    parts = []
    with tempfile.TemporaryDirectory(prefix="anchorfs-bench-history-") as tmp:
        for repo, sizes in runs:
            args.file = args.file or (REAL[2] if repo and args.real else None)
            for n in sizes:
                what, table = bench(repo, n, args, Path(tmp))
                print(f"{what}\n\n{table}\n")
                parts.append(f"{what}:\n\n{table}")
    print(machine())
    if args.write:
        command = "python scripts/bench_history.py" + (" --real" if args.real else f" {args.repo}" if args.repo else "")
        body = f"""Machine: {machine()}.

`{command} --commits {args.commits} --repeat {args.repeat} --write`. Medians of {args.repeat}
runs, `bisect` and the baseline taking turns, in the same process. `bisect` walks the
first-parent chain from the anchor's commit to HEAD, then the working tree: one `rev-list` for
the chain, beside it one streaming `git log --first-parent -p -U0` limited to the path (only
the steps that touched the file, with their metadata), `cat-file` for objects, judging every
step that touched the file. The baseline, `git log --first-parent -L START,END:FILE
BASE..HEAD`, follows the same lines (named as they stand at HEAD) in one git process and judges
nothing. Ratio = bisect / `git log -L` in wall time: below 1 is faster. CPU ratio = the same
in CPU time (the Python process and the git processes it started), which other work on a
shared machine disturbs less.

""" + "\n\n".join(parts) + ("\n\n" + args.note.strip() if args.note.strip() else "") + "\n"
        write_section("History (bisect)", body)
        print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
