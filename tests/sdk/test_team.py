"""Team memory through git (issue 21): real clones of a real bare remote, real merges and rebases.

Each test drives two clones (two authors) that record, supersede and retract, commit the
ledger, pull (merge or rebase) and push; after every git step the store must be exactly the
fold of the ledger as it is, and at the end both clones fold to the same state.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import anchorfs
from anchorfs.sdk import team
from anchorfs.cli.commands import cli
from anchorfs.agents.hook_git import install_sync
from anchorfs.ledger.log import Ledger, fold
from anchorfs.sdk.workspace import Workspace

from conftest import git

LEDGER = ".anchorfs/ledger.jsonl"


def _git(cwd: Path, *args: str, who: str = "alice") -> str:
    return git(cwd, *args, env={"GIT_AUTHOR_NAME": who, "GIT_COMMITTER_NAME": who,
                                "GIT_AUTHOR_EMAIL": f"{who}@example.com", "GIT_COMMITTER_EMAIL": f"{who}@example.com"})


def _anchorfs(*args: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "anchorfs", *args], capture_output=True, text=True)


def _state(root: Path) -> dict[str, dict]:
    """The fold of the ledger as it is on disk, read afresh."""
    return {i: m.to_dict() for i, m in fold(Ledger(root / ".anchorfs").read()).items()}


def _store(ws: Workspace) -> dict[str, dict]:
    return {i: orjson.loads(d) for i, d in ws.store.docs().items() if d is not None}


def _check(ws: Workspace) -> dict[str, dict]:
    """The store, caught up, is the fold; so is the in-process fold. Returns the fold."""
    state = _state(ws.root)
    assert _store(ws) == state
    assert {i: m.to_dict() for i, m in ws._memories().items()} == state
    return state


class Clone:
    def __init__(self, root: Path, who: str) -> None:
        self.root, self.who = root, who
        self.ws = anchorfs.open(root)

    def git(self, *args: str) -> str:
        return _git(self.root, *args, who=self.who)

    def commit(self, msg: str) -> None:
        self.git("add", LEDGER)
        if self.git("status", "--porcelain", "--", LEDGER).strip():
            self.git("commit", "-q", "-m", msg, "--", LEDGER)

    def pull(self, rebase: bool) -> None:
        self.git("pull", "-q", "--rebase" if rebase else "--no-rebase", "origin", "main")
        assert "<<<<<<<" not in (self.root / LEDGER).read_text()
        _check(self.ws)

    def push(self) -> None:
        self.git("push", "-q", "origin", "main")


def _remote(tmp_path: Path, *, union_for_bob: bool = False) -> tuple[Clone, Clone]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = tmp_path / "alice"
    _git(tmp_path, "clone", "-q", str(remote), str(a))
    (a / "app.py").write_text("def handler():\n    return 8080\n")
    anchorfs.init(a)
    team.set_mode(a, True)
    _git(a, "add", "-A")
    _git(a, "commit", "-q", "-m", "anchorfs shared")
    _git(a, "push", "-q", "origin", "HEAD:main")
    b = tmp_path / "bob"
    _git(tmp_path, "clone", "-q", str(remote), str(b), who="bob")
    anchorfs.init(b)
    if not union_for_bob:  # else a clone where anchorfs never touched git: the committed union only
        team.install_merge(b)
    return Clone(a, "alice"), Clone(b, "bob")


def _scenario(alice: Clone, bob: Clone, rebase: tuple[bool, bool, bool]) -> tuple[set[str], set[str]]:
    """Both record, supersede and retract concurrently, in three rounds of pull and push."""
    acked: set[str] = set()
    m1 = alice.ws.record("the service port is 8080", anchors=["app.py#handler"], author="alice")
    m2 = alice.ws.record("retries back off exponentially", author="alice")
    acked |= {m1.id, m2.id}
    alice.commit("alice: two memories")
    alice.push()
    bob.pull(rebase[0])
    assert {m1.id, m2.id} <= set(_store(bob.ws))
    # round 2: both correct m1 (a fork), bob retracts m2 while alice supersedes it (a fork)
    a1 = alice.ws.supersede(m1.id, "the service port is 9090", author="alice")
    a2 = alice.ws.supersede(m2.id, "retries back off linearly", author="alice")
    a3 = alice.ws.record("alice's own note", author="alice")
    b1 = bob.ws.supersede(m1.id, "the service port is 443", author="bob")
    bob.ws.retract(m2.id, reason="no retries any more")
    b3 = bob.ws.record("bob's own note", author="bob")
    acked |= {a1.id, a2.id, a3.id, b1.id, b3.id}
    alice.commit("alice: corrections")
    bob.commit("bob: corrections")
    alice.push()
    bob.pull(rebase[1])
    bob.push()
    alice.pull(rebase[2])
    # round 3: more on both sides after the merge, then one more exchange
    a4 = alice.ws.record("alice after the merge", author="alice")
    b4 = bob.ws.record("bob after the merge", author="bob")
    acked |= {a4.id, b4.id}
    alice.commit("alice: more")
    bob.commit("bob: more")
    bob.pull(rebase[0])
    bob.push()
    alice.pull(rebase[1])
    alice.push()
    bob.pull(rebase[2])
    return acked, {m1.id, m2.id}


@pytest.mark.parametrize("rebase", [(False, False, False), (True, True, True), (False, True, False), (True, False, True)])
def test_two_clones_merge_and_rebase_to_one_state_with_every_fork_listed(tmp_path: Path, rebase: tuple[bool, bool, bool]) -> None:
    alice, bob = _remote(tmp_path)
    acked, forked = _scenario(alice, bob, rebase)
    sa, sb = _check(alice.ws), _check(bob.ws)
    assert sa == sb
    assert acked <= set(sa)
    lines = [orjson.loads(x) for x in (alice.root / LEDGER).read_bytes().splitlines()]
    assert len({x["tx"] for x in lines}) == len(lines)  # every entry once
    forks = {f.memory.id: f for f in alice.ws.conflicts()}
    assert set(forks) == forked
    assert {f.memory.id for f in bob.ws.conflicts()} == forked
    port = forks[sorted(forked, key=lambda i: sa[i]["content"])[1]]  # "the service port is 8080"
    assert sorted(s.memory.content for s in port.sides) == ["the service port is 443", "the service port is 9090"]
    assert sorted(str(s.memory.author) for s in port.sides) == ["alice", "bob"]
    retry = forks[next(i for i in forked if sa[i]["content"].startswith("retries"))]
    assert sorted(s.memory.status for s in retry.sides) == ["active", "retracted"]


@pytest.mark.parametrize("rebase", [(False, False, False), (True, True, False)])
def test_a_clone_without_the_driver_merges_by_union_and_folds_the_same(tmp_path: Path, rebase: tuple[bool, bool, bool]) -> None:
    alice, bob = _remote(tmp_path, union_for_bob=True)
    assert "anchorfs" not in _git(bob.root, "config", "--local", "--list")
    assert not (bob.root / ".git" / "info" / "attributes").exists()
    assert _git(bob.root, "check-attr", "merge", "--", LEDGER).split()[-1] == "union"  # git's own, by the commit
    acked, forked = _scenario(alice, bob, rebase)
    sa, sb = _check(alice.ws), _check(bob.ws)
    assert sa == sb and acked <= set(sa)
    assert {f.memory.id for f in bob.ws.conflicts()} == forked == {f.memory.id for f in alice.ws.conflicts()}
    # a fresh process on the union clone reads the same
    with anchorfs.open(bob.root) as again:
        assert {i: m.to_dict() for i, m in again._memories().items()} == sa


def test_query_flags_a_fork_and_one_supersede_over_it_resolves_it(tmp_path: Path) -> None:
    alice, bob = _remote(tmp_path)
    m = alice.ws.record("the service port is 8080", author="alice")
    alice.commit("m")
    alice.push()
    bob.pull(False)
    a = alice.ws.supersede(m.id, "the service port is 9090", author="alice")
    b = bob.ws.supersede(m.id, "the service port is 443", author="bob")
    alice.commit("a")
    alice.push()
    bob.commit("b")
    bob.pull(False)
    hits = {h.memory.id: h for h in bob.ws.query("service port", k=5)}
    assert hits[a.id].conflict == (b.id,) and hits[b.id].conflict == (a.id,)
    assert "in conflict with" in hits[a.id].envelope and "443" in hits[a.id].envelope
    assert hits[a.id].to_dict()["conflict"] == [b.id]
    block = bob.ws.context("what is the service port").markdown
    assert "in conflict with" in block and "9090" in block and "443" in block
    out = CliRunner().invoke(cli, ["--root", str(bob.root), "--json", "conflicts"])
    assert out.exit_code == 0, out.output
    sides = orjson.loads(out.stdout)["conflicts"][0]["sides"]
    assert {(s["id"], s["content"], s["author"]) for s in sides} == {
        (a.id, "the service port is 9090", "alice"), (b.id, "the service port is 443", "bob")}
    text = CliRunner().invoke(cli, ["--root", str(bob.root), "conflicts"]).output
    assert "alice" in text and "bob" in text and "9090" in text and "443" in text
    # no automatic winner: both are active until someone decides
    assert {bob.ws.get(a.id).status, bob.ws.get(b.id).status} == {"active"}
    c = bob.ws.supersede(b.id, "the service port is 443 behind TLS", author="bob")
    assert bob.ws.conflicts() == []
    assert bob.ws.get(a.id).status == bob.ws.get(b.id).status == "superseded"
    assert [h.memory.id for h in bob.ws.query("service port", k=5)] == [c.id]
    assert _check(bob.ws)
    bob.commit("resolved")
    bob.push()
    alice.pull(True)
    assert alice.ws.conflicts() == [] and alice.ws.get(a.id).status == "superseded"


def test_a_retract_of_one_side_resolves_a_fork(tmp_path: Path) -> None:
    alice, bob = _remote(tmp_path)
    m = alice.ws.record("cache is lru", author="alice")
    alice.commit("m")
    alice.push()
    bob.pull(False)
    a = alice.ws.supersede(m.id, "cache is lfu", author="alice")
    bob.ws.retract(m.id, reason="no cache")
    alice.commit("a")
    alice.push()
    bob.commit("b")
    bob.pull(True)
    assert [f.memory.id for f in bob.ws.conflicts()] == [m.id]
    bob.ws.retract(a.id, reason="agreed: no cache")
    assert bob.ws.conflicts() == []
    _check(bob.ws)


def test_checkout_of_a_shorter_ledger_and_back_no_ghosts_nothing_lost_no_reindex(tmp_path: Path) -> None:
    alice, _ = _remote(tmp_path)
    ws = alice.ws
    base = ws.record("on main: tokens last 24h")
    alice.commit("main memory")
    alice.git("checkout", "-q", "-b", "feature")
    feat = [ws.record(f"on feature: note {i}") for i in range(3)]
    alice.commit("feature memories")
    _check(ws)
    embedded: list[str] = []
    real = ws.embedder.embed_documents

    def counting(texts: Sequence[str]) -> Any:
        embedded.extend(texts)
        return real(texts)

    ws.embedder.embed_documents = counting  # type: ignore[method-assign]
    alice.git("checkout", "-q", "main")
    assert set(_check(ws)) == {base.id}
    assert [h.memory.id for h in ws.query("note", k=10)] == [base.id] or all(
        h.memory.id == base.id for h in ws.query("note", k=10))
    assert [m.id for m in ws.list()] == [base.id]
    alice.git("checkout", "-q", "feature")
    assert set(_check(ws)) == {base.id, *(m.id for m in feat)}
    assert {h.memory.id for h in ws.query("on feature note", k=10)} >= {m.id for m in feat}
    # no reindex: the checkout cost the difference (the feature's rows back), main's memory untouched
    assert sorted(t for t in embedded if t.startswith("on ") and t != "on feature note") == [m.content for m in feat]


def test_git_hooks_make_the_store_follow_eagerly(tmp_path: Path) -> None:
    alice, _ = _remote(tmp_path)
    install_sync(alice.root)
    for name in ("post-checkout", "post-merge", "post-rewrite"):
        text = (alice.root / ".git" / "hooks" / name).read_text()
        assert "anchorfs.agents.hook_git sync --root" in text and os.access(alice.root / ".git" / "hooks" / name, os.X_OK)
    alice.ws.record("on main")
    alice.commit("main")
    alice.git("checkout", "-q", "-b", "feature")
    f = alice.ws.record("on feature")
    alice.commit("feature")
    alice.git("checkout", "-q", "main")  # the hook runs `sync` in its own process
    other = Workspace(alice.root)
    assert f.id not in {i for i, d in other.store.docs().items()}  # caught up already: settled on one lstat
    assert install_sync(alice.root) == []  # idempotent


def test_merge_ledger_unions_by_entry_id_in_one_order(tmp_path: Path) -> None:
    alice, bob = _remote(tmp_path)
    alice.ws.record("common")
    base = (alice.root / LEDGER).read_bytes()
    alice.ws.record("ours")
    ours = (alice.root / LEDGER).read_bytes()
    (alice.root / LEDGER).write_bytes(base)
    with anchorfs.open(alice.root) as other:
        other.record("theirs")
    theirs = (alice.root / LEDGER).read_bytes()
    paths = {}
    for name, data in (("O", base), ("A", ours), ("B", theirs)):
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    swapped = tmp_path / "A2"
    swapped.write_bytes(theirs)
    out = CliRunner().invoke(cli, ["merge-ledger", str(paths["O"]), str(paths["A"]), str(paths["B"])])
    assert out.exit_code == 0, out.output
    assert team.merge_ledger(paths["O"], swapped, paths["A"]) == 0
    assert paths["A"].read_bytes() == swapped.read_bytes()  # one canonical order, whichever side is ours
    lines = paths["A"].read_bytes().splitlines()
    assert len(lines) == 3 and sorted(lines) == sorted(set(base.splitlines() + ours.splitlines() + theirs.splitlines()))


def test_private_ledger_on_another_branch_reads_unknown_naming_the_branch(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "a.py").write_text("x = 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    anchorfs.init(root)
    team.set_mode(root, False)
    assert team.mode(root) == "private"
    assert _git(root, "status", "--porcelain") == ""  # the whole state folder is ignored
    _git(root, "checkout", "-q", "-b", "feature")
    (root / "only_here.py").write_text("def f():\n    return 1\n")
    _git(root, "add", "only_here.py")
    _git(root, "commit", "-q", "-m", "feature file")
    with anchorfs.open(root) as ws:
        m = ws.record("f returns one", anchors=["only_here.py#f"])
        _git(root, "checkout", "-q", "main")
        assert not (root / "only_here.py").exists()
        md = ws.check(ws.get(m.id))  # the private ledger is served on every branch
        assert md.drift.value == "unknown"
        assert "feature" in md.checks[0].detail
        _git(root, "checkout", "-q", "feature")
        assert ws.check(ws.get(m.id)).drift.value == "fresh"
        # deleted on the branch it came from: positive evidence, stale
        _git(root, "rm", "-q", "only_here.py")
        _git(root, "commit", "-q", "-m", "gone")
        assert ws.check(ws.get(m.id)).drift.value == "stale"


def test_shared_workspace_refuses_a_secret_unless_allowed(tmp_path: Path) -> None:
    alice, _ = _remote(tmp_path)
    size = (alice.root / LEDGER).stat().st_size if (alice.root / LEDGER).exists() else 0
    with pytest.raises(team.SecretError, match="AWS Access Key"):
        alice.ws.record("the deploy key is AKIAIOSFODNN7EXAMPLE")
    assert ((alice.root / LEDGER).stat().st_size if (alice.root / LEDGER).exists() else 0) == size
    out = _anchorfs("--root", str(alice.root), "record", "password = hunter2hunter2")
    assert out.returncode == 1 and "secret" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    m = alice.ws.record("the deploy key is AKIAIOSFODNN7EXAMPLE (a documented fake)", allow_secret=True)
    last = orjson.loads((alice.root / LEDGER).read_bytes().splitlines()[-1])
    assert last["memories"][0]["id"] == m.id and "AWS Access Key" in last["allow_secret"]
    assert alice.ws.record("the token expiry is 24h in TokenIssuer.issue").status == "active"
    # a private workspace does not check
    team.set_mode(alice.root, False)
    assert alice.ws.record("password = hunter2hunter2").status == "active"


def test_init_shared_and_private_and_share(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    out = CliRunner().invoke(cli, ["--root", str(root), "init", "--shared"])
    assert out.exit_code == 0, out.output
    assert team.ATTRIBUTE in (root / ".gitattributes").read_text()
    assert "merge-ledger %O %A %B %P" in _git(root, "config", "--local", f"merge.{team.DRIVER}.driver")
    assert team.mode(root) == "shared"
    assert _git(root, "check-attr", "merge", "--", LEDGER).split()[-1] == "anchorfs-ledger"  # this clone's override
    assert f"/{LEDGER} merge=anchorfs-ledger" in (root / ".git" / "info" / "attributes").read_text()
    out = CliRunner().invoke(cli, ["--root", str(root), "share", "--private"])
    assert out.exit_code == 0 and team.mode(root) == "private"
    assert (root / ".anchorfs" / ".gitignore").read_text().splitlines()[-1] == "*"
    out = CliRunner().invoke(cli, ["--root", str(root), "--json", "share"])
    assert out.exit_code == 0 and orjson.loads(out.stdout)["mode"] == "shared" and team.mode(root) == "shared"
    (root / ".gitattributes").write_text("*.png binary\n")
    CliRunner().invoke(cli, ["--root", str(root), "init"])
    assert (root / ".gitattributes").read_text().startswith("*.png binary\n")  # kept, the ledger's line added
    assert team.mode(root) == "shared"
    plain = tmp_path / "nogit"
    plain.mkdir()
    proc = _anchorfs("--root", str(plain), "init", "--shared")
    assert proc.returncode == 1 and "not in a git repository" in proc.stderr


def test_linked_worktrees_are_workspaces_of_their_own(tmp_path: Path) -> None:
    alice, _ = _remote(tmp_path)
    alice.ws.record("in the main tree", anchors=["app.py#handler"])
    alice.commit("m")
    wt = tmp_path / "wt"
    _git(alice.root, "worktree", "add", "-q", "-b", "side", str(wt))
    assert (wt / LEDGER).exists()
    with anchorfs.open(wt) as other:
        assert other.root == wt and other.state == wt / ".anchorfs"
        n = other.record("only in the worktree")
        (wt / "app.py").write_text("def handler():\n    return 1\n")  # drift in the worktree only
        assert len(other.drift().stale) == 1
    assert n.id not in {m.id for m in alice.ws.list()}
    assert len(alice.ws.drift().stale) == 0


# -- the committed `union`, and this clone's own driver over it --------------------------------

def _forked_repo(tmp_path: Path, files: dict[str, str], attrs: str) -> tuple[Path, dict[str, tuple[str, str]]]:
    """A bare remote whose main holds `files` and `.gitattributes`, and branches `left` and
    `right` that each appended their own line to every file. Returns the remote and, per
    file, the two lines appended."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = tmp_path / "seed"
    _git(tmp_path, "clone", "-q", str(remote), str(seed))
    (seed / ".gitattributes").write_text(attrs)
    for name, text in files.items():
        (seed / name).parent.mkdir(parents=True, exist_ok=True)
        (seed / name).write_text(text)
    _git(seed, "add", "-A")
    _git(seed, "commit", "-q", "-m", "base")
    _git(seed, "push", "-q", "origin", "HEAD:main")
    added: dict[str, tuple[str, str]] = {}
    for side in ("left", "right"):
        _git(seed, "checkout", "-q", "-b", side, "main")
        for name in files:
            line = f"{side} appended to {name}\n"
            added.setdefault(name, ("", ""))
            added[name] = (line, added[name][1]) if side == "left" else (added[name][0], line)
            with open(seed / name, "a") as fh:
                fh.write(line)
        _git(seed, "commit", "-q", "-am", side)
        _git(seed, "push", "-q", "origin", side)
    return remote, added


def _merge_in(tmp_path: Path, remote: Path, name: str, ours: str, theirs: str, *, anchorfs_clone: bool) -> tuple[Path, int]:
    """Clone, optionally let anchorfs set up that clone, then merge `theirs` into `ours`."""
    clone = tmp_path / name
    _git(tmp_path, "clone", "-q", str(remote), str(clone))
    if anchorfs_clone:
        team.install_merge(clone)
    _git(clone, "checkout", "-q", ours)
    proc = subprocess.run(["git", "merge", "-q", "--no-edit", f"origin/{theirs}"], cwd=clone, capture_output=True,
                          text=True, env={**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x",
                                          "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"})
    return clone, proc.returncode


def test_git_runs_this_clones_driver_for_the_ledger_and_its_own_union_without_it(tmp_path: Path) -> None:
    """Both ways, with real git: a clone with no anchorfs config at all merges two appended
    ledgers by git's built-in union (no conflict, ours' lines first: the order depends on who
    merges); a clone set up by anchorfs gets the driver's one canonical order."""
    repo = tmp_path / "src"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    anchorfs.init(repo)
    team.set_mode(repo, True)
    assert (repo / ".gitattributes").read_text().splitlines()[-1] == team.ATTRIBUTE == f"{LEDGER} merge=union"
    with anchorfs.open(repo) as ws:
        ws.record("on the base")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    for side in ("left", "right"):
        _git(repo, "checkout", "-q", "-b", side, "main")
        with anchorfs.open(repo) as ws:
            ws.record(f"recorded on {side}")
            ws.record(f"recorded on {side} again")
        _git(repo, "commit", "-q", "-am", side)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    base = _git(repo, "show", f"main:{LEDGER}").encode()
    left, right = (_git(repo, "show", f"{b}:{LEDGER}").encode() for b in ("left", "right"))
    canonical = b"".join(x + b"\n" for x in team.merged_lines(base.splitlines(), left.splitlines(), right.splitlines()))
    results = {}
    for with_driver in (False, True):
        for ours, theirs in (("left", "right"), ("right", "left")):
            clone, rc = _merge_in(tmp_path, remote, f"{ours}-{with_driver}", ours, theirs, anchorfs_clone=with_driver)
            assert rc == 0  # no conflict, with or without anchorfs
            assert _git(clone, "check-attr", "merge", "--", LEDGER).split()[-1] == (
                "anchorfs-ledger" if with_driver else "union")
            data = (clone / LEDGER).read_bytes()
            assert sorted(data.splitlines()) == sorted(set(base.splitlines() + left.splitlines() + right.splitlines()))
            results[with_driver, ours] = data
            assert len(_state(clone)) == 5  # the fold gives the union: every memory once
    assert results[True, "left"] == results[True, "right"] == canonical  # the driver: one order
    assert results[False, "left"] != results[False, "right"]  # git's union: ours first, so who merged shows
    assert results[False, "left"] == base + left[len(base):] + right[len(base):]
    assert _state_bytes(results[False, "left"]) == _state_bytes(canonical) == _state_bytes(results[False, "right"])


def _state_bytes(data: bytes) -> dict[str, dict]:
    from anchorfs.ledger.log import Entry

    return {i: m.to_dict() for i, m in fold([Entry.from_dict(orjson.loads(x)) for x in data.splitlines()]).items()}


def test_other_files_merge_the_same_with_and_without_anchorfs(tmp_path: Path) -> None:
    """The driver is named only for the ledger, locally: another `merge=union` file is git's
    own union either way, and a file a crafted `.gitattributes` routes to `anchorfs-ledger`
    gets a text merge with conflict markers, as in a clone without anchorfs, never a rewrite."""
    files = {"CHANGES.md": "# changes\n- first\n", "docs/notes.txt": "one\ntwo\n", "crafted.jsonl": '{"tx": 1}\n'}
    attrs = "CHANGES.md merge=union\ndocs/notes.txt merge=union\ncrafted.jsonl merge=anchorfs-ledger\n"
    remote, added = _forked_repo(tmp_path, files, attrs)
    plain, rc_plain = _merge_in(tmp_path, remote, "plain", "left", "right", anchorfs_clone=False)
    ours, rc_ours = _merge_in(tmp_path, remote, "ours", "left", "right", anchorfs_clone=True)
    assert "merge-ledger" in _git(ours, "config", "--local", f"merge.{team.DRIVER}.driver")
    assert rc_plain == rc_ours == 1  # crafted.jsonl conflicts, in both
    for name in ("CHANGES.md", "docs/notes.txt"):
        assert (plain / name).read_bytes() == (ours / name).read_bytes()
        assert (ours / name).read_text() == files[name] + added[name][0] + added[name][1]
    unmerged = {x.split("\t")[-1] for x in _git(ours, "ls-files", "-u").splitlines()}
    assert unmerged == {"crafted.jsonl"} == {x.split("\t")[-1] for x in _git(plain, "ls-files", "-u").splitlines()}

    def body(p: Path) -> list[str]:
        return [x for x in p.read_text().splitlines() if not x.startswith(("<<<<<<<", "=======", ">>>>>>>"))]

    text = (ours / "crafted.jsonl").read_text()
    assert "<<<<<<<" in text and "=======" in text and ">>>>>>>" in text
    assert body(ours / "crafted.jsonl") == body(plain / "crafted.jsonl")


def test_an_earlier_versions_attribute_and_driver_are_upgraded_in_place(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    anchorfs.init(root)
    old = ("*.png binary\r\n# anchorfs: the memory ledger merges by entry id (`anchorfs merge-ledger`)\r\n"
           f"{LEDGER} merge=anchorfs-ledger\r\n*.sh text eol=lf")
    (root / ".gitattributes").write_bytes(old.encode())
    _git(root, "config", "--local", f"merge.{team.DRIVER}.driver", "anchorfs merge-ledger %O %A %B")
    assert team.mode(root) == "shared"  # the earlier line still means shared
    out = CliRunner().invoke(cli, ["--root", str(root), "hook", "install"])
    assert out.exit_code == 0, out.output
    new = (root / ".gitattributes").read_bytes()
    assert new == old.replace("merge=anchorfs-ledger", "merge=union").replace(
        "# anchorfs: the memory ledger merges by entry id (`anchorfs merge-ledger`)", team._ATTR_NOTE).encode()
    assert team.mode(root) == "shared"
    assert _git(root, "config", "--local", f"merge.{team.DRIVER}.driver").strip().endswith("%O %A %B %P")
    assert _git(root, "check-attr", "merge", "--", LEDGER).split()[-1] == "anchorfs-ledger"
    # again: nothing changes, nothing is added twice
    for args in (["init"], ["hook", "install"], ["share"]):
        assert CliRunner().invoke(cli, ["--root", str(root), *args]).exit_code == 0
    assert (root / ".gitattributes").read_bytes() == new
    assert (root / ".git" / "info" / "attributes").read_text().count("merge=anchorfs-ledger") == 1
    # an earlier clone's `%O %A %B` config (no path) still merges the ledger by entry id
    sides = {}
    for name, lines in (("O", [b'{"x":1}']), ("A", [b'{"x":1}', b'{"x":2}']), ("B", [b'{"x":1}', b'{"x":3}'])):
        sides[name] = tmp_path / name
        sides[name].write_bytes(b"".join(x + b"\n" for x in lines))
    assert team.merge_ledger(sides["O"], sides["A"], sides["B"]) == 0
    assert sides["A"].read_bytes() == b'{"x":1}\n{"x":2}\n{"x":3}\n'


def test_the_local_override_matches_a_workspace_in_a_subfolder_with_odd_characters(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q", "-b", "main")
    for sub in ("pkg/a b", "x[1]*#"):
        root = top / sub
        root.mkdir(parents=True)
        anchorfs.init(root, nested=True)
        team.set_mode(root, True)
        rel = f"{sub}/{LEDGER}"
        assert _git(top, "check-attr", "merge", "--", rel).rstrip("\n").endswith(": merge: anchorfs-ledger")
        assert _git(top, "check-attr", "merge", "--", f"{sub}/other.jsonl").rstrip("\n").endswith(": unspecified")
    assert _git(top, "check-attr", "merge", "--", f"x1/{LEDGER}").rstrip("\n").endswith(": unspecified")
    assert team.is_ledger_path("pkg/a b/.anchorfs/ledger.jsonl")
    assert not team.is_ledger_path("ledger.jsonl") and not team.is_ledger_path("x/anchorfs/ledger.jsonl")


def test_hook_uninstall_removes_the_sync_hooks_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    anchorfs.init(root)
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for old in hooks.glob("*.sample"):
        old.unlink()
    # a person's own post-merge hook (CRLF, no final newline) and post-rewrite (no shebang)
    mine = {"post-merge": b"#!/bin/bash\r\necho merged >> log\r\nexit 0", "post-rewrite": b"echo rewritten\n"}
    for name, data in mine.items():
        (hooks / name).write_bytes(data)
        (hooks / name).chmod(0o750)
    out = CliRunner().invoke(cli, ["--root", str(root), "hook", "install"])
    assert out.exit_code == 0, out.output
    for name in ("post-commit", *install_sync.__globals__["SYNC_HOOKS"]):
        assert "anchorfs" in (hooks / name).read_text()
    assert (hooks / "post-merge").read_bytes().startswith(b"#!/bin/bash\r\n# >>> anchorfs >>>\n")
    # a second workspace in the same repo shares the hooks' block
    other = root / "sub"
    other.mkdir()
    anchorfs.init(other, nested=True)
    install_sync(other)
    # someone appends to the file anchorfs created
    with open(hooks / "post-checkout", "ab") as fh:
        fh.write(b"echo checked-out\n")
    out = CliRunner().invoke(cli, ["--root", str(root), "--json", "hook", "uninstall"])
    assert out.exit_code == 0, out.output
    report = orjson.loads(out.stdout)
    assert report["changed"] is True and sorted(Path(p).name for p in report["sync"]) == sorted(
        ("post-checkout", "post-merge", "post-rewrite"))
    assert not (hooks / "post-commit").exists()  # anchorfs created it and nothing else was in it
    for name in ("post-checkout", "post-merge", "post-rewrite"):
        text = (hooks / name).read_text()
        assert str(other) in text and f"--root {root} " not in text  # only this workspace's line went
    assert "echo checked-out" in (hooks / "post-checkout").read_text()
    # the second workspace uninstalls too: the person's lines come back byte for byte
    from anchorfs.agents.hook_git import uninstall_sync

    assert sorted(p.name for p in uninstall_sync(other)) == ["post-checkout", "post-merge", "post-rewrite"]
    for name, data in mine.items():
        assert (hooks / name).read_bytes() == data
        assert (hooks / name).stat().st_mode & 0o777 == 0o750
    assert (hooks / "post-checkout").read_bytes() == b"#!/bin/sh\necho checked-out\n"  # someone else's line: kept
    assert uninstall_sync(other) == [] and uninstall_sync(root) == []
    # a hook that held only anchorfs's block is deleted
    install_sync(root)
    (hooks / "post-checkout").unlink()
    install_sync(root)
    assert (hooks / "post-checkout").exists()
    assert Path(hooks / "post-checkout") in uninstall_sync(root)
    assert not (hooks / "post-checkout").exists()
    out = CliRunner().invoke(cli, ["--root", str(root), "hook", "uninstall"])
    assert out.exit_code == 0 and "not installed" in out.output
    assert (hooks / "post-merge").read_bytes() == mine["post-merge"]


# -- the secret check: detect-secrets' own file scan, run in memory ----------------------------

SECRETS = [  # one or more for each of detect-secrets' default plugins, and texts it must let through
    "the deploy key is AKIAIOSFODNN7EXAMPLE",
    'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYab"',
    "artifactory token AKCp5e2gMNzMDLXsU7mhT9Tk3aJy7BCqxSxBEMYDudiMDyyWP2JfSr3M5Akd9ga5EsVMVmZRt",
    "DefaultEndpointsProtocol=https;AccountName=x;AccountKey="
    "lJzRc1YdHaAA2KCNJJ1tkYwF/+mKK6Ygw0NGe170Xu592euJv2wYUtBlV8z+qnlcNQSnIYVTkLWntUO1F8j8rQ==",
    "clone https://alice:s3cr3tpassw0rd@example.com/repo.git",
    "cloudant_password = 'a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2'",
    "bot token MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "token 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",
    "gitlab glpat-aaaBc1De2Fg3Hi4Jk5Lm6",
    "value is '2b00042f7481c7b056c4b410d28f33cf'",
    "secret = 'Zm9vYmFyYmF6cXV4cXV1eGZyb2JuaXR6MTIzNDU2Nzg5MA=='",
    "ibm_cloud_iam_api_key = 'abcd1234abcd1234abcd1234ABCD1234abcd1234abcd'",
    "ibm cos hmac secret_access_key = 'a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6'",
    "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5"
    "MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "password = hunter2hunter2",
    "mailchimp 343ea45721923ed956e2b38c31db76aa-us30",
    "//registry.npmjs.org/:_authToken=npm_abcdefghijABCDEFGHIJ0123456789",
    "sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8T3BlbkFJAb1Cd2Ef3Gh4Ij5Kl6Mn7",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "pypi-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 8,
    "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",
    "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "softlayer_api_key = 'abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789'",
    "square sq0csp-0123456789_-abcdefghijABCDEFGHIJklmnopqrstu",
    "stripe sk_live_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8",
    "bot 1102015430:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawx",
    "twilio ACa1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4",
    "[db]\nkey: 3f9a8b7c6d5e4f3a2b1c",  # the INI reader's lines (a section header: those only)
    "[section]\npassword = 'hunter2hunter2'\nother = x",
    "token: 3f9a8b7c6d5e4f3a2b1c9d8e",  # the eager INI reader quotes the value
    "line one\r\nsecret = 'Zm9vYmFyYmF6cXV4cXV1eGZyb2JuaXR6MTIzNDU2Nzg5MA=='\r\n",
]
PLAIN = [
    "the token expiry is 24h in TokenIssuer.issue", "retries back off exponentially; see client.py",
    "the service port is 8080 behind TLS", "commit 3f9a8b7c6d5e fixed the race", "",
    "password reset emails go through the mailer", "uuid 123e4567-e89b-12d3-a456-426614174000",
    "api_key = os.environ['API_KEY']", "secret = '${SECRET}'",
]


def _file_scan(text: str) -> list[str]:
    """detect-secrets' own file scan of `text` written to a file: what the check did before."""
    import tempfile

    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    with tempfile.TemporaryDirectory() as d:
        Path(d, "memory.txt").write_text(text, encoding="utf-8")
        found = SecretsCollection(root=d)
        with default_settings():
            found.scan_file("memory.txt")
        return sorted({s.type for s in found["memory.txt"]})


def test_the_in_memory_scan_finds_what_detect_secrets_file_scan_finds() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from detect_secrets.transformers import get_transformers

    kinds: set[str] = set()
    for text in SECRETS + PLAIN:
        expected = _file_scan(text)
        assert team.find_secrets(text) == expected, text
        assert bool(expected) == (text in SECRETS), text
        kinds.update(expected)
    assert len(kinds) >= 25  # nearly every default plugin seen flagging
    # the transformers a `.txt` file gets are the two INI readers the in-memory scan runs
    every: list[Any] = list(get_transformers())
    taking = [type(t).__name__ for t in every if t.should_parse_file(team._SCAN_NAME)]
    assert sorted(taking) == ["ConfigFileTransformer", "EagerConfigFileTransformer"]

    pieces = st.sampled_from([*SECRETS, *PLAIN, "\n", "[s]\n", " = ", ": ", "'", '"', "#", "x", "\r\n", "\t"])

    @settings(max_examples=8, deadline=None)
    @given(st.lists(pieces, max_size=6).map("".join))
    def same(text: str) -> None:
        assert team.find_secrets(text) == _file_scan(text)

    same()


def test_the_secret_check_leaves_what_a_scan_never_uses_unimported() -> None:
    """`requests` (online verification) and `multiprocessing` (a pool for many files) cost
    most of detect-secrets' import and a scan never uses them; whoever imports them later
    gets the real modules, and so does detect-secrets should it ever verify."""
    import sys

    code = (
        "import sys\n"
        "from anchorfs.sdk.team import find_secrets\n"
        "assert find_secrets('the deploy key is AKIAIOSFODNN7EXAMPLE') == ['AWS Access Key']\n"
        "assert find_secrets('a plain note') == []\n"
        "gone = [m for m in ('requests', 'urllib3', 'multiprocessing', 'yaml') if m in sys.modules]\n"
        "assert not gone, gone\n"
        "import requests, multiprocessing\n"
        "from detect_secrets.plugins import base\n"
        "assert requests.get and multiprocessing.Pool and base.requests.exceptions.RequestException\n"
        "assert base.requests.Response is requests.Response\n"
        "assert type(sys.modules['requests']).__name__ == 'module'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


POSITIVES = {  # per default plugin of detect-secrets 1.5.0: texts its file scan flags with that plugin
    "AWS Access Key": ["the deploy key is AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A in the env",
                       "role A3T1IOSFODNN7EXAMPLE"],
    "Artifactory Credentials": ["artifactory token AKCp5e2gMNzMDLXsU7mhT9Tk3aJy7BCqxSxBEMYDudiMDyyWP2JfSr3M5Akd9ga5EsVMVmZRt",
                                "pw AP6xxxxxxxxxx"],
    "Azure Storage Account access key": [SECRETS[3]],
    "Base64 High Entropy String": ["secret = 'Zm9vYmFyYmF6cXV4cXV1eGZyb2JuaXR6MTIzNDU2Nzg5MA=='",
                                   "use 'q8Zr/Tm+Lk2Vw9Xa_Pb4Nc7Yd-He1Jf0Gs5' there", "telegram 110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"],
    "Basic Auth Credentials": ["clone https://alice:s3cr3tpassw0rd@example.com/repo.git", "redis://app:hunter2x@cache:6379"],
    "Cloudant Credentials": [SECRETS[5], "https://acct:qwhvrtzbnmpoiuylkjhgfdsa@acct.cloudant.com"],
    "Discord Bot Token": [SECRETS[6]],
    "GitHub Token": [SECRETS[7], "gho_16C7e42F292c6912E7710c838347Ae178B4a"],
    "GitLab Token": [SECRETS[8], "runner GR1348941aBcDeFgHiJkLmNoPqRsTuV", "glcbt-1a_aBcDeFgHiJkLmNoPqRsTuVwX"],
    "Hex High Entropy String": ["value is '2b00042f7481c7b056c4b410d28f33cf'", "token: 3f9a8b7c6d5e4f3a2b1c9d8e"],
    "IBM COS HMAC Credentials": [SECRETS[12]],
    "IBM Cloud IAM Key": [SECRETS[11]],
    "JSON Web Token": [SECRETS[13]],
    "Mailchimp Access Key": [SECRETS[15]],
    "NPM tokens": [SECRETS[16]],
    "OpenAI Token": [SECRETS[17]],
    "Private Key": [SECRETS[18], "-----BEGIN OPENSSH PRIVATE KEY-----", "PuTTY-User-Key-File-2: ssh-rsa"],
    "PyPI Token": [SECRETS[19]],
    "Secret Keyword": ["password = hunter2hunter2", "db_pass: 'hunter2x'", 'my_apikey = "qJ9w8e7r6x"',
                       "Client_Key => 'hunter2x'", "contraseña = 'hunter2x'", "[s]\nPRIVATE_KEY = hunter2x"],
    "SendGrid API Key": [SECRETS[20]],
    "Slack Token": [SECRETS[21], "hook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"],
    "SoftLayer Credentials": [SECRETS[22]],
    "Square OAuth Secret": [SECRETS[23]],
    "Stripe Access Key": [SECRETS[24], "rk_live_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"],
    "Telegram Bot Token": ["bot 1102015430:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawx"],
    "Twilio API Key": [SECRETS[26], "SKa1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4"],
}


def test_the_pre_screen_lets_through_every_text_a_plugin_flags() -> None:
    """No text a default plugin flags is screened out: each plugin's positive examples, and
    texts built around them (INI sections, quotes, `=`/`:`, a `%`, pieces cut out or
    put in); the plugins and keywords are those the conditions were derived from."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.keyword import DENYLIST

    screen = team._screen()
    assert screen is not None  # the installed detect-secrets is the one screened for
    full = team._detector()
    assert set(get_mapping_from_secret_type_to_class()) == set(POSITIVES) | {"Public IP (ipv4)"}
    assert team._KEYWORDS == DENYLIST
    for kind, texts in POSITIVES.items():
        for text in texts:
            assert kind in full(text), (kind, text)
            assert screen(text), text
    for text in SECRETS:
        assert screen(text) and team.find_secrets(text) == full(text) != []
    # what the screen is for: ordinary notes never import detect-secrets
    for text in ("the token expiry is 24h in TokenIssuer.issue", "retries back off exponentially; see client.py",
                 "the service port is 8080 behind TLS", ""):
        assert not screen(text) and team.find_secrets(text) == []
    # configparser's interpolation joins pieces of two lines: a `%` is always scanned
    joined = "[s]\na = AKIAIOSF\nb = x\n  %(a)sODNN7EXAMPLE"
    assert "AWS Access Key" in full(joined) and screen(joined)

    every = [t for texts in POSITIVES.values() for t in texts]
    noise = st.text(alphabet="ab Z9_-=:'\"\\\n%[]/.@", max_size=8)

    @settings(max_examples=50, deadline=None)
    @given(st.sampled_from(every), st.integers(0, 200), st.integers(0, 12), noise, st.sampled_from(["", "[s]\n", "k = "]))
    def implied(text: str, at: int, cut: int, put: str, head: str) -> None:
        at %= len(text) + 1
        mutated = head + text[:at] + put + text[at + cut:]
        if full(mutated):
            assert screen(mutated), mutated

    implied()
    # another detect-secrets version: no screen, every text scanned
    team._screen.cache_clear()
    real = team._SCREENED_FOR
    try:
        team._SCREENED_FOR = "0.0.0"
        assert team._screen() is None
        assert team.find_secrets("the deploy key is AKIAIOSFODNN7EXAMPLE") == ["AWS Access Key"]
    finally:
        team._SCREENED_FOR = real
        team._screen.cache_clear()


def test_a_gitattributes_link_to_dev_zero_is_refused_in_one_line_not_read(tmp_path: Path) -> None:
    """A crafted clone's `.gitattributes -> /dev/zero` made `init` read forever: it goes through
    the guarded open now, so it is one error line and the link stays as it was."""
    import subprocess
    import sys

    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitattributes").symlink_to("/dev/zero")
    r = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(repo), "init"], cwd=repo,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and ".gitattributes" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert os.readlink(repo / ".gitattributes") == "/dev/zero"
