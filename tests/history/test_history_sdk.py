"""History through the SDK and CLI: bisect / log / at, and envelopes that name commits."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import anchorfs
from anchorfs.cli.commands import cli
from conftest import git

TOKEN = "import jwt\n\nEXPIRY_HOURS = 24\n\n\ndef issue(user):\n    return jwt.encode(user)\n"


def build(git_repo: Path) -> tuple[Path, str, str]:
    (git_repo / "token.py").write_text(TOKEN)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "token module", env={"GIT_AUTHOR_DATE": "2026-08-23T10:00:00Z",
                                                        "GIT_COMMITTER_DATE": "2026-08-23T10:00:00Z"})
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        expiry = ws.record("token expiry is 24h", anchors=["token.py:3"]).id
        issue = ws.record("issue encodes a JWT", anchors=["token.py#issue"]).id
    (git_repo / "token.py").write_text(TOKEN.replace("24", "168"))
    git(git_repo, "commit", "-qam", "raise token expiry", env={"GIT_AUTHOR_DATE": "2026-09-02T10:00:00Z",
                                                               "GIT_COMMITTER_DATE": "2026-09-02T10:00:00Z"})
    return git_repo, expiry, issue


def test_envelopes_name_commits(git_repo: Path) -> None:
    root, expiry, issue = build(git_repo)
    culprit = git(root, "rev-parse", "--short=7", "HEAD").strip()
    base = git(root, "rev-parse", "--short=7", "HEAD~1").strip()
    with anchorfs.open(root) as ws:
        hits = {h.memory.id: h for h in ws.query("token expiry issue JWT", k=5)}
    # one envelope format with or without git; git names the commits
    today = hits[issue].memory.recorded_at.date().isoformat()  # when the anchor was taken, in every surface
    assert hits[expiry].envelope.startswith(
        f'[STALE · token.py:3 changed · anchored {today} at {base} · changed in {culprit} 2026-09-02 "raise token expiry"')
    assert hits[expiry].envelope.endswith(" — re-verify before relying on this]")
    assert hits[issue].envelope.startswith(f"[fresh · anchored {today} at {base} · 1 commit since")


def test_envelope_history_can_be_turned_off(git_repo: Path, monkeypatch: object) -> None:
    root, expiry, _ = build(git_repo)
    (root / ".anchorfs.toml").write_text("[history]\nenvelope = false\n")
    with anchorfs.open(root) as ws:
        hit = next(h for h in ws.query("token expiry", k=5) if h.memory.id == expiry)
    assert hit.envelope.startswith("[STALE · token.py:3 changed · anchored ")


def test_cli_bisect_log_at(git_repo: Path) -> None:
    root, expiry, issue = build(git_repo)
    runner = CliRunner()
    r = runner.invoke(cli, ["--root", str(root), "bisect", expiry, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["id"] == expiry
    assert d["culprit"]["subject"] == "raise token expiry"
    assert d["culprit"]["cause"] == "changed"
    assert {"commit", "short", "date", "author", "subject", "cause", "hunk"} <= set(d["culprit"])
    assert "+EXPIRY_HOURS = 168" in d["culprit"]["hunk"]["text"]
    r = runner.invoke(cli, ["--root", str(root), "bisect", issue, "--json"])
    assert json.loads(r.output)["culprit"] is None
    r = runner.invoke(cli, ["--root", str(root), "log", issue, "--json"])
    steps = json.loads(r.output)["steps"]
    assert [s["subject"] for s in steps] == ["raise token expiry"]  # touched, not broken
    r = runner.invoke(cli, ["--root", str(root), "at", "HEAD~1", "--json"])
    assert {m["id"]: m["drift"] for m in json.loads(r.output)["memories"]} == {expiry: "fresh", issue: "fresh"}
    r = runner.invoke(cli, ["--root", str(root), "at", "HEAD", "--json"])
    assert {m["id"]: m["drift"] for m in json.loads(r.output)["memories"]} == {expiry: "stale", issue: "fresh"}
    r = runner.invoke(cli, ["--root", str(root), "at", "no-such-rev"])
    assert r.exit_code == 1


def test_cli_at_a_revision_with_spaces_is_one_line(git_repo: Path, capsys: object) -> None:
    import pytest

    from anchorfs.cli.commands import main

    root, _, _ = build(git_repo)
    for rev in ("HEAD x", "HEAD:token.py"):
        with pytest.raises(SystemExit) as exited:
            main(["--root", str(root), "at", rev])
        assert exited.value.code == 1
        err = capsys.readouterr().err  # type: ignore[attr-defined]
        assert err == f"anchorfs: error: unknown revision {rev!r}\n"


def test_sdk_history_follows_a_rename_and_names_the_edit_after_it(git_repo: Path) -> None:
    root, _, issue = build(git_repo)
    git(root, "mv", "token.py", "tokens.py")
    git(root, "commit", "-qm", "rename token to tokens")
    renamed = git(root, "rev-parse", "--short=7", "HEAD").strip()
    with anchorfs.open(root) as ws:
        result = ws.bisect(issue)
        assert result.holds and result.anchors[0].path_now == "tokens.py"
        step = ws.log(issue).steps[-1]
        assert step.short == renamed and step.verdict.value == "moved" and step.path_now == "tokens.py"
        at = ws.at("HEAD").to_dict()
        row = next(m for m in at["memories"] if m["id"] == issue)
        assert row["drift"] == "fresh" and row["anchors"][0]["path_now"] == "tokens.py"
    (root / "tokens.py").write_text(TOKEN.replace("24", "168").replace("jwt.encode(user)", "jwt.encode(user, KEY)"))
    git(root, "commit", "-qam", "sign with the key")
    edit = git(root, "rev-parse", "--short=7", "HEAD").strip()
    with anchorfs.open(root) as ws:
        culprit = ws.bisect(issue).culprit
        assert culprit is not None and culprit.short == edit and culprit.path == "tokens.py"
        hit = next(h for h in ws.query("issue encodes a JWT", k=5) if h.memory.id == issue)
        assert hit.drift.value == "stale"
        assert edit in hit.envelope and renamed not in hit.envelope  # the edit broke it, not the rename
