"""Shared bits for scripts/bench_*.py: machine facts and writing a section of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
if str(ROOT) not in sys.path[:1]:  # this checkout's package, not the installed one: a script run
    sys.path.insert(0, str(ROOT))  # from a second checkout (the "before" of an A/B) measures that one


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()} {platform.release()}; {date.today().isoformat()}"


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Best wall time of `repeat` runs, in seconds (the least disturbed run)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def median_of(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def write_section(title: str, body: str) -> None:
    """Replace (or append) the `## title` section of docs/benchmarks.md."""
    DOCS.parent.mkdir(exist_ok=True)
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n\nFigures are ratios against a baseline measured in the same run, on the machine named in each section.\n"
    section = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + section
    DOCS.write_text(text.rstrip() + "\n")


# -- a real source tree ----------------------------------------------------------------------

SDIST = "django==5.2.8"
"""The pinned sdist the benchmarks run over: 6,900 files, paths up to 7 folders deep."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anchorfs-bench"


def source_tree(dest: Path, *, synthetic_files: int = 7000, offline: bool = False) -> tuple[str, list[str]]:
    """Unpack the pinned sdist into `dest` (fetched once with pip into `cache_dir()`), or, when
    that cannot be had (offline), write a synthetic tree of `synthetic_files` Python files
    spread over nested folders. Returns (what it is, repo-relative paths of its files)."""
    import subprocess
    import sys
    import tarfile

    cache = cache_dir()
    name, _, version = SDIST.partition("==")
    archive = next(iter(sorted(cache.glob(f"{name}-{version}.tar.gz"))), None) if cache.is_dir() else None
    if archive is None and not offline:
        cache.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--quiet", SDIST, "-d", str(cache)], capture_output=True, text=True, timeout=600)
        if proc.returncode == 0:
            archive = next(iter(sorted(cache.glob(f"{name}-{version}.tar.gz"))), None)
    dest.mkdir(parents=True, exist_ok=True)
    if archive is not None:
        with tarfile.open(archive) as tar:
            top = f"{name}-{version}/"
            members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(top)]
            for m in members:
                m.name = m.name[len(top):]
            tar.extractall(dest, members=members, filter="data")
        files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        return f"the {SDIST} sdist ({len(files):,} files)", files
    files = []
    for i in range(synthetic_files):
        rel = Path(*(f"pkg{(i >> s) % 8}" for s in (0, 3, 6, 9)[: 1 + i % 4])) / f"mod{i:05d}.py"
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text("".join(f"def fn{j}(x):\n    return x + {i * 100 + j}\n\n" for j in range(20)))
        files.append(str(rel))
    return f"a synthetic tree ({synthetic_files:,} files, 1-4 folders deep; the sdist could not be fetched)", sorted(files)


def median_run(cmd: list[str], repeat: int = 5, **kw: object) -> float:
    """Median wall time of `cmd` as a process, in seconds (output discarded; must exit 0 or 90)."""
    import subprocess

    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]
        times.append(time.perf_counter() - t)
        if proc.returncode not in (0, 90):
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode(errors='replace')}")
    return statistics.median(times)
