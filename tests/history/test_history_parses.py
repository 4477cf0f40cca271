"""Bisect at the cost of the history it reads (issue 37, item 10): a walk parses a version of a
file only where a token comparison can change the verdict, and each version at most once."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git
from hypothesis import given, settings
from hypothesis import strategies as st

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


_LINE = st.sampled_from(["a", "b", "-a", "+b", "", "x\r", "é", "\\ x", "@@ y", "a b c", "diff --git x",
                         "0" * 40 + "\x1fa line shaped like a commit's"])


@settings(max_examples=60, deadline=None)
@given(old=st.lists(_LINE, max_size=12), new=st.lists(_LINE, max_size=12), eol=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_a_diff_read_in_blocks_is_read_as_git_wrote_it(tmp_path_factory: pytest.TempPathFactory, old: list[str],
                                                       new: list[str], eol: bool, cuts: list[int]) -> None:
    """Records parsed whole, from blocks cut anywhere (a byte at a time too), give the hunks a
    plain reading of the diff gives: the same lines, bodies and no-op flags, wherever the blocks end."""
    from anchorfs.history.patch import _MAX_HUNK_LINES, _PatchParser

    d = tmp_path_factory.mktemp("diff")
    (d / "old").write_bytes(("\n".join(old) + ("\n" if old else "")).encode())
    (d / "new").write_bytes(("\n".join(new) + ("\n" if new and eol else "")).encode())
    import subprocess

    out = subprocess.run(["git", "diff", "--no-index", "-U0", "--no-color", "old", "new"], cwd=d,
                         capture_output=True).stdout
    lines = out.split(b"\n")
    expected = []  # (header numbers, -/+ lines) read plainly, line by line
    for line in lines:
        if line.startswith(b"@@ "):
            expected.append([line, []])
        elif expected and line[:1] in (b"-", b"+") and not line.startswith((b"--- ", b"+++ ")):
            expected[-1][1].append(line)
    head = b"0" * 40 + b"\x1fabc\x1f\x1f\x1f\x1f\x1fsubject\n"  # a record's line, as `git log` prints it
    stream = head + out + head.replace(b"0", b"1", 40)  # and the next record's
    ends = [i + 1 for i, byte in enumerate(stream) if byte == 10]
    for split in (range(len(stream)), ends[::2], ends[1::2],  # a byte at a time, two lines at a time,
                  sorted(c % (len(stream) + 1) for c in cuts)):  # or anywhere
        parser = _PatchParser()
        records = []
        for a, b in zip([0, *split], [*split, len(stream)]):
            records += parser.feed(stream[a:b])
        records += parser.finish()
        assert [r.commit for r in records] == ["0" * 40, "1" * 40] and not records[1].sections
        rec = records[0]
        got = [h for section in rec.sections for h in section]
        assert len(got) == len(expected)
        for h, (header, body) in zip(got, expected):
            olds = [x[1:] for x in body if x[:1] == b"-"]
            news = [x[1:] for x in body if x[:1] == b"+"]
            assert h.hunk.header == header.decode().split(" @@")[0] + " @@"
            assert h.body == b"\n".join(olds + news)
            assert h.noop == ([x.removesuffix(b"\r") for x in olds] == [x.removesuffix(b"\r") for x in news])
            assert h.hunk.lines[:_MAX_HUNK_LINES] == tuple(x.decode("utf-8", "replace") for x in body)
    parser = _PatchParser()  # git writes a record at a time: one is done as the next one comes
    assert parser.feed(head + out) == [] and [r.commit for r in parser.feed(stream[len(head + out):])] == ["0" * 40]


def test_a_stream_read_in_any_blocks_gives_the_same_records(tmp_path: Path) -> None:
    """`_read` joins a line's pieces however git's writes cut it (a one-line file of 300 KB too)."""
    import io
    import subprocess

    from anchorfs.history.patch import _read

    (tmp_path / "old").write_text("a\n" + "x" * 300_000 + "\nb\n")
    (tmp_path / "new").write_text("a\n" + "y" * 300_000 + "\nb\n")
    diff = subprocess.run(["git", "diff", "--no-index", "-U0", "old", "new"], cwd=tmp_path, capture_output=True).stdout
    out = b"0" * 40 + b"\x1fabc\x1f\x1f\x1f\x1f\x1fsubject\n" + diff

    class Proc:
        def __init__(self, size: int) -> None:
            data, self.stderr = io.BytesIO(out), None
            self.stdout = type("Pipe", (), {"read1": lambda _, n: data.read(min(n, size)), "close": lambda _: None})()

        def wait(self) -> int:
            return 0

    whole = [r.sections for r in _read(Proc(len(out)), "log")]
    assert whole and whole[0][0][0].body == b"x" * 300_000 + b"\n" + b"y" * 300_000
    for size in (1, 7, 4096, 1 << 16):
        assert [r.sections for r in _read(Proc(size), "log")] == whole
