"""What a hook pays at import: no dataclass it does not use is built, and the values made plain
classes for it (`catchup.Prefix`, `Follow`, `Folded`) behave as the frozen dataclasses did."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
import time
from pathlib import Path

import pytest
from conftest import git, hook_probe

import anchorfs
from anchorfs import catchup
from anchorfs.hashing import DEFAULT_GRANULARITY_NS

TOKEN = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"

@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    return git_repo


def test_a_hook_builds_no_dataclass_it_does_not_use(repo: Path) -> None:
    token = repo / "auth" / "token.py"
    edit = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(token)}})

    def run(stdin: str, *argv: str) -> tuple[str, dict[str, list[str]]]:
        return hook_probe(repo, stdin, *argv, count_dataclasses=True)

    time.sleep(catchup.FINE_NS / 1e9 + 0.05)
    run(edit, "hook", "post-edit")  # no snapshot yet: the workspace's path writes it
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    git(repo, "commit", "-qam", "expiry")  # no hook installed: run by hand below
    for stdin, argv, said in ((edit, ["hook", "post-edit"], "made 1 memory stale"),
                              ("", ["hook", "run", "--root", str(repo)], "")):
        out, report = run(stdin, *argv)
        assert said in out and "anchorfs.workspace" not in report["mods"], (argv, out, report)
        unused = {"Prefix", "Follow", "Folded", "Side", "Fork", "Hit"} & set(report["made"])
        assert unused == set(), (argv, report["made"])  # plain classes, or built only when asked for
        assert "anchorfs.forks" not in report["mods"] and "anchorfs.hits" not in report["mods"]
        assert "pathlib" not in report["all"], argv  # paths as str, git's included


def test_an_edit_keeping_its_memories_fresh_checks_them_without_openssl(repo: Path) -> None:
    """The symbol's span is hashed again (the file changed), with the interpreter's own SHA-256:
    OpenSSL's start-up (`hashlib`) is more than the whole check costs (issue 20)."""
    token = repo / "auth" / "token.py"
    edit = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(token)}})
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)
    hook_probe(repo, edit, "hook", "post-edit")  # no snapshot yet: the workspace's path writes it
    token.write_text(TOKEN + "# a trailing comment: the symbol is unchanged\n")
    time.sleep(DEFAULT_GRANULARITY_NS / 1e9 + 0.1)  # past the hash cache's racy window: the file's hash is kept
    out, report = hook_probe(repo, edit, "hook", "post-edit")  # the file hashed (OpenSSL's, a whole file) and cached
    assert out == "" and "anchorfs.workspace" not in report["mods"]
    out, report = hook_probe(repo, edit, "hook", "post-edit")  # the verdict kept by the last: nothing parsed
    assert out == "" and "anchorfs.workspace" not in report["mods"] and "anchorfs.symbols" not in report["mods"]
    assert {"hashlib", "_hashlib"} & set(report["all"]) == set()
    shutil.rmtree(repo / ".anchorfs" / "judged")  # judged again: the symbol's span hashed
    out, report = hook_probe(repo, edit, "hook", "post-edit")
    assert out == "" and "anchorfs.workspace" not in report["mods"] and "anchorfs.symbols" in report["mods"]
    assert {"hashlib", "_hashlib"} & set(report["all"]) == set()
    assert "pathlib" not in report["all"]  # paths as str: its import (urllib.parse, fnmatch) not paid
    assert "anchorfs.hook_git" not in report["mods"] and "anchorfs.hook" not in report["mods"]  # the agent half alone
    token.write_text(TOKEN.replace("hours=24", "hours=12") + "# a trailing comment: the symbol is unchanged\n")
    out, report = hook_probe(repo, edit, "hook", "post-edit")
    assert "made 1 memory stale" in out and "TokenIssuer.issue" in out  # the same judgement, by either hash
    time.sleep(DEFAULT_GRANULARITY_NS / 1e9 + 0.1)
    hook_probe(repo, edit, "hook", "post-edit")  # the edited file's hash kept
    out, report = hook_probe(repo, edit, "hook", "post-edit")  # still stale: its tokens hashed again, nothing to say
    assert out == "" and "anchorfs.workspace" not in report["mods"]
    assert {"hashlib", "_hashlib"} & set(report["all"]) == set()


def test_fork_side_and_hit_are_where_they_were() -> None:
    from anchorfs import forks, hits, ledger, model
    from anchorfs.ledger import Fork, Side
    from anchorfs.model import Hit

    assert (Fork, Side, Hit) == (forks.Fork, forks.Side, hits.Hit)
    assert ledger.Fork is Fork and model.Hit is Hit
    with pytest.raises(AttributeError):
        getattr(ledger, "Nothing")  # noqa: B009 - the module's own error for a name it lacks
    with pytest.raises(ImportError):
        from anchorfs.model import Nothing  # type: ignore[attr-defined]  # noqa: F401


def test_catchup_values_behave_as_frozen_dataclasses() -> None:
    p = catchup.Prefix(10, b"b" * 32, b"d" * 32, b"t" * 32, (1, 2, 10, 4, 5), 99)
    same = catchup.Prefix(offset=10, base=b"b" * 32, digest=b"d" * 32, tail=b"t" * 32, stat=(1, 2, 10, 4, 5),
                          seen_ns=99)
    assert p == same and hash(p) == hash(same) and p != catchup.Prefix(11, p.base, p.digest, p.tail, p.stat, 99)
    assert p != (10, p.base) and {p: 1}[same] == 1
    assert repr(p).startswith("Prefix(offset=10, base=b'bbbb")
    with pytest.raises(AttributeError):
        p.offset = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.seen_ns  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(p)) == p and copy.copy(p) == p and copy.deepcopy(p) == p
    assert catchup.Prefix.from_dict(p.to_dict(), 99) == p
    f = catchup.Follow("same", p, [])
    assert f.skipped == 0 and f == catchup.Follow("same", p, [], 0) and f.kind == "same"
    folded = catchup.Folded(p, {})
    assert folded.saved is None and folded == catchup.Folded(prefix=p, state={}, saved=None)
    with pytest.raises(TypeError):
        hash(folded)  # its state is a dict, as the dataclass's was
    with pytest.raises(AttributeError):
        folded.saved = 1  # type: ignore[misc]


def test_a_workspace_with_a_config_file_runs_its_hooks_without_tomllib(repo: Path) -> None:
    """`.anchorfs.toml` is parsed once per content and kept (`config.PARSED_FILE`): tomllib's
    import, with `typing` and `datetime`, is about 32M instructions, most of a `python3 -c pass`
    again in every hook of a workspace that has a config file (issue 20)."""
    (repo / ".anchorfs.toml").write_text("[drift]\nstale_factor = 0.6\n")
    token = repo / "auth" / "token.py"
    edit = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(token)}})
    token.write_text(TOKEN + "# a trailing comment: the symbol is unchanged\n")
    out, report = hook_probe(repo, edit, "hook", "post-edit")  # the config parsed by tomllib, and kept
    assert out == "" and "tomllib" in report["all"]
    out, report = hook_probe(repo, edit, "hook", "post-edit")
    assert out == "" and "anchorfs.config" in report["mods"] and "tomllib" not in report["all"]
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    out, report = hook_probe(repo, edit, "hook", "post-edit")
    assert "made 1 memory stale" in out and "tomllib" not in report["all"]
    (repo / ".anchorfs.toml").write_text("[drift]\nstale_factor = 0.5\n")  # new bytes: parsed again
    out, report = hook_probe(repo, edit, "hook", "post-edit")
    assert "tomllib" in report["all"]
