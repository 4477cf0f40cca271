"""Reformatting is not a change (issue 18): same tokens, other bytes -> `reformatted`, fresh.

A narrowed anchor in a language with a grammar carries a token hash (the tree-sitter leaves'
types and texts and the nesting of named nodes, layout left out). gofmt-, black- and
prettier-style rewrites keep it; a changed token, a changed comment or a Python re-indent that
moves a statement into another block do not. `drift.whitespace = "strict"` keeps the byte rule.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.drift import DriftChecker
from anchorfs.core.errors import ConfigError
from anchorfs.core.model import Drift, Memory, Verdict

GO = """package calc

func Add(a int,b int) int {
return a+b
}

func Sub(a, b int) int {
\treturn a - b
}
"""
GO_FMT = """package calc

func Add(a int, b int) int {
\treturn a + b
}

func Sub(a, b int) int {
\treturn a - b
}
"""

PY = """def total(items, tax):
    return sum(price(i,
        tax) for i in items)


def price(item, tax):
    return item * (1 + tax)
"""
PY_BLACK = """def total(items, tax):
    return sum(price(i, tax) for i in items)


def price(item, tax):
    return item * (1 + tax)
"""

TS = """export function add(a: number, b: number): number { return a + b; }

export const two = 2;
"""
TS_PRETTIER = """export function add(
  a: number,
  b: number
): number {
  return a + b;
}

export const two = 2;
"""

BLOCKS = """def sync(items):
    for item in items:
        if item.dirty:
            item.save()
        item.release()
"""
REINDENTED = """def sync(items):
    for item in items:
        if item.dirty:
            item.save()
            item.release()
"""
SAME_BLOCKS_WIDER = """def sync(items):
  for item in items:
    if item.dirty:
      item.save()
    item.release()
"""


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for rel, text in files.items():
        (root / rel).write_text(text)
    anchorfs.init(root)
    return root


@pytest.mark.parametrize(("name", "before", "after", "spec"), [
    ("calc.go", GO, GO_FMT, "calc.go#Add"),
    ("calc.go", GO, GO_FMT, "calc.go:3-5"),
    ("tax.py", PY, PY_BLACK, "tax.py#total"),
    ("add.ts", TS, TS_PRETTIER, "add.ts#add"),
], ids=["gofmt-symbol", "gofmt-lines", "black-symbol", "prettier-symbol"])
def test_a_reformat_is_reformatted_and_fresh(tmp_path: Path, name: str, before: str, after: str, spec: str) -> None:
    root = workspace(tmp_path, {name: before})
    with anchorfs.open(root) as ws:
        m = ws.record("the anchored code adds prices up", anchors=[spec])
        assert m.anchors[0].token_hash is not None
        (root / name).write_text(after)
        md = ws.check(m)
        c = md.checks[0]
        assert (md.drift, c.verdict) == (Drift.FRESH, Verdict.REFORMATTED), c.detail
        assert c.detail.startswith(f"{spec} reformatted: same tokens, other layout")
        assert c.to_dict()["verdict"] == "reformatted"
        assert ws.drift().count(Drift.STALE) == 0
        hit = ws.query("anchored code adds prices", k=1)[0]
        assert hit.envelope.startswith("[fresh") and "reformatted" in hit.envelope, hit.envelope
        again = ws.reanchor(m.id)  # re-taken on the new bytes: fresh byte for byte again
        assert again.anchors[0].content_hash != m.anchors[0].content_hash
        assert ws.check(again).checks[0].verdict is Verdict.FRESH


def test_a_python_reindent_that_changes_the_block_structure_is_changed(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"sync.py": BLOCKS})
    with anchorfs.open(root) as ws:
        m = ws.record("every item is released", anchors=["sync.py#sync"])
        (root / "sync.py").write_text(REINDENTED)  # release() moved into the if: other meaning
        md = ws.check(m)
        assert (md.drift, md.checks[0].verdict) == (Drift.STALE, Verdict.CHANGED)
        assert md.checks[0].detail == "sync.py#sync changed"
        (root / "sync.py").write_text(SAME_BLOCKS_WIDER)  # 2-space indent, same blocks: layout only
        assert ws.check(m).checks[0].verdict is Verdict.REFORMATTED


def test_changed_tokens_and_comments_are_changes(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"calc.go": GO})
    with anchorfs.open(root) as ws:
        m = ws.record("Add adds", anchors=["calc.go#Add"])
        (root / "calc.go").write_text(GO_FMT.replace("a + b", "a + b + 0"))
        assert ws.check(m).checks[0].verdict is Verdict.CHANGED
        (root / "calc.go").write_text(GO_FMT.replace("\treturn a + b", "\t// sum\n\treturn a + b"))
        assert ws.check(m).checks[0].verdict is Verdict.CHANGED  # a comment is a token
        (root / "calc.go").write_text(GO_FMT.replace("a + b", "a  +  b"))
        assert ws.check(m).checks[0].verdict is Verdict.REFORMATTED


def test_strict_whitespace_keeps_the_byte_rule_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"calc.go": GO})
    (root / ".anchorfs.toml").write_text('[drift]\nwhitespace = "strict"\n')
    with anchorfs.open(root) as ws:
        m = ws.record("Add adds", anchors=["calc.go#Add"])
        (root / "calc.go").write_text(GO_FMT)
        md = ws.check(m)
        assert (md.drift, md.checks[0].verdict) == (Drift.STALE, Verdict.CHANGED)
        assert ws.drift().count(Drift.STALE) == 1
        # a checker made without the setting (as a query's is) reads it from the config
        assert DriftChecker(ws.root_real, ws.cache).check(m).checks[0].verdict is Verdict.CHANGED
        assert DriftChecker(ws.root_real, ws.cache, whitespace="tokens").check(m).checks[0].verdict is Verdict.REFORMATTED
    (root / ".anchorfs.toml").write_text('[drift]\nwhitespace = "loose"\n')
    with pytest.raises(ConfigError, match="drift.whitespace must be one of tokens, strict, got 'loose'"):
        anchorfs.open(root)


def test_an_anchor_without_a_token_hash_keeps_the_byte_rule(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"calc.go": GO, "notes.txt": "a\nb\n"})
    with anchorfs.open(root) as ws:
        m = ws.record("Add adds", anchors=["calc.go#Add"])
        old = Memory(id=m.id, content=m.content, anchors=(dataclasses.replace(m.anchors[0], token_hash=None),))
        (root / "calc.go").write_text(GO_FMT)
        assert ws.check(old).checks[0].verdict is Verdict.CHANGED  # recorded before token hashes
        assert ws.check(m).checks[0].verdict is Verdict.REFORMATTED
        text = ws.record("notes say a", anchors=["notes.txt:1"])  # no grammar: no token hash
        assert text.anchors[0].token_hash is None
        assert "token_hash" not in text.anchors[0].to_dict()  # nothing new stored for it


def test_the_cli_shows_reformatted_in_query_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = workspace(tmp_path, {"tax.py": PY})
    with anchorfs.open(root) as ws:
        ws.record("total sums the prices with tax", anchors=["tax.py#total"])
    (root / "tax.py").write_text(PY_BLACK)
    monkeypatch.chdir(root)
    out = CliRunner().invoke(cli, ["drift", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["stale"] == 0
    out = CliRunner().invoke(cli, ["query", "total prices tax", "--json"])
    hit = json.loads(out.output)["hits"][0]
    assert (hit["drift"], hit["anchors"][0]["verdict"]) == ("fresh", "reformatted")


def test_an_anchor_recorded_without_a_token_hash_in_git_reads_its_old_text_back(tmp_path: Path) -> None:
    from conftest import git

    root = workspace(tmp_path, {"calc.go": GO})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "calc.go")
    git(root, "commit", "-q", "-m", "calc")
    with anchorfs.open(root) as ws:
        m = ws.record("Add adds", anchors=["calc.go#Add", "calc.go:3-5"])
        assert all(a.commit and a.dirty is False for a in m.anchors)
        old = Memory(id=m.id, content=m.content,  # as an anchorfs before token hashes wrote it
                     anchors=tuple(dataclasses.replace(a, token_hash=None) for a in m.anchors))
        (root / "calc.go").write_text(GO_FMT)
        assert [c.verdict for c in ws.check(old).checks] == [Verdict.REFORMATTED, Verdict.REFORMATTED]
        (root / "calc.go").write_text(GO_FMT.replace("a + b", "b + a"))
        assert [c.verdict for c in ws.check(old).checks] == [Verdict.CHANGED, Verdict.CHANGED]
        dirty = Memory(id=m.id, content=m.content, anchors=(dataclasses.replace(old.anchors[0], dirty=True),))
        (root / "calc.go").write_text(GO_FMT)
        assert ws.check(dirty).checks[0].verdict is Verdict.CHANGED  # taken on uncommitted bytes: no text of then


def test_the_drift_text_names_only_the_anchors_that_are_not_fresh(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`anchorfs drift`'s "why" column filters by drift state, not by verdict names: a
    reformatted anchor (drift fresh, like moved) is not a reason a memory is stale."""
    root = workspace(tmp_path, {"calc.go": GO})
    with anchorfs.open(root) as ws:
        m = ws.record("Add and Sub are plain arithmetic", anchors=["calc.go#Add", "calc.go#Sub"])
    (root / "calc.go").write_text(GO_FMT.replace("return a - b", "return b - a"))
    with anchorfs.open(root) as ws:
        assert [c.verdict for c in ws.check(ws.get(m.id)).checks] == [Verdict.REFORMATTED, Verdict.CHANGED]
    monkeypatch.chdir(root)
    out = CliRunner().invoke(cli, ["drift"])
    assert out.exit_code == 90, out.output
    row = next(line for line in out.output.splitlines() if line.startswith(m.id[:6]))  # the id as shown
    assert "calc.go#Sub changed" in row and "reformatted" not in row and "calc.go#Add" not in row, out.output


# -- issue 37, item 5: a formatter that joins or splits lines -------------------------------------

def test_a_line_anchor_whose_lines_a_formatter_joined_is_reformatted(tmp_path: Path) -> None:
    import anchorfs

    (tmp_path / "calc.py").write_text("def total(a, b):\n    x = add(a,\n            b)\n    return x\n")
    anchorfs.init(tmp_path)
    with anchorfs.open(tmp_path) as ws:
        m = ws.record("total adds a and b", anchors=["calc.py:2-3"])
        (tmp_path / "calc.py").write_text("def total(a, b):\n    x = add(a, b)\n    return x\n")  # joined
        check = ws.check(m).checks[0]
        assert (check.verdict.value, check.lines_now) == ("reformatted", (2, 2))
        assert ws.check(m).drift.value == "fresh"
        (tmp_path / "calc.py").write_text("def total(a, b):\n    x = add(a,\n            b,\n            c)\n"
                                          "    return x\n")  # split, and a token more: a change
        assert ws.check(m).checks[0].verdict.value == "changed"
        (tmp_path / "calc.py").write_text("def total(a, b):\n    x = add(\n        a,\n        b\n    )\n"
                                          "    return x\n")  # split over more lines, same tokens
        check = ws.check(m).checks[0]
        assert (check.verdict.value, check.lines_now) == ("reformatted", (2, 5))


def test_a_whole_file_that_only_went_through_a_formatter_is_reformatted(tmp_path: Path) -> None:
    """A whole-file anchor, taken clean at a commit, in a language with a grammar: the same
    tokens in another layout is `reformatted` (its text of then read back from git); one token
    more is `changed`; outside git there is nothing to compare with: `changed`."""
    import anchorfs
    from conftest import git

    source = "def total(a, b):\n    x = add(a,\n            b)\n    return x\n"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(source)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    anchorfs.init(repo)
    with anchorfs.open(repo) as ws:
        m = ws.record("calc adds", anchors=["calc.py"])
        (repo / "calc.py").write_text("def total(a, b):\n    x = add(a, b)\n\n    return x\n")
        check = ws.check(m).checks[0]
        assert (check.verdict.value, check.detail) == ("reformatted", "calc.py reformatted: same tokens, other layout")
        assert ws.check(m).drift.value == "fresh"
        (repo / "calc.py").write_text("def total(a, b):\n    x = add(a, b, c)\n    return x\n")
        assert ws.check(m).checks[0].verdict.value == "changed"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text(source)
    anchorfs.init(plain)
    with anchorfs.open(plain) as ws:
        m = ws.record("calc adds", anchors=["calc.py"])
        (plain / "calc.py").write_text("def total(a, b):\n    x = add(a, b)\n    return x\n")
        assert ws.check(m).checks[0].verdict.value == "changed"
