#!/usr/bin/env python3
"""Benchmark the user-felt speed budgets of issue 36, as whole processes on the Django tree.

What it measures, on a git repo of the Django 5.1.4 sdist with N anchored memories (1,000 and
10,000; whole-file, `path:START-END` and `path#Symbol` anchors spread over its Python files):

- `hook post-edit` (Claude Code's PostToolUse JSON on stdin) after an edit of an unanchored file,
  of an anchored file whose memories stay fresh, and one that makes a memory stale. Every timed
  run sees new bytes, written untimed just before, as an agent's edit would be. Budget <= 8x.
- `hook pre-read` (Claude Code's PreToolUse JSON for a `Read` on stdin) of the anchored file the
  post-edit cases edit: the first read in a session (the session record deleted before each run,
  so each run speaks) and the same file read again (told already: silent). Budget <= 8x, the
  post-edit hook's.
- `hook session-start` for every kind of start: first (derived state deleted: `fold.snap`,
  `fold.tail`, `manifest.json`, `drift.json` and any memo or `judged/`; ledger and store
  kept), repeated, after a `record`, after an edit of an anchored file (both 2.1 s before,
  past the hash cache's racy window, as between two sessions), and past the hash cache's TTL:
  that case runs with `ANCHORFS_DRIFT_CACHE_TTL=1` (its warm-up too, so a memo keyed by the
  environment holds) and each run starts 1.1 s after the last, so every cached hash has
  expired, as after a pause of five minutes (the default TTL is 300 s). A TTL of 0 would also
  expire every memo at birth: a cost no real start pays. Budget <= 20x.
- the installed `.git/hooks/post-commit` run directly with `sh` after a commit (made untimed,
  with the hook off) touching no anchored file, an anchored file whose memories stay fresh,
  or making one stale. Budget <= 15x.
- the pre-commit gate (`hook install --gate`'s line, run with `sh`) with an anchored file staged
  whose memories stay fresh, and with a staged change that makes one stale (refused). Budget <= 8x,
  the post-edit hook's.
- MCP `recall` in a running `anchorfs mcp` server, through the official MCP client: 50 calls
  with varied queries after one untimed call (the first call's lazy imports are start-up, not
  recall; its time is noted). Budget p50 <= 30 ms at 10,000 memories.
- `anchorfs --root ROOT drift --json`, warm (two untimed runs first), at each size and at
  `--big` (100,000 memories, whole-file and line anchors). Budget <= 1 s at 100,000.

Why ratios: the hooks are whole processes whose cost is mostly the interpreter's start and
imports; `python3 -c pass` (this interpreter) run beside them prices what the machine's moment
does to any process, so a ratio travels between machines and loads where milliseconds do not.
Runs are interleaved: per round, for each code in turn (order alternating), a baseline run then
the case's run. A case's ratio per run is its time over the median of all the baseline runs taken
during that case (every code, every round: codes x `--repeat` runs): a median is robust to one
disturbed baseline, and one per case follows a machine whose speed drifts over the session, which
a single session-wide baseline would not; a pairwise ratio doubles the noise of each run. The
table gives the median and p95 (interpolated; with 11 runs it lies between the two slowest) of
those ratios by wall clock, and the median by CPU time (user + sys of the children, from
`getrusage(RUSAGE_CHILDREN)` deltas against the baseline's CPU), which other load inflates less.
A budget is judged on the median, for the last `--code` given.

Each `--code DIR` (an anchorfs checkout) runs with `PYTHONPATH=DIR` and this interpreter, on a
twin workspace of its own built by that code (state formats differ between versions).

Run (about 20 minutes in full on 2 cores, 10 of them building the 100,000-memory workspaces):
    .venv/bin/python scripts/bench_budgets.py --code /tmp/base --code /tmp/new
    .venv/bin/python scripts/bench_budgets.py --code . --memories 1000 --big 0 --repeat 3 --only post-edit,recall
`--write` puts the tables into docs/benchmarks.md. The sdist is fetched once with `pip download`
and unpacked into ~/.cache/anchorfs-bench/django-5.1.4 (deliberate, reused by every run; `--tree
DIR` uses another copy); nothing else is written outside `--work` (default: a temp folder,
removed at the end unless `--keep`).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import fcntl
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import machine, write_section  # noqa: E402

PY = sys.executable
SDIST = "django==5.1.4"
SETTLE = 2.1  # seconds: past the hash cache's 2 s racy window
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "bench",
           "GIT_AUTHOR_EMAIL": "bench@example.invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.invalid", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
DERIVED = ("fold.snap", "fold.tail", "manifest.json", "drift.json", "drift.memo", "digest.memo", "judged", "config.parsed")
ALL = ("post-edit", "pre-read", "session-start", "post-commit", "pre-commit", "recall", "drift")
BUDGET = {"post-edit": 8.0, "pre-read": 8.0, "session-start": 20.0, "post-commit": 15.0, "pre-commit": 8.0}
RECALL_MS, DRIFT_S, RECALL_CALLS = 30.0, 1.0, 50
BUILD = """
import json, sys, time, anchorfs
job = json.load(open(sys.argv[1]))
assert anchorfs.__file__.startswith(job["code"] + "/"), f"{anchorfs.__file__} is not {job['code']}'s"
items, batch, t = job["items"], job["batch"], time.perf_counter()
with anchorfs.open(job["root"]) as ws:
    for j in range(0, len(items), batch):
        ws.record_many(items[j:j + batch])
        print(f"  {job['root']}: {j + len(items[j:j + batch]):,} recorded, {time.perf_counter() - t:.0f} s", file=sys.stderr)
    ws.drift()  # the hash cache warmed, as any earlier read would have
"""


# -- the tree and the memories ------------------------------------------------------------------

def django_tree(tree: str | None) -> Path:
    if tree:
        return Path(tree)
    cache = Path.home() / ".cache" / "anchorfs-bench"
    dest = cache / "django-5.1.4"
    if (dest / "django").is_dir():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    if not list(cache.glob("[Dd]jango-5.1.4.tar.gz")):  # the sdist's name is capitalised
        subprocess.run([PY, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet", SDIST,
                        "-d", str(cache)], check=True)
    tmp = Path(tempfile.mkdtemp(dir=cache))
    with tarfile.open(next(cache.glob("[Dd]jango-5.1.4.tar.gz"))) as tar:
        tar.extractall(tmp, filter="data")
    next(tmp.iterdir()).rename(dest)
    tmp.rmdir()
    return dest


@dataclass
class Source:
    rel: str
    lines: int
    symbols: list[str]
    first: str  # its first line


def sources(tree: Path) -> list[Source]:
    """The tree's Python files (Django's and its tests') of 10 lines or more, with their top-level
    functions and classes."""
    out = []
    for path in sorted(tree.rglob("*.py")):
        data = path.read_bytes()
        if data.count(b"\n") < 10:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                body = ast.parse(data).body
        except (SyntaxError, ValueError):
            continue
        names = [n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        out.append(Source(str(path.relative_to(tree)), data.count(b"\n"), names, data.split(b"\n", 1)[0].decode()))
    return out


TARGETS = ("quiet", "edit", "session", "commit")
"""Files kept for the edits: `quiet` has no memory; the others two memories each, on lines 1-3 and
on their first symbol, so an edit at the end keeps them fresh and a change of line 1 stales one."""


def plan(srcs: list[Source], n: int, big: bool) -> tuple[dict[str, str], list[dict[str, object]]]:
    fit = [s for s in srcs if s.symbols and s.lines > 60 and s.first.startswith(("import ", "from "))]
    targets = {name: s.rel for name, s in zip(TARGETS, fit)}
    pool = [s for s in srcs if s.rel not in targets.values()]
    items: list[dict[str, object]] = []
    for name in TARGETS[1:]:
        src = next(s for s in srcs if s.rel == targets[name])
        for spec in (f"{src.rel}:1-3", f"{src.rel}#{src.symbols[0]}"):
            items.append({"content": f"The {name} case rests on {spec}.", "kind": "constraint", "anchors": [spec]})
    for i in range(n - len(items)):
        s = pool[i % len(pool)]
        start = 1 + (i // len(pool) * 7) % (s.lines - 5)
        kind = i % 2 if big else i % 3
        spec = [s.rel, f"{s.rel}:{start}-{start + 2}", f"{s.rel}#{s.symbols[(i // len(pool)) % len(s.symbols)]}"
                if s.symbols else s.rel][kind]
        where = Path(s.rel)
        items.append({"content": f"Fact {i}: the {where.parent.name} {where.stem} code at {spec} is load-bearing.",
                      "kind": ("decision", "constraint", "reference", "note")[i % 4], "anchors": [spec]})
    return targets, items


# -- twin workspaces ----------------------------------------------------------------------------

@dataclass
class Twin:
    code: str
    root: Path
    env: dict[str, str]
    targets: dict[str, str]
    orig: dict[str, bytes] = field(default_factory=dict)

    def write(self, name: str, data: bytes) -> None:
        (self.root / self.targets[name]).write_bytes(data)

    def appended(self, name: str, k: int) -> bytes:
        return self.orig[name].rstrip(b"\n") + f"\n# edit {k} at {time.time_ns()}\n".encode()

    def staled(self, name: str, k: int) -> bytes:
        first, _, rest = self.orig[name].partition(b"\n")
        return f"stale_{k % 1000} = {k}  # was: {first[:40]!r}\n".encode() + rest

    def git(self, *args: str) -> None:
        subprocess.run(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=self.root, env=self.env, check=True,
                       capture_output=True)

    def commit(self, name: str, data: bytes) -> None:
        self.write(name, data)
        self.git("commit", "-qm", f"edit {name}", "--", self.targets[name])

    def cli(self, *args: str) -> str:
        proc = subprocess.run([PY, "-m", "anchorfs", *args], cwd=self.root, env=self.env, capture_output=True,
                              text=True, check=False)
        if proc.returncode not in (0, 90):
            raise SystemExit(f"{self.code}: anchorfs {' '.join(args)} failed: {proc.stderr[-2000:]}")
        return proc.stdout


def child_env(code: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANCHORFS_", "PYTHON"))}
    env.update(GIT_ENV)
    if code:
        env["PYTHONPATH"] = code
    return env


def quiesce(root: Path, wait: float = 1.0) -> None:
    """Wait for a background index build (it holds `.anchorfs/index.lock`; `wait` lets one just
    spawned take it), so none runs beside a timed run."""
    time.sleep(wait)
    lock = root / ".anchorfs" / "index.lock"
    if lock.exists():
        with open(lock) as f:
            fcntl.flock(f, fcntl.LOCK_EX)


def build(codes: list[str], tree: Path, work: Path, n: int, big: bool, srcs: list[Source]) -> list[Twin]:
    """One workspace per code, built by that code, the codes in parallel (untimed)."""
    targets, items = plan(srcs, n, big)
    twins, procs = [], []
    t = time.perf_counter()
    for i, code in enumerate(codes):
        root = work / f"{n}-{i}"
        shutil.copytree(tree, root, symlinks=True)  # copy2: the sdist's old mtimes kept, as in a real clone
        twin = Twin(code, root, child_env(code), targets, {k: (root / v).read_bytes() for k, v in targets.items()})
        twin.git("init", "-q")
        twin.git("add", "-A")
        twin.git("commit", "-qm", "Django 5.1.4")
        twin.cli("init")
        job = work / f"{n}-{i}.json"
        job.write_text(json.dumps({"root": str(root), "code": code, "items": items, "batch": max(1000, n // 10)}))
        # -P and the workspace as cwd: `-c` would put the current folder before PYTHONPATH
        procs.append(subprocess.Popen([PY, "-P", "-c", BUILD, str(job)], cwd=root, env=twin.env))
        twins.append(twin)
    for proc, twin in zip(procs, twins):
        if proc.wait() != 0:
            raise SystemExit(f"building {twin.root} with {twin.code} failed")
        quiesce(twin.root)
        twin.cli("hook", "install")
    print(f"built {len(codes)} workspaces of {n:,} memories in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return twins


# -- timing -------------------------------------------------------------------------------------

def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout + stderr) of one process."""
    c, t = cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, check=False)
    wall, used = time.perf_counter() - t, cpu() - c
    if proc.returncode not in (0, 90):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, used, proc.stdout + proc.stderr


Command = tuple[list[str], str | None, dict[str, str]]  # argv, stdin, extra env


@dataclass
class Case:
    group: str
    name: str
    run: Callable[[Twin], Command]
    prep: Callable[[Twin, int], object] = lambda t, k: None
    after: Callable[[Twin, int], object] = lambda t, k: None
    settle: float = 0.0  # untimed pause after every code's prep, before the round's runs
    warm: int = 1
    expect: Callable[[str], bool] = lambda out: True


@dataclass
class Result:
    name: str
    group: str
    wall: list[list[float]]  # per code: ratio of each run to the case's baseline median
    cpu: list[list[float]]
    ms: list[list[float]]
    note: str = ""


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18] if len(xs) > 1 else xs[0]


def measure(case: Case, twins: list[Twin], repeat: int, bare: list[float]) -> Result:
    base_env = child_env(None)

    def once(twin: Twin, k: int) -> tuple[float, float]:
        argv, stdin, extra = case.run(twin)
        wall, used, out = timed(argv, twin.root, {**twin.env, **extra}, stdin)
        if k >= 0 and not case.expect(out):
            raise SystemExit(f"{case.name} with {twin.code}: unexpected output {out[:600]!r}")
        case.after(twin, k)
        return wall, used

    for k in range(-case.warm, 0):
        for twin in twins:
            case.prep(twin, k)
        time.sleep(case.settle)
        for twin in twins:
            once(twin, k)
    runs: list[list[tuple[float, float]]] = [[] for _ in twins]
    baseline: list[tuple[float, float]] = []
    for k in range(repeat):
        order = list(enumerate(twins))[:: 1 if k % 2 == 0 else -1]
        for _, twin in order:
            case.prep(twin, k)
        time.sleep(case.settle)
        for i, twin in order:
            baseline.append(timed([PY, "-c", "pass"], twin.root, base_env)[:2])
            runs[i].append(once(twin, k))
    bare.extend(b[0] for b in baseline)
    bw, bc = statistics.median(b[0] for b in baseline), statistics.median(b[1] for b in baseline)
    return Result(case.name, case.group, [[w / bw for w, _ in r] for r in runs], [[c / bc for _, c in r] for r in runs],
                  [[w * 1000 for w, _ in r] for r in runs])


def cases(only: set[str], memories: int) -> list[Case]:
    def hook(event: str) -> Callable[[Twin], Command]:
        def run(t: Twin) -> Command:
            if event == "session-start":
                payload: dict[str, object] = {"hook_event_name": "SessionStart", "source": "startup"}
            elif event.startswith("pre-read"):
                payload = {"hook_event_name": "PreToolUse", "tool_name": "Read",
                           "tool_input": {"file_path": str(t.root / t.targets[event.split(":")[1]])}}
            else:
                payload = {"hook_event_name": "PostToolUse", "tool_name": "Edit",
                           "tool_input": {"file_path": str(t.root / t.targets[event.split(":")[1]])}}
            stdin = json.dumps({"session_id": "s", "cwd": str(t.root), **payload})
            return [PY, "-m", "anchorfs", "hook", event.split(":")[0]], stdin, {}
        return run

    def restore(name: str, *, commit: bool = False) -> Callable[[Twin, int], None]:
        def after(t: Twin, k: int) -> None:  # back to fresh, and the hook told so, untimed
            if commit:
                t.commit(name, t.orig[name])
                subprocess.run(["sh", ".git/hooks/post-commit"], cwd=t.root, env=t.env, capture_output=True, check=True)
            else:
                t.write(name, t.orig[name])
                argv, stdin, _ = hook("post-edit:" + name)(t)
                subprocess.run(argv, input=stdin, cwd=t.root, env=t.env, capture_output=True, text=True, check=True)
        return after

    def clear(t: Twin, k: int) -> None:
        for name in DERIVED:
            path = t.root / ".anchorfs" / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)

    def silent(out: str) -> bool:
        return out.strip() == ""

    def stale(out: str) -> bool:
        return "stale" in out

    def said(out: str) -> bool:
        return "hookSpecificOutput" in out

    def record(t: Twin, k: int) -> None:
        t.cli("record", f"note {k}: the nightly export runs at {k % 24} h")
        quiesce(t.root, 0.2)

    def post_commit(t: Twin) -> Command:
        return ["sh", ".git/hooks/post-commit"], None, {}

    def gate(t: Twin) -> Command:  # the line `hook install --gate` writes, its refusal (exit 3) read as output
        line = f"{shlex.quote(PY)} -m anchorfs.agents.hook_git gate --root {shlex.quote(str(t.root))}; true"
        return ["sh", "-c", line], None, {}

    def stage(name: str, make: Callable[[Twin, str, int], bytes]) -> Callable[[Twin, int], None]:
        def prep(t: Twin, k: int) -> None:
            t.write(name, make(t, name, k))
            t.git("add", "--", t.targets[name])
        return prep

    ttl = {"ANCHORFS_DRIFT_CACHE_TTL": "1"}
    all_cases = [
        Case("post-edit", "`hook post-edit`, unanchored file edited", hook("post-edit:quiet"),
             prep=lambda t, k: t.write("quiet", t.appended("quiet", k)), expect=silent),
        Case("post-edit", "`hook post-edit`, anchored file edited, memories stay fresh", hook("post-edit:edit"),
             prep=lambda t, k: t.write("edit", t.appended("edit", k)), expect=silent),
        Case("post-edit", "`hook post-edit`, the edit makes a memory stale", hook("post-edit:edit"),
             prep=lambda t, k: t.write("edit", t.staled("edit", k)), after=restore("edit"), expect=stale),
        Case("pre-read", "`hook pre-read`, a file memories rest on, first read in the session", hook("pre-read:edit"),
             prep=lambda t, k: (t.root / ".anchorfs" / "sessions.json").unlink(missing_ok=True), expect=said),
        Case("pre-read", "`hook pre-read`, the same file read again (told already)", hook("pre-read:edit"),
             expect=silent),
        Case("session-start", "`hook session-start`, first (derived state deleted)", hook("session-start"),
             prep=clear, expect=said),
        Case("session-start", "`hook session-start`, repeated (nothing changed)", hook("session-start"), expect=said),
        Case("session-start", "`hook session-start` after a `record`", hook("session-start"), expect=said,
             prep=record, settle=SETTLE),
        Case("session-start", "`hook session-start` after an edit of an anchored file", hook("session-start"),
             prep=lambda t, k: t.write("session", t.appended("session", k)), settle=SETTLE, expect=said),
        Case("session-start", "`hook session-start` past the hash cache's TTL", expect=said, settle=1.1, warm=2,
             run=lambda t: (*hook("session-start")(t)[:2], ttl)),
        Case("post-commit", "post-commit hook, commit touching no anchored file", post_commit,
             prep=lambda t, k: t.commit("quiet", t.appended("quiet", k)), expect=silent),
        Case("post-commit", "post-commit hook, anchored file committed, memories stay fresh", post_commit,
             prep=lambda t, k: t.commit("commit", t.appended("commit", k)), expect=silent),
        Case("post-commit", "post-commit hook, the commit makes a memory stale", post_commit,
             prep=lambda t, k: t.commit("commit", t.staled("commit", k)), after=restore("commit", commit=True),
             expect=stale),
        Case("pre-commit", "pre-commit gate, anchored file staged, memories stay fresh", gate,
             prep=stage("commit", Twin.appended), expect=silent),
        Case("pre-commit", "pre-commit gate, the staged change makes a memory stale (refused)", gate,
             prep=stage("commit", Twin.staled), after=stage("commit", lambda t, n, k: t.orig[n]),
             expect=lambda out: "would make 1 memory stale" in out),
        Case("drift", f"`drift --json`, warm, {memories:,} memories",
             lambda t: ([PY, "-m", "anchorfs", "--root", str(t.root), "drift", "--json"], None, {}), warm=2),
    ]
    return [c for c in all_cases if c.group in only]


async def recall(twins: list[Twin], queries: list[str]) -> Result:
    """p50/p95 of `recall` in one running server per code, the codes' calls alternating."""
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async with AsyncExitStack() as stack:
        sessions, args, first = [], [], []
        for t in twins:
            params = StdioServerParameters(command=PY, args=["-m", "anchorfs", "mcp", "--root", str(t.root)], env=t.env,
                                           cwd=str(t.root))
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            tool = next(x for x in (await session.list_tools()).tools if x.name == "recall")
            schema = tool.input_schema
            props = schema.get("properties", {})
            args.append("query" if "query" in props else next(p for p in schema.get("required", [])
                                                               if props[p].get("type") == "string"))
            sessions.append(session)
        for session, arg in zip(sessions, args):
            start = time.perf_counter()
            await session.call_tool("recall", {arg: "why is this code shaped this way"})
            first.append((time.perf_counter() - start) * 1000)
        ms: list[list[float]] = [[] for _ in twins]
        for k, query in enumerate(queries):
            for i in range(len(twins))[:: 1 if k % 2 == 0 else -1]:
                start = time.perf_counter()
                res = await sessions[i].call_tool("recall", {args[i]: query})
                ms[i].append((time.perf_counter() - start) * 1000)
                if res.is_error:
                    raise SystemExit(f"recall with {twins[i].code} failed: {res.content}")
    note = "MCP `recall`, first call (untimed): " + ", ".join(f"{t.code} {f:.0f} ms" for t, f in zip(twins, first))
    return Result(f"MCP `recall`, {len(queries)} calls, running server", "recall", [], [], ms, note)


# -- the report ---------------------------------------------------------------------------------

def table(results: list[Result], codes: list[str], title: str, repeat: int) -> str:
    head = "| case | " + " | ".join(f"`{c}` median | p95 | CPU median" for c in codes) + " | budget | met (last) |"
    lines = [f"### {title}", "", head, "|---|" + "---:|---:|---:|" * len(codes) + "---|---|"]
    notes = []
    for r in results:
        cells = []
        if r.group == "recall":
            for ms in r.ms:
                cells += [f"p50 {statistics.median(ms):.1f} ms", f"p95 {p95(ms):.1f} ms", "-"]
            budget, met = f"p50 <= {RECALL_MS:.0f} ms (at 10,000)", statistics.median(r.ms[-1]) <= RECALL_MS
            notes.append(r.note)
        else:
            for w, c, ms in zip(r.wall, r.cpu, r.ms):
                cells += [f"{statistics.median(w):.1f}x ({statistics.median(ms):.0f} ms)",
                          f"{p95(w):.1f}x ({p95(ms):.0f} ms)", f"{statistics.median(c):.1f}x"]
            if r.group == "drift":
                budget, met = f"<= {DRIFT_S:.0f} s (at 100,000)", statistics.median(r.ms[-1]) <= DRIFT_S * 1000
            else:
                budget, met = f"<= {BUDGET[r.group]:.0f}x", statistics.median(r.wall[-1]) <= BUDGET[r.group]
        lines.append(f"| {r.name} | " + " | ".join(cells) + f" | {budget} | {'ok' if met else 'OVER'} |")
    lines += [""] + [f"{n}." for n in notes if n]
    lines.append(f"Wall-clock ratios to `python3 -c pass` ({repeat} runs each; ms in brackets), CPU by "
                 "`getrusage(RUSAGE_CHILDREN)`; met: the last code's median against the budget.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", action="append", required=True, help="an anchorfs checkout (repeatable)")
    ap.add_argument("--memories", default="1000,10000", help="comma-separated sizes")
    ap.add_argument("--big", type=int, default=100_000, help="the drift case's size (0: skip)")
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--only", default=",".join(ALL), help=f"comma-separated subset of {', '.join(ALL)}")
    ap.add_argument("--tree", help="an unpacked Django 5.1.4 sdist (default: fetched once into ~/.cache)")
    ap.add_argument("--work", help="the folder for the workspaces (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the workspaces")
    ap.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    args = ap.parse_args()
    codes = [str(Path(c).resolve()) for c in args.code]
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    if only - set(ALL):
        ap.error(f"--only: unknown {', '.join(sorted(only - set(ALL)))}")
    sizes = [int(x) for x in args.memories.split(",") if x.strip()]
    tree = django_tree(args.tree)
    srcs = sources(tree)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="anchorfs-budgets-"))
    work.mkdir(parents=True, exist_ok=True)
    queries = [f"why is the {Path(s.rel).parent.name} {Path(s.rel).stem} code shaped this way"
               for s in srcs[:: max(1, len(srcs) // RECALL_CALLS)]][:RECALL_CALLS]
    bare: list[float] = []
    sections = []
    try:
        runs = [(n, False) for n in sizes] + ([(args.big, True)] if args.big and "drift" in only else [])
        for n, big in runs:
            twins = build(codes, tree, work, n, big, srcs)
            results = [measure(c, twins, args.repeat, bare) for c in cases({"drift"} if big else only, n)]
            if "recall" in only and not big:
                results.insert(-1 if "drift" in only else len(results), asyncio.run(recall(twins, queries)))
            title = f"{n:,} memories" + (" (whole-file and line anchors; drift only)" if big else "")
            sections.append(table(results, codes, title, args.repeat))
            print(sections[-1], file=sys.stderr, flush=True)  # progress; all of it on stdout at the end
            if not args.keep:
                for t in twins:
                    shutil.rmtree(t.root)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    base = (f"`python3 -c pass` ({PY}) median {statistics.median(bare) * 1000:.1f} ms over {len(bare)} baseline runs"
            if bare else "no process case, so no `python3 -c pass` baseline")  # `--only recall`
    first = f"Machine: {machine()}. {base}. Codes: " + ", ".join(f"`{c}`" for c in codes) + "."
    print(first + "\n\n" + "\n".join(sections))
    if args.write:
        write_section("User-felt speed budgets (issue 36)", first + "\n\n" + "\n".join(sections)
                      + "\nReproduce: `python scripts/bench_budgets.py --code . --write`.\n")


if __name__ == "__main__":
    main()
