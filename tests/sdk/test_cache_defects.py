"""The derived files of `.anchorfs/` never change an answer (issue 36): each case here was
seen on an earlier main, tried as an attacker or as a user whose machine lost power."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import anchorfs
from conftest import git

CONF = "A = 1\nTIMEOUT = 30\nB = 2\n"


def _anchored(tmp_path: Path) -> tuple[Path, str]:
    """A git workspace with one memory anchored to conf.py's TIMEOUT line, then made stale."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "conf.py").write_text(CONF)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        mid = ws.record("TIMEOUT is 30 seconds", anchors=["conf.py:2"]).id
    (root / "conf.py").write_text(CONF.replace("30", "60"))
    return root, mid


def _cli(root: Path, *args: str, limit_as: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=120, check=False, preexec_fn=limit)


def test_a_committed_parsed_config_never_overrides_the_toml(tmp_path: Path) -> None:
    """A teammate's force-added `.anchorfs/config.parsed` whose digest matches the committed
    `.anchorfs.toml` cut the victim's digest to 100 characters and stopped stale demotion."""
    root, _ = _anchored(tmp_path)
    toml = b"[drift]\nstale_factor = 0.5\n"
    (root / ".anchorfs.toml").write_bytes(toml)
    planted = {"v": 1, "sha256": hashlib.sha256(toml).hexdigest(),
               "data": {"drift": {"stale_factor": 1.0}, "hook": {"digest_chars": 100}}}
    (root / ".anchorfs" / "config.parsed").write_text(json.dumps(planted))
    with anchorfs.open(root) as ws:
        assert ws.config["drift.stale_factor"] == 0.5
        assert ws.config["hook.digest_chars"] == 2000
        hits = ws.query("TIMEOUT seconds")
    assert hits[0].drift.value == "stale" and hits[0].score < hits[0].relevance


@pytest.mark.parametrize("damage", [b"", b"{", b'{"v": 1, "drift": {}}', b"\0" * 64])
def test_a_damaged_last_drift_never_shows_stale_as_fresh(tmp_path: Path, damage: bytes) -> None:
    """An empty or damaged `drift.json` (a power cut: it was not fsynced) showed a stale
    memory as fresh in `list` and left `list --drift stale` empty."""
    root, mid = _anchored(tmp_path)
    with anchorfs.open(root) as ws:
        assert ws.drift().stale  # the pass wrote its record
    (root / ".anchorfs" / "drift.json").write_bytes(damage)
    with anchorfs.open(root) as ws:
        assert [m.id for m in ws.list(drift="stale")] == [mid]
        assert ws.list(drift="fresh") == []
    listed = _cli(root, "--json", "list")
    assert listed.returncode == 0, listed.stderr
    assert [m["drift"] for m in json.loads(listed.stdout)["memories"]] == ["stale"]
    only = _cli(root, "--json", "list", "--drift", "stale")
    assert [m["id"] for m in json.loads(only.stdout)["memories"]] == [mid]


def test_a_memory_never_checked_is_not_listed_fresh(tmp_path: Path) -> None:
    """No record at all (a fresh clone of a shared ledger) means check now, never fresh."""
    root, mid = _anchored(tmp_path)
    drift_json = root / ".anchorfs" / "drift.json"
    if drift_json.exists():
        drift_json.unlink()
    with anchorfs.open(root) as ws:
        assert [m.id for m in ws.list(drift="stale")] == [mid]


def test_a_verdict_is_never_kept_across_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                no_racy_window: None) -> None:
    """A narrowed anchor's verdict against a file changed elsewhere was kept in `judged/`,
    keyed by the file's bytes only: an upgrade whose rules judge the same bytes otherwise
    kept serving the old verdict. Here the 'new version' judges every narrowed anchor changed."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "conf.py").write_text(CONF)
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("TIMEOUT is 30 seconds", anchors=["conf.py:2"])
    (root / "conf.py").write_text(CONF + "C = 3\n")  # changed elsewhere: the line itself is intact
    with anchorfs.open(root) as ws:
        assert ws.drift().memories[0].drift.value == "fresh"
    import anchorfs.drift.check as check
    from anchorfs.core.model import Verdict

    def stricter(ref: object, data: bytes, *, strict: bool = False) -> tuple[Verdict, str, None]:
        return Verdict.CHANGED, "judged changed by a later version's rule", None

    monkeypatch.setattr(check, "judge", stricter)
    with anchorfs.open(root) as ws:
        assert ws.drift().memories[0].drift.value == "stale"


HUGE = 4 << 30


@pytest.mark.parametrize("name", ["manifest.json", "drift.json", "applied", "fold.snap", "events.jsonl"])
def test_a_huge_state_file_is_a_cold_cache(tmp_path: Path, name: str) -> None:
    """A 4 GiB state file (zeros pack to a few MB in a commit) ended `drift`, `query`, `list`
    and `record` in a MemoryError traceback: each is read with a size bound."""
    root, mid = _anchored(tmp_path)
    with open(root / ".anchorfs" / name, "wb") as fh:
        fh.truncate(HUGE)  # sparse: no disk, the same size to a reader
    limit = 3 << 30  # a whole read of the file cannot fit
    for args, code in ((("drift",), 90), (("list",), 0), (("query", "TIMEOUT"), 0), (("record", "another note"), 0)):
        done = _cli(root, *args, limit_as=limit)
        assert done.returncode == code, (args, done.stderr)
        assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
        assert len(done.stderr.strip().splitlines()) <= 1, done.stderr
    assert mid in _cli(root, "--json", "list").stdout
    assert os.path.getsize(root / ".anchorfs" / "ledger.jsonl") > 0
