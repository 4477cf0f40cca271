"""Load and check the labelled pairs of `pairs.jsonl` (evals/tidy/README.md).

Standard library only, so a bench or a test can import it without anchorfs: put this folder on
`sys.path` and `import tidy_pairs`, or run `python evals/tidy/tidy_pairs.py` for the counts.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["HERE", "WORKSPACE", "LABELS", "KINDS", "GROUNDS", "load_pairs", "check", "counts"]

HERE = Path(__file__).resolve().parent
# The workspace root every anchor is relative to: the Quillpay repo of the retrieval set.
WORKSPACE = HERE.parent / "retrieval" / "repo"
LABELS = ("duplicate", "conflict", "unrelated", "refinement")
KINDS = ("decision", "constraint", "goal", "preference", "reference", "summary", "note")
GROUNDS = ("same-symbol", "same-lines", "same-file", "path-in-text")
_KEYS = {"id", "label", "ground", "a", "b", "why"}
_SIDE_KEYS = {"content", "kind", "anchors"}
_LINES = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


def load_pairs(root: Path = HERE) -> list[dict[str, Any]]:
    """Every pair of `root/pairs.jsonl`, in file order."""
    with (root / "pairs.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _check_anchor(spec: Any, workspace: Path) -> str | None:
    """None when `spec` resolves under `workspace`, else what is wrong with it."""
    if not isinstance(spec, str) or not spec.strip():
        return f"anchor {spec!r} is not a non-empty string"
    if "#" in spec:
        path, _, symbol = spec.partition("#")
        target = workspace / path
        if not target.is_file():
            return f"{spec}: no file {path}"
        text = target.read_text(encoding="utf-8")
        # A dotted symbol (Class.method): every part must be named in the file.
        missing = [part for part in symbol.split(".") if not re.search(rf"\b{re.escape(part)}\b", text)]
        return f"{spec}: {', '.join(missing)} not in {path}" if missing else None
    m = _LINES.match(spec)
    if m:
        path = m.group("path")
        target = workspace / path
        if not target.is_file():
            return f"{spec}: no file {path}"
        start = int(m.group("start"))
        end = int(m.group("end") or start)
        total = len(target.read_text(encoding="utf-8").splitlines())
        if not 1 <= start <= end <= total:
            return f"{spec}: lines {start}-{end} not within 1-{total}"
        return None
    return None if (workspace / spec).is_file() else f"{spec}: no file"


def check(root: Path = HERE, workspace: Path = WORKSPACE) -> list[str]:
    """Every problem in the set, as one line each; an empty list means it is valid."""
    problems: list[str] = []
    seen: set[str] = set()
    for n, pair in enumerate(load_pairs(root), 1):
        where = f"line {n}"
        if not isinstance(pair, dict):
            problems.append(f"{where}: not an object")
            continue
        pid = pair.get("id")
        where = f"line {n} ({pid})"
        if set(pair) != _KEYS:
            problems.append(f"{where}: keys {sorted(pair)} != {sorted(_KEYS)}")
            continue
        if not (isinstance(pid, str) and re.fullmatch(r"p\d{3,}", pid)):
            problems.append(f"{where}: bad id")
        elif pid in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(str(pid))
        if pair["label"] not in LABELS:
            problems.append(f"{where}: label {pair['label']!r}")
        if pair["ground"] not in GROUNDS:
            problems.append(f"{where}: ground {pair['ground']!r}")
        if not (isinstance(pair["why"], str) and pair["why"].strip()):
            problems.append(f"{where}: empty why")
        for side in ("a", "b"):
            memory = pair[side]
            if not isinstance(memory, dict) or set(memory) != _SIDE_KEYS:
                problems.append(f"{where}: {side} must have exactly {sorted(_SIDE_KEYS)}")
                continue
            if not (isinstance(memory["content"], str) and memory["content"].strip()):
                problems.append(f"{where}: {side}.content empty")
            if memory["kind"] not in KINDS:
                problems.append(f"{where}: {side}.kind {memory['kind']!r}")
            if not isinstance(memory["anchors"], list):
                problems.append(f"{where}: {side}.anchors is not a list")
                continue
            for spec in memory["anchors"]:
                bad = _check_anchor(spec, workspace)
                if bad:
                    problems.append(f"{where}: {side}: {bad}")
        if isinstance(pair["a"], dict) and isinstance(pair["b"], dict):
            if pair["a"].get("content") == pair["b"].get("content"):
                problems.append(f"{where}: a and b have identical content")
            if pair["ground"] == "path-in-text" and pair["a"].get("anchors") and pair["b"].get("anchors"):
                problems.append(f"{where}: path-in-text but both sides are anchored")
    return problems


def counts(root: Path = HERE) -> dict[str, Counter[str]]:
    """Pairs per label, per ground, per (label, ground), and memories per kind."""
    pairs = load_pairs(root)
    return {
        "label": Counter(p["label"] for p in pairs),
        "ground": Counter(p["ground"] for p in pairs),
        "label x ground": Counter(f"{p['label']} / {p['ground']}" for p in pairs),
        "kind": Counter(p[s]["kind"] for p in pairs for s in ("a", "b")),
    }


if __name__ == "__main__":
    found = check()
    for line in found:
        print("PROBLEM", line)
    print(f"{len(load_pairs())} pairs, {len(found)} problems")
    for name, counter in counts().items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: -kv[1])))
