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
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anchorfs
from anchorfs.ledger import catchup, foldsnap
from anchorfs.ledger.catchup import Folded
from anchorfs.ledger.log import Entry, FoldState, Ledger, fold, stamped
from anchorfs.core.model import Memory, utcnow
from anchorfs.sdk.workspace import Workspace

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
    return (dict(state), heads, named, forks, state.top, state.in_conflict(), state.conflicting, state.redacted,
            state.open_conflicts())


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
    assert Path(foldsnap.snap_file(led)).is_file() and first.saved == want.lines
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
        Path(foldsnap.snap_file(led)).write_bytes(foldsnap.encode(Folded(prefix, lie), (folder.st_dev, folder.st_ino)))
        loaded = foldsnap.load(led)
        assert loaded is not None and view(loaded.folded.state) == view(lie)  # it parses: only its prefix is wrong
        served = foldsnap.current(led)
        assert view(served.state) == view(full_fold(led)) != view(lie)
        assert set(served.state).isdisjoint(lie)
        mended = foldsnap.load(led)  # written anew from the real fold
        assert mended is not None and view(mended.folded.state) == view(full_fold(led))


@pytest.mark.parametrize("damage", ["garbage", "empty", "torn", "version", "anchorfs", "body", "folder", "memory", "json"])
def test_a_damaged_snapshot_is_not_there(led: Ledger, damage: str) -> None:
    want = build(led)
    foldsnap.current(led)
    path = Path(foldsnap.snap_file(led))
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
    elif damage == "anchorfs":  # written by another anchorfs: an upgrade starts cold
        data = orjson.dumps({**header, "anchorfs": "0.0.1"}) + b"\n" + body
    elif damage == "body":  # a byte flipped in the body: its checksum says so
        i = body.index(b"fact")
        data = head + b"\n" + body[:i] + b"F" + body[i + 1:]
    elif damage == "folder":  # a copy from another state folder (a clone, `cp -r`)
        data = orjson.dumps({**header, "folder": [1, 2]}) + b"\n" + body
    elif damage == "memory":  # well-formed JSON with its checksum right, a memory of a shape no fold writes
        counts, view_line, rec, others = body.split(b"\n", 3)  # the counts, the drift view, the records
        bad = orjson.loads(rec)
        bad[1][0][6][6] = None  # a memory row without recorded_at: a shape no fold writes
        nb = counts + b"\n" + view_line + b"\n" + orjson.dumps(bad) + b"\n" + others
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
    shutil.copyfile(Path(foldsnap.snap_file(led)), outside)
    kept = outside.read_bytes()
    Path(foldsnap.snap_file(led)).unlink()
    Path(foldsnap.snap_file(led)).symlink_to(outside)
    assert foldsnap.load(led) is None
    write(led, want, "record", [Memory(id="after-link", content="x")])
    assert view(foldsnap.current(led).state) == view(full_fold(led))
    assert Path(foldsnap.snap_file(led)).is_symlink() and outside.read_bytes() == kept


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
    Path(foldsnap.snap_file(led)).unlink(missing_ok=True)
    with pytest.warns(UserWarning, match="bad line"):
        foldsnap.current(led)
    assert not Path(foldsnap.snap_file(led)).exists()
    with pytest.warns(UserWarning, match="bad line"):
        served = foldsnap.current(led)
    assert view(served.state) == view(full_fold(led))


def test_a_torn_tail_is_never_snapshotted_away(led: Ledger) -> None:
    build(led)
    with open(led.path, "ab") as fh:
        fh.write(b'{"v": 1, "tx": "torn')
    with pytest.warns(UserWarning, match="torn"):
        served = foldsnap.current(led)
    assert not Path(foldsnap.snap_file(led)).exists() and view(served.state) == view(full_fold(led))


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
    assert not Path(foldsnap.snap_file(led)).exists()  # read-only: nothing written in .anchorfs/
    settle()
    with Workspace(tmp_path) as w:
        listed = {m.id for m in w.list(status="all")}
    assert Path(foldsnap.snap_file(led)).exists()
    want = set(full_fold(led))
    parses = Parses(monkeypatch)
    with Workspace(tmp_path) as w:
        assert {m.id for m in w.list(status="all")} == listed == want
    assert parses.n == 0


def test_an_earlier_gitignore_learns_of_the_snapshot(led: Ledger) -> None:
    from anchorfs.core.statedir import _GITIGNORE_BEFORE

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
        with led.lock():  # a contradiction found at a write, and a redaction (issue 40)
            led.append([stamped(Entry.new("record", [Memory(id=f"{who}-says", content=f"{who} says 7 days")]),
                                full_fold(led)).replace(conflicts=(ids[2],))])
        write(led, full_fold(led), "redact", [full_fold(led)[f"{who}-note"].replace(content="[redacted]")])
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
    from anchorfs.core.model import AnchorRef

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


def _trusted(led: Ledger) -> None:
    foldsnap.current(led)
    settle()
    foldsnap.current(led)  # the prefix verified settled: trusted on the stat from now on


def _grown_tail(led: Ledger) -> FoldState:
    """`_anchored`, its snapshot trusted, then lines after it: a new memory on auth/token.py, a1
    superseded by one on README.md, a2 (auth/keys/rsa.py) retracted, a3 reanchored onto
    auth/token.py. The full fold of all of it."""
    from anchorfs.core.model import AnchorRef

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


class _NoScan:
    """`mmap.mmap` refused: a `mentioned` that scans the ledger says so."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import mmap

        self.scans = 0

        def refused(*a: Any, **k: Any) -> Any:
            self.scans += 1
            raise OSError("scanned")

        monkeypatch.setattr(mmap, "mmap", refused)




def _drift_answer(report: Any) -> tuple[Any, ...]:
    by_id = {md.memory.id: (md.drift.value, [c.to_dict() for c in md.checks]) for md in report.memories}
    return report.to_dict(), by_id, report.anchored_paths(), sorted(m.id for m in report.checked)


def test_a_new_process_drift_reads_the_snapshots_view_and_answers_as_the_fold(tmp_path: Path) -> None:
    """A pass from the drift view (no memory built but those on a changed file) gives the very
    report of a pass over the folded memories: stale, gone, fresh, retired, superseded, two
    memories on one file that disagree on its hash, claims `verify --mark` found stale."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("the docs\n")
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (root / "src" / name).write_text("".join(f"{name[0]}_{i} = {i}\n" for i in range(20)))
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("about a", anchors=["src/a.py"])
        ws.record("a line of a", anchors=["src/a.py:3"])
        before = ws.record("b as it was", anchors=["src/b.py"])
        (root / "src" / "b.py").write_text("changed before the second record\n")
        ws.record("b as it is", anchors=["src/b.py"])  # two memories that disagree on b's hash
        ws.record("c goes away", anchors=["src/c.py:2-3"])
        old = ws.record("d at first", anchors=["src/d.py"])
        ws.supersede(old.id, "d now", anchors=["src/d.py:5"])
        ws.retract(ws.record("retired", anchors=["src/a.py"]).id)
        ws.record("the runbook is docs/runbook.md.")  # unanchored: a claim `verify --mark` finds stale
        ws.record("src/a.py and docs/gone.md", anchors=["src/a.py:1"])
        ws.verify(mark=True)
    assert before.id
    (root / "src" / "a.py").write_text("".join(f"a_{i} = {i * 2}\n" for i in range(20)))
    (root / "src" / "c.py").unlink()
    settle()
    led = Workspace(root).ledger
    foldsnap.current(led)  # the snapshot written, then vouched for on the stat
    settle()
    foldsnap.current(led)
    assert foldsnap.drift_view(led) is not None
    twin = tmp_path / "twin"
    shutil.copytree(root, twin, symlinks=True)  # its snapshot another folder's: it folds
    paths = ["src/a.py", "src/c.py", "src"]
    seen: list[Any] = []
    for some in ([paths[0]], [paths[1]], [paths[2]]):
        settle()
        foldsnap.current(Workspace(root).ledger)  # vouched for again: the last re-check wrote drift.json only
        by_view, by_fold = Workspace(root), Workspace(twin)
        by_fold._memories()
        got = [(was, md.memory.id, md.drift.value) for was, md in by_view.recheck(some)]
        assert by_view._fold is None and foldsnap.drift_view(by_view.ledger) is not None
        assert got == [(was, md.memory.id, md.drift.value) for was, md in by_fold.recheck(some)]
        seen += got
    assert sorted(d for _, _, d in seen) == ["stale"] * 4  # a's two, c's, then b's older one under `src`
    settle()
    foldsnap.current(led)
    fresh_process = Workspace(root)
    from_view = fresh_process.drift()
    assert fresh_process._fold is None  # no fold was made for it
    folded = Workspace(root)
    folded._memories()
    from_fold = folded.drift()
    assert _drift_answer(from_view) == _drift_answer(from_fold)
    counts = from_view.to_dict()
    assert {md.memory.content: md.drift.value for md in from_view.memories} == {
        "about a": "stale", "a line of a": "stale", "b as it was": "stale", "b as it is": "fresh",
        "c goes away": "stale", "d now": "fresh", "src/a.py and docs/gone.md": "stale",
        "the runbook is docs/runbook.md.": "stale"}


def test_a_grown_ledger_has_no_view_to_offer(led: Ledger) -> None:
    """A record after the snapshot: its view is not the whole ledger, so drift folds."""
    state = build(led)
    foldsnap.current(led)
    settle()
    foldsnap.current(led)
    assert foldsnap.drift_view(led) is not None
    write(led, state, "record", [Memory(id="late", content="x")])
    assert foldsnap.drift_view(led) is None
