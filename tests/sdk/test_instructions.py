"""CLAUDE.md / AGENTS.md: claims parsed, imported (idempotent, changed text supersedes), exported
with freshness into a managed block (outside text byte-identical), verified without importing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import anchorfs
from anchorfs.agents.hosts import RULES_BEGIN, RULES_END
from anchorfs.sdk.instructions import EXPORT_BEGIN, EXPORT_END, parse_claims

TOKEN = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"

CLAUDE_MD = f"""---
title: not a claim
---
# Project

Intro: the issuer lives in `auth/token.py` and
signs with `TokenIssuer.issue`.

## Auth

- Tokens expire after 24 hours.
- [x] Sessions are kept in Redis,
  never in cookies.
* Retries use `auth/retry.py`.

```sh
make test   # not a claim
```

| table | not a claim |
|---|---|

<!-- a comment, not a claim -->
@docs/more.md

{RULES_BEGIN}
- managed instructions, not a claim
{RULES_END}

### Limits
1. Rate limit is 100 requests a minute.
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / "auth").mkdir(parents=True)
    (r / "auth" / "token.py").write_text(TOKEN)
    anchorfs.init(r)
    return r


def test_claims_are_bullets_and_paragraphs_under_their_headings() -> None:
    claims = parse_claims(CLAUDE_MD)
    assert [(c.text, c.headings) for c in claims] == [
        ("Intro: the issuer lives in `auth/token.py` and signs with `TokenIssuer.issue`.", ("Project",)),
        ("Tokens expire after 24 hours.", ("Project", "Auth")),
        ("Sessions are kept in Redis, never in cookies.", ("Project", "Auth")),
        ("Retries use `auth/retry.py`.", ("Project", "Auth")),
        ("Rate limit is 100 requests a minute.", ("Project", "Auth", "Limits")),
    ]
    assert [c.line for c in claims] == [6, 11, 12, 14, 31]


def test_import_tags_suggests_and_is_idempotent(root: Path) -> None:
    path = root / "CLAUDE.md"
    path.write_text(CLAUDE_MD)
    with anchorfs.open(root) as ws:
        r = ws.import_file(path)
        assert len(r.recorded) == 5 and not r.unchanged and not r.superseded
        intro = r.recorded[0]
        assert intro.tags == ("Project", "source:CLAUDE.md")
        assert r.recorded[1].tags == ("Project", "Auth", "source:CLAUDE.md")
        assert not intro.anchors  # suggested only
        assert r.suggestions == {intro.id: ["auth/token.py", "auth/token.py#TokenIssuer.issue"]}
        size = ws.ledger.size()
        again = ws.import_file(path)
        assert [m.id for m in again.unchanged] == [m.id for m in r.recorded]
        assert not again.recorded and not again.superseded
        assert ws.ledger.size() == size  # nothing written
        applied = ws.import_file(path, apply=True)
        assert applied.applied and set(applied.suggestions) == {intro.id}
        assert [a.spec for a in ws.get(intro.id).anchors] == ["auth/token.py", "auth/token.py#TokenIssuer.issue"]
        assert ws.import_file(path, apply=True).suggestions == {}  # anchored now: nothing more to suggest


def test_changed_text_under_the_same_heading_supersedes(root: Path) -> None:
    path = root / "AGENTS.md"
    path.write_text("# Auth\n\n- Tokens expire after 24 hours.\n- Keys rotate monthly.\n\n# Ops\n\n- Deploys on Fridays.\n")
    with anchorfs.open(root) as ws:
        first = {m.content: m for m in ws.import_file(path).recorded}
        path.write_text("# Auth\n\n- Tokens expire after 12 hours.\n- Keys rotate monthly.\n\n# Ops\n\n- Deploys on Fridays.\n"
                        "- Freeze in December.\n")
        r = ws.import_file(path)
        old = first["Tokens expire after 24 hours."]
        assert [(o, m.content) for o, m in r.superseded] == [(old.id, "Tokens expire after 12 hours.")]
        assert ws.get(old.id).status == "superseded"
        assert [m.content for m in r.recorded] == ["Freeze in December."]
        assert {m.content for m in r.unchanged} == {"Keys rotate monthly.", "Deploys on Fridays."}
        new = r.superseded[0][1]
        assert new.tags == ("Auth", "source:AGENTS.md") and new.supersedes == old.id


def test_round_trip_import_export_import(root: Path) -> None:
    path = root / "CLAUDE.md"
    path.write_text(CLAUDE_MD)
    with anchorfs.open(root) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        imported = ws.import_file(path).recorded
        res = ws.export_to(path)
        assert res.changed and res.memories == 6 and res.stale == 0
        text = path.read_text()
        assert text.startswith(CLAUDE_MD) and text.endswith(EXPORT_END + "\n")
        assert text[len(CLAUDE_MD):].startswith(EXPORT_BEGIN + "\n")  # outside the block: byte-identical
        assert "[fresh · anchored" in text and "token expiry is 24 hours" in text
        again = ws.import_file(path)
        assert not again.recorded and not again.superseded
        assert sorted(m.id for m in again.unchanged) == sorted(m.id for m in imported)
        assert not ws.export_to(path).changed  # nothing moved: the same bytes
        # the code moves: the export flags it stale, in place, the rest of the file untouched
        (root / "auth" / "token.py").write_text(TOKEN.replace("24", "12"))
        res = ws.export_to(path)
        assert res.changed and res.stale == 1
        text2 = path.read_text()
        assert text2.startswith(CLAUDE_MD) and text2.count(EXPORT_BEGIN) == 1
        block = text2[len(CLAUDE_MD):]
        assert block.index("### Stale") < block.index("[STALE · auth/token.py#TokenIssuer.issue changed")
        assert block.index("[STALE") < block.index("### Current")


def test_export_keeps_text_after_the_block_and_refuses_a_torn_block(root: Path) -> None:
    path = root / "AGENTS.md"
    with anchorfs.open(root) as ws:
        ws.record("we use pytest")
        ws.export_to(path)  # created
        body = path.read_text()
        assert body.startswith(EXPORT_BEGIN)
        path.write_text("# Notes\n" + body + "\ntrailing words\n")
        ws.record("we deploy with make")
        assert ws.export_to(path).changed
        text = path.read_text()
        assert text.startswith("# Notes\n" + EXPORT_BEGIN) and text.endswith(EXPORT_END + "\n\ntrailing words\n")
        assert "we deploy with make" in text
        path.write_text(f"intro\n{EXPORT_BEGIN}\n- half\n")
        with pytest.raises(anchorfs.InputError, match="has no"):
            ws.export_to(path)
        assert path.read_text() == f"intro\n{EXPORT_BEGIN}\n- half\n"


def test_export_shows_each_memory_as_the_pass_found_it_checking_none_again(
        root: Path, count_checks: Callable[[], list[str]]) -> None:
    """A moved file's memory is exported fresh with its new place named, as its own check
    says; no memory is checked again after the pass (at 10,000 memories, 10,000 checks)."""
    import os

    with anchorfs.open(root) as ws:
        moved = ws.record("the issuer signs users", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("we use pytest")
    os.rename(root / "auth" / "token.py", root / "auth" / "tokens.py")
    calls = count_checks()
    with anchorfs.open(root) as ws:
        ws.export_to(root / "AGENTS.md")
    line = next(x for x in (root / "AGENTS.md").read_text().splitlines() if f"(`{moved.id[:6]}" in x)
    assert line.startswith("- [fresh") and "now at auth/tokens.py" in line, line
    assert calls == [moved.id]  # the pass's own check of the moved file's memory, once


def test_verify_file_checks_claims_without_importing(root: Path) -> None:
    path = root / "CLAUDE.md"
    path.write_text("# Auth\n\n- The issuer is `auth/token.py`.\n- Retries live in auth/retry.py.\n- Plain prose.\n")
    with anchorfs.open(root) as ws:
        size = ws.ledger.size()
        report = ws.verify_file(path)
        d = report.to_dict()
        assert (d["checked"], d["stale"], d["fresh"], d["no_claims"]) == (2, 1, 1, 1)
        assert [(r["id"], r["verdict"]) for r in d["results"]] == [("CLAUDE.md:3", "fresh"), ("CLAUDE.md:4", "stale")]
        assert report.has_stale
        assert ws.ledger.size() == size and ws.list() == []


# -- the CLI door: `import`, `export --to`, `verify --file` -----------------------------------------

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", *args, "--root", str(root)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_import_export_verify_round_trip(root: Path) -> None:
    path = root / "CLAUDE.md"
    path.write_text(CLAUDE_MD)
    proc = cli(root, "import", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)["files"][0]
    assert first["file"] == "CLAUDE.md" and len(first["recorded"]) == 5 and first["applied"] is False
    proc = cli(root, "export", "--to", str(path))
    assert proc.returncode == 0 and proc.stdout == f"wrote 5 memories (0 stale) to {path}\n"
    assert path.read_text().startswith(CLAUDE_MD)
    proc = cli(root, "import", str(path))
    assert proc.returncode == 0 and proc.stdout.startswith("CLAUDE.md: 0 recorded, 5 unchanged, 0 superseded\n")
    assert "could anchor 1 memory (--apply takes these anchors)" in proc.stdout
    # verify --file: the claim on a path missing from an existing folder is stale -> exit 90
    proc = cli(root, "verify", "--file", str(path), "--json")
    assert proc.returncode == 90, proc.stderr
    d = json.loads(proc.stdout)
    assert d["stale"] == 1 and [r["id"] for r in d["results"] if r["verdict"] == "stale"] == ["CLAUDE.md:14"]
    missing = cli(root, "import", str(root / "nope.md"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "no file" in missing.stderr


def test_a_fifo_or_a_non_utf8_file_is_refused_in_one_line(root: Path) -> None:
    import os

    fifo = root / "CLAUDE.md"
    os.mkfifo(fifo)
    with anchorfs.open(root) as ws:
        with pytest.raises(anchorfs.InputError, match="not a regular file"):  # never hangs on the open
            ws.import_file(fifo)
        with pytest.raises(anchorfs.InputError, match="not a regular file"):
            ws.export_to(fifo)
        (root / "AGENTS.md").write_bytes(b"# Title\n\n- caf\xe9\n")
        with pytest.raises(anchorfs.InputError, match="not UTF-8"):
            ws.verify_file(root / "AGENTS.md")
        assert ws.list() == []


def test_a_persons_file_is_durable_before_the_rename(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export replaces a person's CLAUDE.md: its bytes are fsynced before the rename and the
    folder after it, so a crash leaves the old file or the new one, never an empty one."""
    import os

    path = root / "CLAUDE.md"
    path.write_text(CLAUDE_MD)
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        order.append("fsync folder" if os.path.samestat(st, os.stat(root)) else "fsync file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        if os.fspath(dst) == os.fspath(path):
            order.append("rename")
        real_replace(src, dst)

    with anchorfs.open(root) as ws:
        ws.record("token expiry is 24 hours")
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        order.clear()
        assert ws.export_to(path).changed
    mine = [step for step in order if step in ("fsync file", "rename", "fsync folder")]
    assert "rename" in mine
    at = mine.index("rename")
    assert "fsync file" in mine[:at] and "fsync folder" in mine[at + 1:]
    assert path.read_text().startswith(CLAUDE_MD)
