"""The drift plan after the ledger grew: the lines appended since the fold snapshot folded into
its plan (`anchorfs.planoverlay`), with the full path's answers (`ws.drift()` and `on_paths`),
and the full fold whenever a tail cannot be taken exactly (a union merge's older lines, a torn
or bad last line, a fork, a record that does not hash as the plan says)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anchorfs
from anchorfs import catchup, foldsnap
from anchorfs.drift import DriftReport
from anchorfs.ledger import Entry, Ledger, stamped
from anchorfs.model import Memory, StaleClaim, utcnow
from anchorfs.planoverlay import OverlayPlan
from anchorfs.workspace import Workspace

pytestmark = pytest.mark.usefixtures("no_racy_window")


@pytest.fixture(autouse=True)
def _snapshots_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No snapshot is written but by `snapshot` (writes after it leave it as it is: a tail)."""
    monkeypatch.setattr(foldsnap, "MIN_LINES", 10**9)


def backdate(path: Path) -> None:
    old = os.stat(path).st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(old, old))


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    backdate(root / rel)


def snapshot(root: Path) -> None:
    """The fold snapshot written now, settled (its plan trusted on the stat)."""
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    ledger = Ledger(root / ".anchorfs")
    folded = foldsnap.current(ledger, write=False)
    assert foldsnap.save(ledger, folded)
    plan = foldsnap.read_plan(ledger)
    assert plan is not None and not isinstance(plan, OverlayPlan)
    plan.close()


def answers(report: DriftReport) -> tuple[Any, ...]:
    return (report.to_dict(every=True), [r.to_dict() for r in report.flagged], [r.memory.id for r in report.stale],
            [(r.memory, r.drift, r.checks) for r in report.memories], len(report.checked), list(report.checked),
            report.anchored_paths(), sorted(report.paths_now()))


def full(root: Path) -> DriftReport:
    with Workspace(root) as ws:
        ws._memories()
        return ws.drift()


def drift_json(root: Path) -> Any:
    path = root / ".anchorfs" / "drift.json"
    return orjson.loads(path.read_bytes()) if path.exists() else None


def on_paths_full(root: Path, paths: list[str]) -> list[Memory]:
    hit = foldsnap.covered_by(paths)
    with Workspace(root) as ws:
        return [m for m in ws._memories().values()
                if m.status == "active" and any(hit(a.path) for a in m.anchors)]


def compare(root: Path, *, overlaid: bool = True, grown: bool = True) -> tuple[Any, ...]:
    """The plan path and the full path from the same drift.json: their answers, what each wrote,
    and the hooks' records per path; `overlaid`: whether the plan path must have been taken (an
    overlay when the ledger `grown` since the snapshot, else the plan alone)."""
    ledger = Ledger(root / ".anchorfs")
    plan = foldsnap.read_plan(ledger)
    assert (plan is not None) is overlaid, "the plan was taken" if plan is not None else "the full fold was taken"
    if plan is not None:
        assert isinstance(plan, OverlayPlan) is grown
        plan.close()
    path = root / ".anchorfs" / "drift.json"
    before = path.read_bytes() if path.exists() else None
    ws = Workspace(root)
    report = ws.drift()
    assert (ws._fold is None and ws.__dict__.get("_planned") is not None) is overlaid
    got = answers(report), drift_json(root)
    ws.close()
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)
    want = answers(full(root)), drift_json(root)
    assert got == want
    with Workspace(root) as w:
        files = sorted({a.path for m in w._memories().values() for a in m.anchors}) + ["d0", "nowhere.py"]
    for rel in files:
        got_on = foldsnap.on_paths(ledger, [rel])
        assert (got_on is not None) is overlaid
        if got_on is not None:
            assert got_on == on_paths_full(root, [rel]), rel
    return want


BODY = "def keep():\n    return 1\n\n\ndef issue():\n    return 24\n"


def _base(root: Path) -> list[Memory]:
    for name in "abc":
        write(root, f"src/{name}.py", BODY.replace("24", name))
    anchorfs.init(root)
    with Workspace(root) as ws:
        return ws.record_many([{"content": "a holds", "anchors": ["src/a.py"]},
                               {"content": "b and a", "anchors": ["src/b.py", "src/a.py#issue"]},
                               {"content": "c lines", "anchors": ["src/c.py:5-6"]},
                               {"content": "unanchored"}])


def test_one_record_after_the_snapshot_keeps_the_plan(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    mems = _base(root)
    snapshot(root)
    with Workspace(root) as ws:
        new = ws.record("one more on b", anchors=["src/b.py"])
    write(root, "src/b.py", "changed\n")
    want = compare(root)
    drifts = {m["id"]: m["drift"] for m in want[0][0]["memories"]}
    assert drifts[new.id] == "stale" and drifts[mems[1].id] == "stale" and drifts[mems[0].id] == "fresh"
    assert want[0][4] == 4


def test_supersede_retract_reanchor_and_mark_after_the_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    mems = _base(root)
    with Workspace(root) as ws:
        prop = ws.record("proposed on c", anchors=["src/c.py"], propose=True)
        gone = ws.record("retracted then back", anchors=["src/a.py"])
        ws.retract(gone.id)
    snapshot(root)
    write(root, "src/a.py", BODY.replace("24", "A"))
    with Workspace(root) as ws:
        ws.supersede(mems[0].id, "a holds, corrected", anchors=["src/a.py"])  # the first on a.py leaves it
        ws.reanchor(mems[2].id, anchors=["src/a.py", "src/c.py"])
        ws.accept(prop.id)  # a memory of the snapshot joins the targets in the middle
        ws.revert(gone.id)
        _mark(ws, mems[3].id)
        _mark(ws, mems[1].id)
    compare(root)
    write(root, "src/c.py", "gone\n")
    compare(root)


def _mark(ws: Workspace, mid: str) -> None:
    """A `mark` entry as `verify --mark` writes it."""
    with ws.ledger.lock():
        state = ws._memories()
        m = state[mid]
        claim = StaleClaim("path", "docs/x.md", "no such file", utcnow())
        entry = stamped(Entry.new("mark", [m.replace(stale_claims=(claim,))]), state)
        ws.ledger.append([entry])
    ws._fold = None


def _lines(root: Path) -> list[bytes]:
    return (root / ".anchorfs" / "ledger.jsonl").read_bytes().splitlines(keepends=True)


def _append(root: Path, data: bytes) -> None:
    with open(root / ".anchorfs" / "ledger.jsonl", "ab") as f:
        f.write(data)


@pytest.mark.parametrize("tail", ["older line again", "earlier seq rewritten", "torn last line", "bad line",
                                  "no seq", "fork", "record not as planned"])
def test_a_tail_that_cannot_be_taken_exactly_takes_the_full_fold(tmp_path: Path, tail: str) -> None:
    root = tmp_path / "ws"
    mems = _base(root)
    snapshot(root)
    with Workspace(root) as ws:
        ws.record("after the snapshot", anchors=["src/a.py"])
    lines = _lines(root)
    if tail == "older line again":  # a union merge appends the other side's lines, older ones too
        _append(root, lines[0])
    elif tail == "earlier seq rewritten":  # a line forged to stand where an earlier one does
        d = orjson.loads(lines[0])
        d["tx"] = "forged"
        d["memories"][0]["content"] = "not what was recorded"
        _append(root, orjson.dumps(d) + b"\n")
    elif tail == "torn last line":
        _append(root, lines[-1][:40])
    elif tail == "bad line":
        _append(root, b'{"v": 1, "tx": 3}\n')
    elif tail == "no seq":  # an earlier version's line ranks below every new one
        d = orjson.loads(lines[-1])
        d.pop("seq"), d.pop("deps")
        d["tx"] = "old-style"
        d["memories"][0]["id"] = "m-old-style"
        _append(root, orjson.dumps(d) + b"\n")
    elif tail == "fork":  # two clones each superseded the same memory: two heads
        with Workspace(root) as ws:
            state = ws._memories()
            m = state[mems[0].id]
            a = stamped(Entry.new("retract", [m.replace(status="retracted")]), state)
            b = stamped(Entry.new("reanchor", [m.replace(content="a holds, clone b")]), state)
            ws.ledger.append([a, b])
    elif tail == "record not as planned":  # the snapshot's record of a touched memory changed
        path = foldsnap.snap_path(Ledger(root / ".anchorfs"))
        data = path.read_bytes()
        i = data.rindex(b"a holds")
        st_ = os.stat(path)
        path.write_bytes(data[:i] + b"A" + data[i + 1:])
        os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))
        with Workspace(root) as ws:
            ws.retract(mems[0].id)
    compare(root, overlaid=False)


@pytest.mark.parametrize("forged", ["tail tx", "snapshot tx"])
def test_a_tail_line_forged_to_collide_counts_as_the_line_it_repeats(tmp_path: Path, forged: str) -> None:
    """A line under the tx of one already taken in (after the snapshot, or in it), with a higher
    seq and other text: `FoldState.apply` drops it as a line seen twice, and so does the overlay."""
    root = tmp_path / "ws"
    mems = _base(root)
    snapshot(root)
    with Workspace(root) as ws:
        ws.record("after the snapshot", anchors=["src/a.py"])
    lines = _lines(root)
    d = orjson.loads(lines[-1] if forged == "tail tx" else lines[0])
    d["seq"] = 99
    d["memories"][0]["content"] = "not what was recorded"
    d["memories"][0]["anchors"] = []
    _append(root, orjson.dumps(d) + b"\n")
    want = compare(root)
    assert want[0][4] == 4 and mems[0].id in {m.id for m in want[0][5]}
    assert "not what was recorded" not in str(want)


def test_a_line_seen_twice_in_the_tail_counts_once(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _base(root)
    snapshot(root)
    with Workspace(root) as ws:
        ws.record("after the snapshot", anchors=["src/a.py"])
    _append(root, _lines(root)[-1])  # a union merge of two clones that both took this line
    want = compare(root)
    assert want[0][4] == 4


FILES = [f"d{i % 2}/f{i}.py" for i in range(4)]
TEXT = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
OPS = ["record", "record", "record none", "record two", "propose", "supersede", "retract", "reanchor", "revert",
       "accept", "reject", "mark", "again"]


def _op(ws: Workspace, data: st.DataObject, op: str, ids: list[str]) -> None:
    state = ws._memories()
    pick = data.draw(st.sampled_from(ids)) if ids else None
    spec = st.tuples(st.sampled_from(FILES), st.sampled_from(["", "#a", "#b", ":1-2", ":5-6"])).map("".join)
    m = state.get(pick) if pick else None
    try:
        if op.startswith("record") or op == "propose":
            anchors = [] if op == "record none" else data.draw(st.lists(spec, min_size=1, max_size=2 if op == "record two" else 1))
            got = ws.record(f"fact {len(ids)}", anchors=anchors, propose=op == "propose")
            ids.append(got.id)
        elif m is None:
            return
        elif op == "supersede":
            got = ws.supersede(m.id, f"{m.content}, corrected", anchors=[data.draw(spec)])
            ids.append(got.id)
        elif op == "retract":
            ws.retract(m.id)
        elif op == "reanchor":
            ws.reanchor(m.id, anchors=[data.draw(spec)])
        elif op == "revert":
            ws.revert(m.id)
        elif op == "accept":
            ws.accept(m.id)
        elif op == "reject":
            ws.reject(m.id)
        elif op == "mark" and m.status == "active":
            _mark(ws, m.id)
        elif op == "again":  # the ledger's last line appended again (a union merge of it)
            _append(Path(ws.root), _lines(Path(ws.root))[-1])
            ws._fold = None
    except anchorfs.AnchorfsError:
        pass


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_overlay_equals_the_full_fold(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    root = tmp_path_factory.mktemp("prop") / "ws"
    for rel in FILES:
        write(root, rel, TEXT)
    anchorfs.init(root)
    ids: list[str] = []
    with Workspace(root) as ws:
        for op in data.draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=10)):
            _op(ws, data, op, ids)
    if not ids:
        return
    snapshot(root)
    cut = len(_lines(root))
    with Workspace(root) as ws:
        for op in data.draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=8)):
            _op(ws, data, op, ids)
    lines = [orjson.loads(line) for line in _lines(root)]
    top = max(d["seq"] for d in lines[:cut])
    older = any(d["seq"] <= top for d in lines[cut:])  # "again" of a line from before the snapshot
    for rel in FILES:
        change = data.draw(st.sampled_from(["keep", "keep", "edit", "edit b", "delete"]))
        if change == "edit":
            write(root, rel, TEXT + "# more\n")
        elif change == "edit b":
            write(root, rel, TEXT.replace("return 2", "return 3"))
        elif change == "delete":
            (root / rel).unlink()
    if data.draw(st.booleans()):
        full(root)  # drift.json as a pass before this one left it
    compare(root, overlaid=not older, grown=len(lines) > cut)


def test_a_path_whose_first_memory_left_takes_its_place_from_the_next(tmp_path: Path) -> None:
    """The paths in order of first use (`anchored_paths`, the memo's order) after the first
    memory on a file leaves: the next one on it now places it, by its own anchors' order."""
    root = tmp_path / "ws"
    for name in "xyzw":
        write(root, f"src/{name}.py", BODY.replace("24", name))
    anchorfs.init(root)
    with Workspace(root) as ws:
        first, _, _ = ws.record_many([{"content": "on x", "anchors": ["src/x.py"]},
                                      {"content": "on w", "anchors": ["src/w.py"]},
                                      {"content": "on y then x", "anchors": ["src/y.py", "src/z.py", "src/x.py"]}])
    snapshot(root)
    with Workspace(root) as ws:
        ws.retract(first.id)
    want = compare(root)
    assert want[0][6] == ["src/w.py", "src/y.py", "src/z.py", "src/x.py"]
