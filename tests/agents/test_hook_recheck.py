"""The hooks' re-check without the workspace (`anchorfs.hook_recheck`), and their hook files read
through the one guarded open (`anchorfs.agents.hook_git._read`).

A drift change after an edit or a commit is written (`drift.json`, `events.jsonl`) and said from
the fold snapshot's records for the touched paths alone: no workspace, no LanceDB, no other
memory built. What it writes and says is what the workspace's path writes and says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TOKEN, git, shown

import anchorfs
from anchorfs.ledger import catchup
from anchorfs.core.errors import WorkspaceError
from anchorfs.agents.hook_git import install, install_sync, is_installed, uninstall, uninstall_sync


# One hook run as the host runs it, in a fresh interpreter: what it imported, and how many
# memories it built (`Memory.from_dict`), reported on stderr; the hook's own answer on stdout.
_PROBE = ("import io, json, sys\n"
          "import anchorfs.ledger.foldsnap as foldsnap\n"
          "foldsnap.MIN_LINES = 0  # a small ledger snapshotted too, as a large one is\n"
          "from anchorfs.core.model import Memory\n"
          "built = [0]\n"
          "real = Memory.from_dict.__func__\n"
          "def counting(cls, d):\n    built[0] += 1\n    return real(cls, d)\n"
          "Memory.from_dict = classmethod(counting)\n"
          "from anchorfs.__main__ import main\n"
          "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
          "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
          "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('lancedb', 'pyarrow', 'click'))\n"
          "sys.stderr.write(json.dumps({'built': built[0], 'workspace': 'anchorfs.sdk.workspace' in sys.modules,"
          " 'heavy': heavy}))\n")


def probe(repo: Path, stdin: str, *argv: str) -> tuple[str, dict[str, object]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, stdin, *argv], cwd=repo, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stderr.startswith("{"), proc.stderr
    report = json.loads(proc.stderr)
    assert isinstance(report, dict)
    return proc.stdout, report


def edit_json(repo: Path, path: Path) -> str:
    return json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(path)}, "tool_response": {"success": True}})


def settle() -> None:
    """Past the ledger's racy window, so the fold snapshot written a moment ago holds."""
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    (git_repo / "README.md").write_text("hello\n")
    (git_repo / "notes.txt").write_text("notes\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    return git_repo


def _many(repo: Path) -> list[str]:
    """Two memories on auth/token.py among 40 on other files; their ids."""
    with anchorfs.open(repo) as ws:
        ws.record_many([{"content": f"readme fact {i}", "anchors": ["README.md"]} for i in range(20)]
                       + [{"content": f"notes fact {i}", "anchors": ["notes.txt"]} for i in range(20)])
        issue = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        revoke = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
    return [issue.id, revoke.id]


def _events(repo: Path) -> list[dict[str, object]]:
    lines = (repo / ".anchorfs" / "events.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "at"} for line in lines]


def test_a_damaged_drift_file_or_no_snapshot_takes_the_workspaces_path(repo: Path) -> None:
    issue, _ = _many(repo)
    token = repo / "auth" / "token.py"
    settle()
    probe(repo, edit_json(repo, token), "hook", "post-edit")
    settle()
    (repo / ".anchorfs" / "drift.json").write_bytes(b'{"v": 1, "drift": {"x": [1]}}')
    token.write_text(TOKEN.replace("hours=24", "hours=1"))
    out, report = probe(repo, edit_json(repo, token), "hook", "post-edit")
    assert report["workspace"] is True and shown(repo, issue) in out  # never judged from a damaged file; the full path mends it
    assert json.loads((repo / ".anchorfs" / "drift.json").read_text())["drift"] == {issue: "stale"}


def test_post_edit_reads_any_json_the_standard_reader_takes(repo: Path) -> None:
    """The hook's stdin is read with the standard `json`: an integer past 64 bits (which orjson
    refuses) is no reason to go quiet."""
    issue, _ = _many(repo)
    token = repo / "auth" / "token.py"
    token.write_text(TOKEN.replace("hours=24", "hours=3"))
    payload = edit_json(repo, token)[:-1] + ', "n": 123456789012345678901234567890}'
    out, _ = probe(repo, payload, "hook", "post-edit")
    assert shown(repo, issue) in json.loads(out)["hookSpecificOutput"]["additionalContext"]


def test_a_span_moved_into_a_new_untracked_file_is_followed_by_the_post_edit_hook(repo: Path) -> None:
    """The hook lists the untracked files ahead of its move search (`moves.look_ahead`): lines cut
    from the anchored file into a file git does not know yet are `moved`, never said stale."""
    with anchorfs.open(repo) as ws:
        ws.record_many([{"content": f"readme fact {i}", "anchors": ["README.md"]} for i in range(20)])
        span = ws.record("issue signs for a day", anchors=["auth/token.py:2-3"])
    token = repo / "auth" / "token.py"
    settle()
    (repo / "auth" / "issue.py").write_text("# split out\nclass Issuing:\n" + "".join(TOKEN.splitlines(True)[1:3]))
    token.write_text(TOKEN.replace("".join(TOKEN.splitlines(True)[1:3]), ""))
    out, report = probe(repo, edit_json(repo, token), "hook", "post-edit")
    assert out == "" and report["workspace"] is True
    with anchorfs.open(repo) as ws:
        check = ws.check(ws.get(span.id)).checks[0]
    assert (check.verdict.value, check.path_now) == ("moved", "auth/issue.py")


def test_two_hooks_racing_on_one_edit_log_it_once(repo: Path) -> None:
    """Each judges the change again under the events lock: whichever comes second finds it
    recorded, says nothing and writes nothing."""
    issue, _ = _many(repo)
    token = repo / "auth" / "token.py"
    settle()
    probe(repo, edit_json(repo, token), "hook", "post-edit")
    settle()
    token.write_text(TOKEN.replace("hours=24", "hours=6"))
    procs = [subprocess.Popen([sys.executable, "-c", _PROBE, edit_json(repo, token), "hook", "post-edit"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert sorted(bool(out) for out, _ in outs) == [False, False, True]  # said by one of them
    assert [(e["id"], e["to"]) for e in _events(repo)] == [(issue, "stale")]


# -- hook files through the one guarded open ----------------------------------------------------

def test_a_hook_that_is_a_link_is_refused_never_written_through(repo: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared-post-commit"
    shared.write_text("#!/bin/sh\necho shared\n")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    link = hooks / "post-commit"
    link.symlink_to(shared)
    with pytest.raises(WorkspaceError) as err:
        install(repo)
    assert "symbolic link" in str(err.value) and "add this line to it yourself" in str(err.value)
    assert "\n" not in str(err.value)
    assert link.is_symlink() and shared.read_text() == "#!/bin/sh\necho shared\n"  # nothing written, either side
    assert not is_installed(repo)
    assert uninstall(repo) == (link, False) and link.is_symlink()
    # the sync hooks: a link is left alone, as a hook in another language is
    (hooks / "post-merge").symlink_to(shared)
    changed = install_sync(repo)
    assert hooks / "post-merge" not in changed and (hooks / "post-merge").is_symlink()
    assert hooks / "post-checkout" in changed
    assert hooks / "post-merge" not in uninstall_sync(repo) and (hooks / "post-merge").is_symlink()
    assert shared.read_text() == "#!/bin/sh\necho shared\n"


def test_a_hook_that_is_a_fifo_is_refused_not_read_forever(repo: Path) -> None:
    """A hooks folder in the worktree (`core.hooksPath`) can come with a clone: a FIFO (or a link
    to /dev/zero) there made `install` wait (or read) forever."""
    hooks = repo / ".githooks"
    hooks.mkdir()
    os.mkfifo(hooks / "post-commit")
    (hooks / "post-merge").symlink_to("/dev/zero")
    git(repo, "config", "core.hooksPath", ".githooks")
    code = ("import json, sys\nfrom pathlib import Path\nfrom anchorfs.agents.hook_git import install, install_sync\n"
            "try:\n    install(Path(sys.argv[1]))\n    said = ''\nexcept Exception as exc:\n    said = str(exc)\n"
            "print(json.dumps({'said': said, 'sync': [p.name for p in install_sync(Path(sys.argv[1]))]}))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, timeout=20,
                          check=False)
    report = json.loads(proc.stdout)
    assert "not a regular file" in report["said"] and "\n" not in report["said"]
    assert report["sync"] == ["post-checkout", "post-rewrite"]  # the link to /dev/zero left alone
    assert (hooks / "post-merge").is_symlink()
