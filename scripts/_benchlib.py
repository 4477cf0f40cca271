"""Shared bits for scripts/bench_*.py: machine facts and writing a section of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


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
