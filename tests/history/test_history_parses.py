"""Bisect at the cost of the history it reads (issue 37, item 10): a walk parses a version of a
file only where a token comparison can change the verdict, and each version at most once."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git

import anchorfs
import anchorfs.anchor.symbols as symbols

LONG_TS = "".join(f"export function handler{i}(req: Request, res: Response): number {{\n"
                  f"  const value{i} = compute(req.body.items, {i});\n  return value{i} * 2;\n}}\n\n"
                  for i in range(800))
LINE = "  const value400 = compute(req.body.items, 400);"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the sources tree-sitter parses from now on (its cache of trees emptied first)."""
    seen: list[int] = []
    real = symbols._parser

    class Counting:
        def __init__(self, lang: str) -> None:
            self.parser = real(lang)

        def parse(self, source: bytes) -> object:
            seen.append(len(source))
            return self.parser.parse(source)

    symbols._tree.cache_clear()
    monkeypatch.setattr(symbols, "_parser", Counting)
    return seen


def history_of(repo: Path, edits: list[tuple[str, str]]) -> str:
    """A 4,000-line TypeScript file with a one-line anchor, then one commit per edit; the id."""
    lines = LONG_TS.splitlines()
    (repo / "big.ts").write_text(LONG_TS)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    anchorfs.init(repo)
    with anchorfs.open(repo) as ws:
        memory = ws.record("value400 is computed from the items", anchors=[f"big.ts:{lines.index(LINE) + 1}"])
    for i in range(40):  # commits that do not touch the file
        (repo / "other.txt").write_text(f"{i}\n")
        git(repo, "add", "other.txt")
        git(repo, "commit", "-qm", f"other {i}")
    at = lines.index(LINE)
    for kind, message in edits:
        if kind == "above":
            lines.insert(10, f"// note {len(lines)}")
            at += 1
        elif kind == "below":
            lines.append(f"// tail {len(lines)}")
        elif kind == "change":
            lines[at] = LINE.replace("400);", "401);")
        elif kind == "re-lay":
            lines[at:at + 1] = ["  const value400 = compute(", "    req.body.items,", "    400", "  );"]
        (repo / "big.ts").write_text("\n".join(lines) + "\n")
        git(repo, "commit", "-qam", message)
    return memory.id


def test_a_walk_whose_text_never_could_match_parses_nothing(git_repo: Path, parses: list[int]) -> None:
    memory_id = history_of(git_repo, [("above", "a"), ("below", "b"), ("above", "c"), ("change", "the change"),
                                      ("below", "e"), ("above", "f")])
    parses.clear()  # the anchor's own parse at `record`
    with anchorfs.open(git_repo) as ws:
        result = ws.bisect(memory_id)
        assert result.culprit is not None and result.culprit.subject == "the change"
        assert len(ws.log(memory_id).steps) == 6
    assert parses == []  # the changed line's characters are nowhere: no token comparison is needed


def test_a_re_laid_line_is_parsed_once_per_version(git_repo: Path, parses: list[int]) -> None:
    memory_id = history_of(git_repo, [("above", "a"), ("re-lay", "the formatter"), ("below", "b"), ("above", "c")])
    symbols._tree.cache_clear()
    parses.clear()
    with anchorfs.open(git_repo) as ws:
        result = ws.bisect(memory_id)
        assert result.holds, result.describe()
        assert result.anchors[0].verdict.value == "reformatted"
        ws.log(memory_id)
        ws.bisect(memory_id)
    assert 1 <= len(parses) <= 3  # the three versions since the re-layout, each parsed at most once
