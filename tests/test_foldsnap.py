"""The fold snapshot (`.anchorfs/fold.snap`): a new process starts from it, never from a wrong one.

Every case ends in the same assertion: the state served equals `ledger.fold` of the ledger's
lines as they are now. A snapshot is used only while the ledger prefix it was folded from
still holds; a grown ledger is the snapshot plus the new lines; anything else (garbage, a
link, a truncated or rewritten ledger, a snapshot well-formed but about other bytes) is
ignored and the fold rebuilt from the ledger.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anchorfs
from anchorfs import catchup, foldsnap
from anchorfs.catchup import Folded
from anchorfs.ledger import Entry, FoldState, Ledger, fold, stamped
from anchorfs.model import Memory, utcnow
from anchorfs.workspace import Workspace

from conftest import git


@pytest.fixture(autouse=True)
def _snapshot_every_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small ledgers are snapshotted too, so every case here exercises the file."""
    monkeypatch.setattr(foldsnap, "MIN_LINES", 0)


class Parses:
    """Counts the ledger lines parsed (a pass-through around `Entry.from_dict`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = Entry.from_dict.__func__  # type: ignore[attr-defined]

        def counting(cls: type[Entry], d: dict[str, Any]) -> Entry:
            self.n += 1
            return real(cls, d)  # type: ignore[no-any-return]

        monkeypatch.setattr(Entry, "from_dict", classmethod(counting))


def view(state: dict[str, Memory]) -> tuple[Any, ...]:
    """Everything a fold answers with: snapshots, heads, names, forks, the top `seq`."""
    assert isinstance(state, FoldState)
    heads = {mid: {tx: (h.rank, h.op, h.actor, h.at, h.memory) for tx, h in hs.items()} for mid, hs in state.heads.items()}
    named = {mid: set(v) for mid, v in state.named.items() if v}
    forks = [(f.memory.id, sorted(s.id for s in f.sides)) for f in state.forks()]
    return dict(state), heads, named, forks, state.top, state.in_conflict()


def full_fold(led: Ledger) -> FoldState:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fold(led.read())


def settle() -> None:
    """Past the ledger's racy window (`catchup.FINE_NS`), so a snapshot taken now is trusted on the stat."""
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)


def write(led: Ledger, state: FoldState, op: str, memories: list[Memory]) -> None:
    led.path.parent.mkdir(parents=True, exist_ok=True)
    with led.lock():
        led.append([stamped(Entry.new(op, memories), state)])


def build(led: Ledger, n: int = 5) -> FoldState:
    """A ledger of `n` records, a supersede and a retract (real lines, by the writer's rules)."""
    state = full_fold(led)
    now = utcnow()
    for i in range(n):
        write(led, state, "record", [Memory(id=f"m{i:03d}-{os.urandom(3).hex()}", content=f"fact {i}",
                                            recorded_at=now, valid_from=now)])
        state = full_fold(led)
    ids = list(state)
    old = state[ids[0]]
    new = Memory(id=f"s-{os.urandom(3).hex()}", content="fact 0, corrected", supersedes=old.id, recorded_at=now,
                 valid_from=now)
    write(led, state, "supersede", [old.replace(status="superseded", superseded_by=new.id, valid_until=now), new])
    state = full_fold(led)
    write(led, state, "retract", [state[ids[1]].replace(status="retracted", valid_until=now)])
    return full_fold(led)


@pytest.fixture
def led(tmp_path: Path) -> Ledger:
    state = tmp_path / ".anchorfs"
    state.mkdir()
    return Ledger(state)


def test_a_valid_snapshot_is_served_without_parsing_a_line(led: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    want = build(led)
    settle()
    first = foldsnap.current(led)
    assert foldsnap.snap_path(led).is_file() and first.saved == want.lines
    parses = Parses(monkeypatch)
    again = foldsnap.current(led)  # a new process: no in-process fold to start from
    assert parses.n == 0  # the snapshot held: the ledger was not read line by line
    assert view(again.state) == view(want) == view(first.state)


def test_a_grown_ledger_is_the_snapshot_plus_the_new_lines(led: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    state = build(led)
    foldsnap.current(led)
    before = foldsnap.load(led)
    assert before is not None
    write(led, state, "record", [Memory(id="late-1", content="recorded later")])
    write(led, full_fold(led), "retract", [full_fold(led)[next(iter(state))].replace(status="retracted")])
    parses = Parses(monkeypatch)
    grown = foldsnap.current(led)
    assert parses.n == 2  # only the lines after the snapshot's prefix
    assert view(grown.state) == view(full_fold(led))


def test_a_snapshot_about_other_bytes_is_never_trusted(led: Ledger, tmp_path: Path) -> None:
    """Well-formed, in this folder, its body matching its own checksum, and saying something else
    (memories this ledger never held): its prefix does not match the ledger's bytes, so no."""
    build(led)
    other = Ledger(tmp_path / "elsewhere")
    lie = build(other, n=7)
    lie_prefix = catchup.follow(other, None).prefix
    folder = os.lstat(led.path.parent)
    for prefix in (lie_prefix,  # another ledger's bytes
                   catchup.Prefix(led.size(), lie_prefix.base, lie_prefix.digest, lie_prefix.tail, None, time.time_ns())):
        foldsnap.snap_path(led).write_bytes(foldsnap.encode(Folded(prefix, lie), (folder.st_dev, folder.st_ino)))
        loaded = foldsnap.load(led)
        assert loaded is not None and view(loaded.folded.state) == view(lie)  # it parses: only its prefix is wrong
        served = foldsnap.current(led)
        assert view(served.state) == view(full_fold(led)) != view(lie)
        assert set(served.state).isdisjoint(lie)
        mended = foldsnap.load(led)  # written anew from the real fold
        assert mended is not None and view(mended.folded.state) == view(full_fold(led))


@pytest.mark.parametrize("damage", ["garbage", "empty", "torn", "version", "body", "folder", "memory", "json"])
def test_a_damaged_snapshot_is_not_there(led: Ledger, damage: str) -> None:
    want = build(led)
    foldsnap.current(led)
    path = foldsnap.snap_path(led)
    data = path.read_bytes()
    head, _, body = data.partition(b"\n")
    header = orjson.loads(head)
    if damage == "garbage":
        data = os.urandom(len(data))
    elif damage == "empty":
        data = b""
    elif damage == "torn":
        data = data[: len(data) // 2]
    elif damage == "version":
        data = orjson.dumps({**header, "v": 99}) + b"\n" + body
    elif damage == "body":  # a byte flipped in the body: its checksum says so
        i = body.index(b"fact")
        data = head + b"\n" + body[:i] + b"F" + body[i + 1:]
    elif damage == "folder":  # a copy from another state folder (a clone, `cp -r`)
        data = orjson.dumps({**header, "folder": [1, 2]}) + b"\n" + body
    elif damage == "memory":  # well-formed JSON with its checksum right, a snapshot the reader's rules refuse
        first = body[:body.index(b"\n")]
        plan = body[len(first) + 1:len(first) + 1 + header["plan"][1]]  # the drift plan (`read_plan`)
        rest = body[len(first) + len(plan) + 2:]  # the records
        rec, others = rest.split(b"\n", 1)
        bad = orjson.loads(rec)
        bad[1][0][6]["tags"] = [1, 2]
        nb = first + b"\n" + plan + b"\n" + orjson.dumps(bad) + b"\n" + others
        import blake3

        data = orjson.dumps({**header, "size": len(nb), "body": blake3.blake3(nb).hexdigest()}) + b"\n" + nb
    elif damage == "json":
        data = head + b"\n" + b"{" * 5000
    path.write_bytes(data)
    assert foldsnap.load(led) is None
    assert view(foldsnap.current(led).state) == view(want)
    mended = foldsnap.load(led)
    assert mended is not None and view(mended.folded.state) == view(want)


def test_a_link_is_never_followed_nor_written_through(led: Ledger, tmp_path: Path) -> None:
    want = build(led)
    foldsnap.current(led)
    outside = tmp_path / "outside.snap"
    shutil.copyfile(foldsnap.snap_path(led), outside)
    kept = outside.read_bytes()
    foldsnap.snap_path(led).unlink()
    foldsnap.snap_path(led).symlink_to(outside)
    assert foldsnap.load(led) is None
    write(led, want, "record", [Memory(id="after-link", content="x")])
    assert view(foldsnap.current(led).state) == view(full_fold(led))
    assert foldsnap.snap_path(led).is_symlink() and outside.read_bytes() == kept


def test_a_truncated_ledger_is_folded_afresh(led: Ledger) -> None:
    build(led)
    lines = led.path.read_bytes().splitlines(keepends=True)
    foldsnap.current(led)
    led.path.write_bytes(b"".join(lines[:3]))  # a hand truncation, a reset to an older commit
    served = foldsnap.current(led)
    assert view(served.state) == view(full_fold(led)) and len(served.state) == 3


def test_a_ledger_rewritten_to_the_same_size_is_folded_afresh(led: Ledger) -> None:
    """Same size, same mtime put back: only the checksum can tell, and it does."""
    want = build(led)
    foldsnap.current(led)
    data = led.path.read_bytes()
    st = os.stat(led.path)
    forged = data.replace(b"fact 2", b"fact 9")
    assert len(forged) == len(data) and forged != data
    with open(led.path, "r+b") as fh:  # in place: the same inode
        fh.write(forged)
    os.utime(led.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    served = foldsnap.current(led)
    assert view(served.state) == view(full_fold(led)) != view(want)
    assert any(m.content == "fact 9" for m in served.state.values())


def test_a_checkout_to_a_same_size_ledger_serves_that_branch(git_repo: Path) -> None:
    anchorfs.init(git_repo)
    led = Ledger(git_repo / ".anchorfs")
    state = FoldState()
    for text in ("cache holds 100", "deploys on friday"):
        write(led, state, "record", [Memory(id=f"id-{text[:5]}-{'a' * 10}", content=text)])
        state = full_fold(led)
    git(git_repo, "add", ".anchorfs/ledger.jsonl")
    git(git_repo, "commit", "-qm", "a")
    git(git_repo, "checkout", "-qb", "other", "HEAD~0")
    data = led.path.read_bytes().replace(b"cache holds 100", b"cache holds 900")
    led.path.write_bytes(data)
    git(git_repo, "commit", "-qam", "b")
    size = led.size()
    settle()
    on_other = foldsnap.current(led)
    git(git_repo, "checkout", "-q", "main")
    assert led.size() == size
    served = foldsnap.current(led)
    assert view(served.state) == view(full_fold(led)) != view(on_other.state)
    assert {m.content for m in served.state.values()} == {"cache holds 100", "deploys on friday"}


def test_a_bad_line_is_never_snapshotted_away(led: Ledger) -> None:
    """A fold that skipped a bad line is not kept: every process must read (and warn about) it."""
    build(led)
    with open(led.path, "ab") as fh:
        fh.write(b'{"v": 1, "not": "an entry"}\n')
    foldsnap.snap_path(led).unlink(missing_ok=True)
    with pytest.warns(UserWarning, match="bad line"):
        foldsnap.current(led)
    assert not foldsnap.snap_path(led).exists()
    with pytest.warns(UserWarning, match="bad line"):
        served = foldsnap.current(led)
    assert view(served.state) == view(full_fold(led))


def test_a_torn_tail_is_never_snapshotted_away(led: Ledger) -> None:
    build(led)
    with open(led.path, "ab") as fh:
        fh.write(b'{"v": 1, "tx": "torn')
    with pytest.warns(UserWarning, match="torn"):
        served = foldsnap.current(led)
    assert not foldsnap.snap_path(led).exists() and view(served.state) == view(full_fold(led))


def test_a_torn_tail_after_the_snapshot_is_still_said(led: Ledger) -> None:
    """A crash mid-append after the snapshot was written: every new process still warns of it."""
    want = build(led)
    foldsnap.current(led)
    with open(led.path, "ab") as fh:
        fh.write(b'{"v": 1, "tx": "torn')
    for _ in range(2):
        with pytest.warns(UserWarning, match="torn"):
            served = foldsnap.current(led)
        assert view(served.state) == view(want)


def test_a_workspace_starts_from_the_snapshot_and_read_only_writes_none(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    anchorfs.init(tmp_path)
    assert "fold.snap" in (tmp_path / ".anchorfs" / ".gitignore").read_text().splitlines()
    led = Ledger(tmp_path / ".anchorfs")
    build(led)
    with Workspace(tmp_path, read_only=True) as ro:
        assert view(ro._memories()) == view(full_fold(led))
    assert not foldsnap.snap_path(led).exists()  # read-only: nothing written in .anchorfs/
    settle()
    with Workspace(tmp_path) as w:
        listed = {m.id for m in w.list(status="all")}
    assert foldsnap.snap_path(led).exists()
    want = set(full_fold(led))
    parses = Parses(monkeypatch)
    with Workspace(tmp_path) as w:
        assert {m.id for m in w.list(status="all")} == listed == want
    assert parses.n == 0


def test_an_earlier_gitignore_learns_of_the_snapshot(led: Ledger) -> None:
    from anchorfs.statedir import _GITIGNORE_BEFORE

    ignore = led.path.parent / ".gitignore"
    ignore.write_text(_GITIGNORE_BEFORE[-1])
    build(led)
    foldsnap.current(led)
    assert foldsnap.SNAP_FILE in ignore.read_text().splitlines()


# -- the property: via the snapshot == a full fold, whatever happens to the ledger ---------------

def _pool(tmp: Path) -> list[bytes]:
    """Lines from two clones' writes over a shared prefix (forks included), to append in any order."""
    tmp.mkdir(parents=True, exist_ok=True)
    led = Ledger(tmp / ".anchorfs")
    base = build(led, n=4)
    shared = led.path.read_bytes()
    ids = [i for i, m in base.items() if m.status == "active"]
    for who in ("alice", "bob"):
        led.path.write_bytes(shared)
        state = full_fold(led)
        old = state[ids[0]]
        new = Memory(id=f"{who}-succ", content=f"{who}'s correction", supersedes=old.id)
        write(led, state, "supersede", [old.replace(status="superseded", superseded_by=new.id), new])
        write(led, full_fold(led), "record", [Memory(id=f"{who}-note", content=f"{who}'s note")])
        if who == "bob":
            write(led, full_fold(led), "retract", [full_fold(led)[ids[1]].replace(status="retracted")])
        shared_cut = len(shared)
        _POOL.setdefault("lines", []).extend(led.path.read_bytes()[shared_cut:].splitlines(keepends=True))
    return shared.splitlines(keepends=True) + _POOL["lines"]


_POOL: dict[str, list[bytes]] = {}


def _lines(factory: pytest.TempPathFactory) -> list[bytes]:
    if "all" not in _POOL:
        _POOL["all"] = _pool(factory.mktemp("pool"))
    return _POOL["all"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_state_via_the_snapshot_is_the_full_fold(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    pool = _lines(tmp_path_factory)
    root = tmp_path_factory.mktemp("prop")
    led = Ledger(root)
    led.path.write_bytes(b"".join(data.draw(st.lists(st.sampled_from(pool), max_size=6))))
    cached: Folded | None = None
    for _ in range(data.draw(st.integers(1, 4))):
        step = data.draw(st.sampled_from(["append", "append", "rewrite", "truncate", "same"]))
        now = led.path.read_bytes()
        if step == "append":
            now += b"".join(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4)))
        elif step == "rewrite":  # a checkout, a rebase, a merge putting lines in the middle
            now = b"".join(data.draw(st.permutations(now.splitlines(keepends=True))))
            now += b"".join(data.draw(st.lists(st.sampled_from(pool), max_size=2)))
        elif step == "truncate":
            lines = now.splitlines(keepends=True)
            now = b"".join(lines[:data.draw(st.integers(0, len(lines)))])
        if step != "same":
            led.path.write_bytes(now)
        want = view(full_fold(led))
        fresh = foldsnap.current(led)  # a new process: the snapshot on disk, if it holds
        assert view(fresh.state) == want, step
        cached = foldsnap.current(led, cached)  # a long-lived one: its own fold, then the new lines
        assert view(cached.state) == want, step


# -- on_paths: the memories on a few paths, from the snapshot alone (the hooks, issue 20) ----------

def _anchored(led: Ledger) -> FoldState:
    """A ledger whose memories rest on files: kept, superseded away, retracted, under a folder."""
    from anchorfs.model import AnchorRef

    state = full_fold(led)
    now = utcnow()

    def on(*paths: str) -> tuple[AnchorRef, ...]:
        return tuple(AnchorRef(path=p, sha256="0" * 64) for p in paths)

    mems = [Memory(id=f"a{i}", content=f"about {p}", anchors=on(*p), recorded_at=now, valid_from=now)
            for i, p in enumerate([("auth/token.py",), ("auth/token.py", "README.md"), ("auth/keys/rsa.py",),
                                   ("README.md",), ("auth/token.py",), ("docs/auth/token.py",)])]
    mems.append(Memory(id="plain", content="unanchored", recorded_at=now, valid_from=now))
    for m in mems:
        write(led, state, "record", [m])
        state = full_fold(led)
    old = state["a0"]
    new = Memory(id="a0-new", content="moved on", anchors=on("other.py"), supersedes="a0", recorded_at=now,
                 valid_from=now)
    write(led, state, "supersede", [old.replace(status="superseded", superseded_by=new.id, valid_until=now), new])
    write(led, full_fold(led), "retract", [full_fold(led)["a4"].replace(status="retracted", valid_until=now)])
    return full_fold(led)


def _on(state: FoldState, paths: list[str]) -> list[Memory]:
    """What `Workspace.recheck` would check for `paths`, from the full fold."""
    def hit(p: str) -> bool:
        parts = p.split("/")
        return p in paths or any("/".join(parts[:i]) in paths for i in range(1, len(parts)))

    return [m for m in state.values() if m.status == "active" and any(hit(a.path) for a in m.anchors)]


def test_on_paths_gives_the_full_folds_memories_on_those_paths(led: Ledger) -> None:
    state = _anchored(led)
    assert foldsnap.on_paths(led, ["auth/token.py"]) is None  # no snapshot yet: the full fold decides
    foldsnap.current(led)
    settle()
    foldsnap.current(led)  # the prefix verified settled: trusted on the stat from now on
    for paths in (["auth/token.py"], ["README.md"], ["auth"], ["auth/token.py", "other.py"], ["nothing.py"], []):
        got = foldsnap.on_paths(led, paths)
        assert got is not None and got == _on(state, paths), paths  # the same memories, built the same
    assert [m.id for m in foldsnap.on_paths(led, ["auth/token.py"]) or []] == ["a1"]  # a0 superseded, a4 retracted


@pytest.mark.parametrize("change", ["grown", "body", "memory", "index", "plan", "folder", "link"])
def test_on_paths_never_trusts_a_snapshot_that_does_not_hold(led: Ledger, tmp_path: Path, change: str) -> None:
    state = _anchored(led)
    foldsnap.current(led)
    settle()
    foldsnap.current(led)
    path = foldsnap.snap_path(led)
    head, _, body = path.read_bytes().partition(b"\n")
    header = orjson.loads(head)
    if change == "grown":  # a memory recorded since: only the full fold has it
        write(led, state, "record", [Memory(id="late", content="late", anchors=state["a1"].anchors)])
    elif change == "body":  # a byte of a record on the path: its blake3 in the plan refuses it
        i = body.index(b"about ('auth/token.py', 'README.md')")
        path.write_bytes(head + b"\n" + body[:i] + b"A" + body[i + 1:])
    elif change == "memory":  # checksum right, the record on the path refused by the reader's rules
        lines = body.split(b"\n")
        n = next(i for i, line in enumerate(lines) if line.startswith(b'["a1"'))
        assert b'{"id":"a1"' in lines[n]
        lines[n] = lines[n].replace(b'{"id":"a1"', b'{"id":"a9"')  # the same length: the index still holds
        nb = b"\n".join(lines)
        import blake3

        path.write_bytes(orjson.dumps({**header, "size": len(nb), "body": blake3.blake3(nb).hexdigest()}) + b"\n" + nb)
    elif change == "index":  # both checksums right, the index's record starts one byte into each record
        _index_rewritten(path, lambda keys: {k: [[at + 1, *rest] for at, *rest in v] if k.startswith("p:") else v
                                             for k, v in keys.items()})
    elif change == "plan":  # a byte of the index's table flipped: its own checksum refuses it
        off, checked, _, _ = header["ix"]
        i = len(head) + 1 + off + checked - 3
        data = path.read_bytes()
        path.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1:])
    elif change == "folder":
        path.write_bytes(orjson.dumps({**header, "folder": [1, 2]}) + b"\n" + body)
    elif change == "link":
        outside = tmp_path / "outside.snap"
        shutil.copyfile(path, outside)
        path.unlink()
        path.symlink_to(outside)
    got = foldsnap.on_paths(led, ["auth/token.py"])
    want = _on(full_fold(led), ["auth/token.py"])
    if change == "grown":  # only grown: the line after the snapshot folded into its plan (`planoverlay`)
        assert got == want and [m.id for m in want] == ["a1", "late"]
    else:
        assert got is None
    assert want == _on(foldsnap.current(led).state, ["auth/token.py"])  # type: ignore[arg-type]


def _index_rewritten(path: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite the snapshot's index (format 7: the hooks read it, not the plan) as `edit` gives
    its keys back, every checksum made right again (a crafted file: only what the index names
    can be checked, by the records' own blake3 and the reader's rules)."""
    import blake3

    data = path.read_bytes()
    cut = data.index(b"\n")
    header = orjson.loads(data[:cut])
    p_off, p_size, _ = header["plan"]
    off, checked, size, _ = header["ix"]
    body = data[cut + 1:]
    old = body[off:off + size]
    ix_head = orjson.loads(old[:old.index(b"\n")])
    n = ix_head["b"]
    table = old[old.index(b"\n") + 1:checked]
    starts = [int.from_bytes(table[8 * h:8 * h + 8], "little") for h in range(n)]
    sizes = [int.from_bytes(table[8 * n + 4 * h:8 * n + 4 * h + 4], "little") for h in range(n)]
    keys = {k: v for h in range(n) for k, v in orjson.loads(old[checked + starts[h]:checked + starts[h] + sizes[h]])}
    new, new_checked, digest = foldsnap.index_bytes(edit(keys), ix_head["top"], ix_head["lines"])
    plan = body[p_off:off] + new
    nb = body[:p_off] + plan + body[p_off + p_size:]
    header.update(plan=[p_off, len(plan), foldsnap.plan_sum(plan, len(new))], ix=[off, new_checked, len(new), digest],
                  size=len(nb), body=blake3.blake3(nb).hexdigest())
    path.write_bytes(orjson.dumps(header) + b"\n" + nb)


def _plan_rewritten(path: Path, move: Callable[[int], int]) -> None:
    """Rewrite the snapshot's plan with each record start passed through `move`, both checksums
    made right again (a crafted file: only the plan's per-record blake3 can catch it)."""
    import blake3
    from array import array

    data = path.read_bytes()
    cut = data.index(b"\n")
    header = orjson.loads(data[:cut])
    off, size, _ = header["plan"]
    body = bytearray(data[cut + 1:])
    plan = body[off:off + size]
    line = plan.index(b"\n")
    n = orjson.loads(plan[:line])["n"]
    starts = array("Q", bytes(plan[line + 1:line + 1 + 8 * n]))
    plan[line + 1:line + 1 + 8 * n] = array("Q", [move(at) for at in starts]).tobytes()
    body[off:off + size] = plan
    header["plan"] = [off, size, foldsnap.plan_sum(bytes(plan), header["ix"][2])]
    header["body"] = blake3.blake3(bytes(body)).hexdigest()
    path.write_bytes(orjson.dumps(header) + b"\n" + bytes(body))


def _trusted(led: Ledger) -> None:
    foldsnap.current(led)
    settle()
    foldsnap.current(led)  # the prefix verified settled: trusted on the stat from now on


def test_on_paths_reads_only_the_records_of_those_paths(led: Ledger) -> None:
    """The hooks read the header, the plan and the few records they need, not the whole file:
    damage to a record on no asked path is not theirs to see (the full load refuses it); the
    damaged record, asked for, is refused by its blake3 in the plan."""
    state = _anchored(led)
    _trusted(led)
    path = foldsnap.snap_path(led)
    want = _on(state, ["auth/token.py"])
    assert [m.id for m in want] == ["a1"]
    assert foldsnap.on_paths(led, ["auth/token.py"]) == want
    data = path.read_bytes()
    # a byte of the record of a2 (auth/keys/rsa.py, not asked for) flipped, length kept
    mtime = path.stat().st_mtime_ns
    i = data.index(b"about ('auth/keys/rsa.py',)")
    path.write_bytes(data[:i] + b"A" + data[i + 1:])
    os.utime(path, ns=(mtime, mtime))
    assert foldsnap.on_paths(led, ["auth/token.py"]) == want  # a1's record untouched, checked alone
    assert foldsnap.on_paths(led, ["auth/keys/rsa.py"]) is None  # the damaged one, asked for: refused
    assert foldsnap.on_paths(led, ["auth"]) is None
    assert foldsnap.load(led) is None  # the whole file is refused by the full load
    assert view(foldsnap.current(led).state) == view(full_fold(led))  # and the fold is rebuilt from the ledger


@pytest.mark.parametrize("damage", ["shifted", "swapped", "owner"])
def test_on_paths_never_trusts_a_damaged_index(led: Ledger, damage: str) -> None:
    """An index whose checksums were made right but which names the wrong records (their starts
    moved, or start and hash both another memory's), or a memory that does not rest on the path
    asked: None (the full path), never a wrong answer."""
    state = _anchored(led)
    _trusted(led)
    path = foldsnap.snap_path(led)
    want = _on(state, ["auth/token.py"])
    assert foldsnap.on_paths(led, ["auth/token.py"]) == want

    def edit(keys: dict[str, Any]) -> dict[str, Any]:
        on = keys["p:auth/token.py"]
        a3 = keys["i:a3"]  # README.md's alone
        if damage == "shifted":  # the start moved to another record, its hash kept
            keys["p:auth/token.py"] = [[a3[0], s, mid] for _, s, mid in on]
        elif damage == "swapped":  # start and hash both a3's, under a1's id
            keys["p:auth/token.py"] = [[a3[0], a3[1], mid] for _, _, mid in on]
        else:  # a3 said to rest on auth/token.py: its record says otherwise
            keys["p:auth/token.py"] = [*on, [a3[0], a3[1], "a3"]]
        return keys

    _index_rewritten(path, edit)
    assert foldsnap.on_paths(led, ["auth/token.py"]) is None
    assert foldsnap.on_paths(led, ["README.md"]) == _on(state, ["README.md"])  # a bucket not crafted: still read
    assert view(foldsnap.current(led).state) == view(full_fold(led))


def test_on_paths_reads_the_index_not_the_plan(led: Ledger) -> None:
    """Format 7: a file the hook touched is looked up in the snapshot's index (its own checksum),
    so damage to the plan alone (checksums made right) does not reach its answer, which is the
    full fold's; a folder asked is still the plan's to list, and refused by its damage."""
    state = _anchored(led)
    _trusted(led)
    path = foldsnap.snap_path(led)
    _plan_rewritten(path, lambda at: at + 1)  # the plan's record starts one byte into each record
    for paths in (["auth/token.py"], ["README.md", "other.py"], ["nothing.py"], []):
        assert foldsnap.on_paths(led, paths) == _on(state, paths), paths
    assert foldsnap.on_paths(led, ["auth"]) is None  # a folder: the plan's paths walked, its damage refused
    data = path.read_bytes()
    header = orjson.loads(data[:data.index(b"\n")])
    off, checked, size, _ = header["ix"]
    i = data.index(b"\n") + 1 + off + checked + size // 2  # a byte inside the buckets: the one holding it refuses
    damaged = data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1:]
    path.write_bytes(damaged)
    got = {p: foldsnap.on_paths(led, [p]) for p in ("auth/token.py", "README.md", "auth/keys/rsa.py", "other.py")}
    assert all(m is None or m == _on(state, [p]) for p, m in got.items())  # never a wrong answer
    plan = foldsnap.read_plan(led)  # the plan's checksum leaves the index out: a drift pass neither reads nor hashes it
    assert plan is not None and plan.n == len([m for m in state.values() if m.status == "active" and m.anchors])
    plan.close()
    assert any(m is None for m in got.values()) or b'"p:' not in data[i - 200:i + 200]


@pytest.mark.parametrize("damage", ["shifted", "swapped", "owner"])
def test_on_paths_never_trusts_a_damaged_plan(led: Ledger, damage: str) -> None:
    """A plan whose checksums were made right but which names the wrong records, or a memory
    that does not rest on the path asked: None (the full path), never a wrong answer, where the
    plan is read (a folder asked)."""
    state = _anchored(led)
    _trusted(led)
    path = foldsnap.snap_path(led)
    order: list[int] = []

    def keep(at: int) -> int:
        order.append(at)
        return at

    _plan_rewritten(path, keep)  # the targets' record starts, as written
    if damage == "shifted":  # every start moved to the next target's record
        _plan_rewritten(path, lambda at: order[(order.index(at) + 1) % len(order)])
    elif damage == "swapped":  # the first two targets' records swapped
        _plan_rewritten(path, lambda at: {order[0]: order[1], order[1]: order[0]}.get(at, at))
    else:  # the plan says a3 (README.md only) rests on auth/token.py: its record says otherwise
        import blake3

        data = path.read_bytes()
        cut = data.index(b"\n")
        header = orjson.loads(data[:cut])
        off, size, _ = header["plan"]
        body = data[cut + 1:]
        plan = body[off:off + size]
        assert plan.count(b'"auth/token.py"') == 1 and plan.count(b'"README.md"') == 1
        swapped = plan.replace(b'"auth/token.py"', b'"X"').replace(b'"README.md"', b'"auth/token.py"')
        swapped = swapped.replace(b'"X"', b'"README.md"')
        nb = body[:off] + swapped + body[off + size:]
        header.update(plan=[off, len(swapped), foldsnap.plan_sum(swapped, header["ix"][2])], size=len(nb),
                      body=blake3.blake3(nb).hexdigest())
        path.write_bytes(orjson.dumps(header) + b"\n" + nb)
    assert foldsnap.on_paths(led, ["auth"]) is None
    assert foldsnap.on_paths(led, ["auth/token.py"]) == _on(state, ["auth/token.py"])  # the index: the plan unread
    assert _on(full_fold(led), ["auth/token.py"]) == _on(state, ["auth/token.py"])
    assert view(foldsnap.current(led).state) == view(full_fold(led))


@settings(max_examples=60, deadline=None)
@given(paths=st.lists(st.text("ab/", max_size=6), max_size=3), path=st.text("ab/", min_size=1, max_size=8))
def test_covered_by_is_a_path_or_a_folder_above_it(paths: list[str], path: str) -> None:
    """A path is covered by itself and by every folder above it (its leading parts), nothing else."""
    wanted = {p.strip("/") for p in paths if p.strip("/")}
    parts = path.split("/")
    want = path in wanted or any("/".join(parts[:i]) in wanted for i in range(1, len(parts)))
    assert foldsnap.covered_by(paths)(path) == want


def _grown_tail(led: Ledger) -> FoldState:
    """`_anchored`, its snapshot trusted, then lines after it: a new memory on auth/token.py, a1
    superseded by one on README.md, a2 (auth/keys/rsa.py) retracted, a3 reanchored onto
    auth/token.py. The full fold of all of it."""
    from anchorfs.model import AnchorRef

    state = _anchored(led)
    _trusted(led)
    now = utcnow()
    on = lambda *ps: tuple(AnchorRef(path=p, sha256="0" * 64) for p in ps)  # noqa: E731
    write(led, state, "record", [Memory(id="late", content="late", anchors=on("auth/token.py"), recorded_at=now,
                                        valid_from=now)])
    state = full_fold(led)
    a1 = state["a1"]
    new = Memory(id="a1-new", content="a1 corrected", anchors=on("README.md"), supersedes="a1", recorded_at=now,
                 valid_from=now)
    write(led, state, "supersede", [a1.replace(status="superseded", superseded_by=new.id, valid_until=now), new])
    state = full_fold(led)
    write(led, state, "retract", [state["a2"].replace(status="retracted", valid_until=now)])
    state = full_fold(led)
    write(led, state, "reanchor", [state["a3"].replace(anchors=on("auth/token.py"))])
    return full_fold(led)


def test_on_paths_folds_the_lines_since_the_snapshot_from_the_index(led: Ledger) -> None:
    """A ledger grown since the snapshot: the index's records of the memories the new lines
    touch, the lines folded into them, the rest as the index has them; the full fold's memories
    in its order, without the plan (damaged here, checksums made right: never read)."""
    state = _grown_tail(led)
    _plan_rewritten(foldsnap.snap_path(led), lambda at: at + 1)
    assert not catchup.settled(led, catchup.Prefix.from_dict(
        orjson.loads(foldsnap.snap_path(led).read_bytes().split(b"\n", 1)[0])["prefix"]))
    for paths in (["auth/token.py"], ["README.md"], ["auth/keys/rsa.py"], ["other.py", "README.md"], ["nothing.py"]):
        got = foldsnap.on_paths(led, paths)
        assert got == _on(state, paths), paths
    assert [m.id for m in foldsnap.on_paths(led, ["auth/token.py"]) or []] == ["a3", "late"]  # a1 left, a3 came
    assert [m.id for m in foldsnap.on_paths(led, ["README.md"]) or []] == ["a1-new"]  # a3 left, a1's successor
    assert foldsnap.on_paths(led, ["auth/keys/rsa.py"]) == []  # retracted since


@pytest.mark.parametrize("change", ["touched record", "prefix rewritten", "torn tail", "older seq"])
def test_on_paths_after_growth_never_trusts_what_does_not_hold(led: Ledger, change: str) -> None:
    """The lines since the snapshot taken only as `planoverlay` takes them: a touched memory's
    record that does not hash as the index says, a prefix that no longer holds (a byte changed
    before the snapshot's end, the size kept), a torn last line, a line whose `seq` is not above
    the snapshot's `top`: None, the full fold."""
    state = _grown_tail(led)
    path = foldsnap.snap_path(led)
    if change == "touched record":  # a1's record (touched by the supersede since) damaged, length kept
        data = path.read_bytes()
        mtime = path.stat().st_mtime_ns
        i = data.index(b"about ('auth/token.py', 'README.md')")
        path.write_bytes(data[:i] + b"A" + data[i + 1:])
        os.utime(path, ns=(mtime, mtime))
        assert foldsnap.on_paths(led, ["README.md"]) is None
    elif change == "prefix rewritten":
        data = bytearray(led.path.read_bytes())
        i = data.index(b"about ('README.md',)")
        data[i] = ord("A")
        led.path.write_bytes(bytes(data))
    elif change == "torn tail":
        with open(led.path, "ab") as f:
            f.write(b'{"op":"record","tx":"torn"')
    else:  # the first line again (a union merge of an old line)
        first = led.path.read_bytes().split(b"\n", 1)[0]
        with open(led.path, "ab") as f:
            f.write(first + b"\n")
    assert foldsnap.on_paths(led, ["auth/token.py"]) is None
    assert foldsnap.on_paths(led, ["nothing.py"]) is None  # the tail is folded whole, whatever the path asked
    assert _on(state, ["auth/token.py"]) == _on(full_fold(led), ["auth/token.py"]) or change != "touched record"


def _tail_file(led: Ledger) -> Path:
    return led.path.with_name("fold.tail")


def test_a_reader_that_verified_the_grown_ledger_leaves_its_stat_for_the_next(
        led: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook (`remember`) that checksummed the ledger's prefix leaves the stat it saw
    (`fold.tail`); the next reader, the ledger unchanged and settled, trusts it and reads only the
    lines after the snapshot: the same answer, without `catchup.follow`. A reader not asked to
    remember writes nothing."""
    state = _grown_tail(led)
    settle()  # the ledger's last write past the racy window when it is verified: a stat to trust
    want = _on(state, ["auth/token.py"])
    assert foldsnap.on_paths(led, ["auth/token.py"]) == want
    assert not _tail_file(led).exists()  # not asked to remember: nothing written
    assert foldsnap.on_paths(led, ["auth/token.py"], remember=True) == want
    assert _tail_file(led).is_file()
    follows: list[object] = []
    real = catchup.follow

    def counting(*a: Any, **k: Any) -> Any:
        follows.append(a)
        return real(*a, **k)

    monkeypatch.setattr(catchup, "follow", counting)
    for paths in (["auth/token.py"], ["README.md"], ["auth/keys/rsa.py"], ["nothing.py"]):
        assert foldsnap.on_paths(led, paths, remember=True) == _on(state, paths), paths
    assert follows == []  # the prefix trusted on the stat the last verification saw
    write(led, state, "record", [Memory(id="later", content="later", anchors=state["late"].anchors)])
    state = full_fold(led)  # the ledger's stat moved on: verified again
    assert foldsnap.on_paths(led, ["auth/token.py"], remember=True) == _on(state, ["auth/token.py"])
    assert len(follows) == 1 and [m.id for m in _on(state, ["auth/token.py"])] == ["a3", "late", "later"]


@pytest.mark.parametrize("change", ["rewritten", "another snapshot", "garbage", "link"])
def test_a_stale_or_foreign_tail_record_is_never_trusted(led: Ledger, tmp_path: Path, change: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`fold.tail` vouches only for the ledger with the very stat it names, next to the very
    snapshot it names: a ledger rewritten since (a byte changed before the snapshot's end, the
    size kept), a record naming another snapshot, a torn file, a link: the checksum again."""
    state = _grown_tail(led)
    settle()
    assert foldsnap.on_paths(led, ["auth/token.py"], remember=True) == _on(state, ["auth/token.py"])
    settle()
    tail = _tail_file(led)
    assert tail.is_file()
    follows: list[object] = []
    real = catchup.follow
    monkeypatch.setattr(catchup, "follow", lambda *a, **k: follows.append(a) or real(*a, **k))
    if change == "rewritten":  # the snapshot's prefix no longer holds: None (the full fold), never the old answer
        data = bytearray(led.path.read_bytes())
        i = data.index(b"about ('auth/token.py',)")
        data[i] = ord("A")
        led.path.write_bytes(bytes(data))
        settle()
        assert foldsnap.on_paths(led, ["auth/token.py"], remember=True) is None
        assert len(follows) == 1
        return
    if change == "another snapshot":  # the same stat, but said of another snapshot than this one
        d = orjson.loads(tail.read_bytes())
        d["snap"][-1] = "0" * 64
        mtime = tail.stat().st_mtime_ns
        tail.write_bytes(orjson.dumps(d))
        os.utime(tail, ns=(mtime, mtime))
    elif change == "garbage":
        tail.write_bytes(b'{"v":1,"snap":')
    else:
        outside = tmp_path / "outside.tail"
        shutil.copyfile(tail, outside)
        tail.unlink()
        tail.symlink_to(outside)
    assert foldsnap.on_paths(led, ["auth/token.py"], remember=True) == _on(full_fold(led), ["auth/token.py"])
    assert len(follows) == 1  # verified again
    if change == "link":
        assert tail.is_symlink()  # never read through, nor written over


def test_the_tail_record_is_a_state_file_git_ignores(tmp_path: Path) -> None:
    """`fold.tail` is derived: never committed, and refused as a link like every state file."""
    from anchorfs import snapindex
    from anchorfs.statefs import STATE_FILES

    anchorfs.init(tmp_path)
    assert snapindex.TAIL_FILE in STATE_FILES
    assert snapindex.TAIL_FILE in (tmp_path / ".anchorfs" / ".gitignore").read_text().splitlines()


class _NoScan:
    """`mmap.mmap` refused: a `mentioned` that scans the ledger says so."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import mmap

        self.scans = 0

        def refused(*a: Any, **k: Any) -> Any:
            self.scans += 1
            raise OSError("scanned")

        monkeypatch.setattr(mmap, "mmap", refused)


def test_mentioned_reads_the_index_where_the_snapshot_holds(led: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks' first question (is this path anchored at all?) from the snapshot's index while
    the snapshot holds, and from the lines after it as `fold.tail` vouches: the ledger is not
    scanned. A path only retired memories rested on is dropped (nothing active rests there)."""
    from anchorfs.hook_recheck import mentioned

    root = str(led.path.parent.parent)
    _anchored(led)
    _trusted(led)
    scans = _NoScan(monkeypatch)
    asked = ["auth/token.py", "README.md", "auth", "other.py", "nothing.py", "auth/keys/rsa.py", "docs/auth/token.py"]
    assert mentioned(root, asked) == ["auth/token.py", "README.md", "auth", "other.py", "auth/keys/rsa.py",
                                      "docs/auth/token.py"]
    assert scans.scans == 0
    state = full_fold(led)
    write(led, state, "record", [Memory(id="tail", content="t", anchors=(
        state["a1"].anchors[0].replace(path="new/file.py"),))])
    settle()
    assert foldsnap.on_paths(led, ["new/file.py"], remember=True) is not None  # a hook verified it: fold.tail
    assert mentioned(root, ["new/file.py", "nothing.py", "README.md"]) == ["new/file.py", "README.md"]
    assert scans.scans == 0


@pytest.mark.parametrize("change", ["rewritten", "no snapshot", "grown unvouched"])
def test_mentioned_scans_the_ledger_where_the_snapshot_does_not_hold(
        led: Ledger, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    from anchorfs.hook_recheck import mentioned

    root = str(led.path.parent.parent)
    state = _anchored(led)
    _trusted(led)
    if change == "rewritten":  # a path renamed in place, the size kept: the index says old things
        data = led.path.read_bytes().replace(b'"auth/keys/rsa.py"', b'"auth/keys/dsa.py"')
        led.path.write_bytes(data)
    elif change == "no snapshot":
        foldsnap.snap_path(led).unlink()
    else:
        write(led, state, "record", [Memory(id="tail", content="t", anchors=(
            state["a1"].anchors[0].replace(path="new/file.py"),))])
    settle()
    scans = _NoScan(monkeypatch)
    got = mentioned(root, ["auth/keys/dsa.py", "new/file.py", "nothing.py"])
    assert scans.scans == 1 and got == ["auth/keys/dsa.py", "new/file.py", "nothing.py"]  # the scan refused: all kept
    monkeypatch.undo()
    monkeypatch.setattr(foldsnap, "MIN_LINES", 0)
    want = {"rewritten": ["auth/keys/dsa.py"], "no snapshot": [], "grown unvouched": ["new/file.py"]}[change]
    assert mentioned(root, ["auth/keys/dsa.py", "new/file.py", "nothing.py"]) == want


def test_the_hooks_spell_the_snapshots_constants_as_their_owners_do() -> None:
    from anchorfs import hook_recheck
    from anchorfs.hashing import DEFAULT_GRANULARITY_NS

    assert (hook_recheck.SNAP_FORMAT, hook_recheck.SNAP_VERSION) == (foldsnap.FORMAT, foldsnap.VERSION)
    assert (hook_recheck.FINE_NS, hook_recheck.COARSE_NS) == (catchup.FINE_NS, DEFAULT_GRANULARITY_NS)


@pytest.mark.parametrize("ids, alone", [(["01m934qg8y83m851b3ckrtq71q"], True), ([f"{i:026d}" for i in range(7)], True),
                                        (["ab", "cde", "f"], False), (["é" * 13, "x" * 26], True), (["", ""], False),
                                        ([], False)], ids=["one", "ulids", "widths", "utf8", "empty", "none"])
def test_the_fold_ids_read_one_by_one_are_the_split_list(ids: list[str], alone: bool) -> None:
    """The plan's fold ids, each read off its bytes when asked for where all are of one width
    (`snapplan.FoldIds`), else split at once: the same list either way."""
    from types import SimpleNamespace

    from anchorfs.snapplan import FoldIds, SnapPlan

    blob = memoryview("\n".join(ids).encode())
    got = SnapPlan.fold_ids(SimpleNamespace(all_n=len(ids), _all_ids=blob))  # type: ignore[arg-type]
    assert isinstance(got, FoldIds) is alone
    assert len(got) == len(ids) and list(got) == ids and got[:] == ids
    assert [got[i] for i in range(-len(ids), len(ids))] == ids + ids
    with pytest.raises(IndexError):
        got[len(ids)]


@pytest.mark.parametrize("blob, n", [(b"ab\n\ncd", 2), (b"a\xff\nbc", 2), (b"abc", 2), (b"a\nb\ncde", 2)])
def test_fold_ids_that_do_not_read_one_per_memory_are_a_plan_mismatch(blob: bytes, n: int) -> None:
    """Read whole or one by one (the first id: a newline in its place, or not UTF-8)."""
    from types import SimpleNamespace

    from anchorfs.snapplan import PlanMismatch, SnapPlan

    with pytest.raises(PlanMismatch):
        list(SnapPlan.fold_ids(SimpleNamespace(all_n=n, _all_ids=memoryview(blob))))  # type: ignore[arg-type]
    with pytest.raises(PlanMismatch):
        SnapPlan.fold_ids(SimpleNamespace(all_n=n, _all_ids=memoryview(blob)))[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("paths, want, bad", [(["a.py"], [None], False), (["a.py", "b.py"], ["f" * 64, None], False),
                                              ([1], [None], True), ([""], [None], True), (["a.py"], [3], True),
                                              (["a.py", None], [None, None], True), ([["a.py"]], [None], True)])
def test_a_plan_names_each_file_by_a_path_and_a_hash_or_none(paths: list[Any], want: list[Any], bad: bool) -> None:
    """The plan line's paths are non-empty strings and their hashes strings or null; anything
    else is refused before any of it is used (a crafted plan under a valid checksum)."""
    from anchorfs.snapplan import SnapPlan

    line = orjson.dumps({"n": 0, "own_n": 0, "ids_size": 0, "paths": paths, "want": want})
    with pytest.raises((ValueError, KeyError)) as got:
        SnapPlan(-1, 0, 0, None, line + b"\n")  # type: ignore[arg-type]  # refused before the prefix is read
    assert (str(got.value) == "bad plan paths") is bad, got.value
