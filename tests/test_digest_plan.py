"""The session-start digest in a new process from the fold snapshot's plan (the active memories'
digest keys, the pass from the plan, only the shown records read): the same text, byte for
byte, as the digest from the full fold, with the snapshot whole and with lines after it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import anchorfs
from anchorfs import catchup, foldsnap
from anchorfs.digest import _digest
from anchorfs.ledger import Entry, Ledger, stamped
from anchorfs.model import StaleClaim, utcnow
from anchorfs.workspace import Workspace

pytestmark = pytest.mark.usefixtures("no_racy_window")

BODY = "def keep():\n    return 1\n\n\ndef issue():\n    return 24\n"


@pytest.fixture(autouse=True)
def _snapshots_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foldsnap, "MIN_LINES", 10**9)


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    old = os.stat(root / rel).st_mtime_ns - 3600 * 10**9
    os.utime(root / rel, ns=(old, old))


def snapshot(root: Path) -> None:
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    ledger = Ledger(root / ".anchorfs")
    assert foldsnap.save(ledger, foldsnap.current(ledger, write=False))
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)  # the ledger settled on its stat


def both(root: Path, limit: int) -> tuple[str, str]:
    """The digest from the plan (asserted taken) and from the full fold, from the same drift.json."""
    path = root / ".anchorfs" / "drift.json"
    before = path.read_bytes() if path.exists() else None
    with Workspace(root) as ws:
        planned = _digest(ws, limit)[0]
        assert ws._fold is None, "the full fold was taken"
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)
    with Workspace(root) as ws:
        ws._memories()
        full = _digest(ws, limit)[0]
    return planned, full


def _mark(ws: Workspace, mid: str) -> None:
    with ws.ledger.lock():
        state = ws._memories()
        claim = StaleClaim("path", "docs/x.md", "no such file", utcnow())
        ws.ledger.append([stamped(Entry.new("mark", [state[mid].replace(stale_claims=(claim,))]), state)])


@pytest.mark.parametrize("tail", [False, True])
def test_the_digest_from_the_plan_is_the_full_folds_byte_for_byte(tmp_path: Path, tail: bool) -> None:
    root = tmp_path / "ws"
    for name in "abcdef":
        write(root, f"src/{name}.py", BODY.replace("24", name))
    anchorfs.init(root)
    with Workspace(root) as ws:
        mems = ws.record_many([{"content": f"fact {i} " + "long words " * (i % 5), "kind": kind,
                                "anchors": anchors}
                               for i, (kind, anchors) in enumerate(
                                   [("decision", ["src/a.py"]), ("note", ["src/b.py", "src/a.py#issue"]),
                                    ("constraint", ["src/c.py:5-6"]), ("note", []), ("goal", ["src/d.py"]),
                                    ("preference", []), ("note", ["src/e.py"]), ("reference", ["src/f.py"])] * 3)])
        ws.reanchor(mems[4].id)  # verified_at later than its recorded_at
        _mark(ws, mems[3].id)
        ws.retract(mems[7].id)
    snapshot(root)
    if tail:
        with Workspace(root) as ws:
            ws.record("after the snapshot, on b", anchors=["src/b.py"])
            ws.record("after the snapshot, unanchored", kind="decision")
            ws.supersede(mems[0].id, "fact 0, corrected", anchors=["src/a.py"])
            ws.retract(mems[9].id)
            _mark(ws, mems[11].id)
        time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    write(root, "src/b.py", "changed\n")  # stale
    (root / "src/e.py").unlink()  # stale (deleted)
    (root / "src/f.py").unlink()
    os.symlink("/etc/hostname", root / "src/f.py")  # a link out of the root: unsafe, unknown
    for limit in (300, 2000, 100_000):
        planned, full = both(root, limit)
        assert planned == full, limit
        assert planned.startswith("anchorfs memories of this repository")
    assert "Stale:" in full and "Unknown:" in full and "Fresh, most recently recorded first" in full


def test_no_active_memory_says_nothing_from_the_plan(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "src/a.py", BODY)
    anchorfs.init(root)
    with Workspace(root) as ws:
        m = ws.record("only one", anchors=["src/a.py"])
        ws.retract(m.id)
    snapshot(root)
    assert both(root, 2000) == ("", "")


def test_a_shown_record_not_as_the_plan_says_takes_the_full_fold(tmp_path: Path) -> None:
    """A record the digest shows, changed in the snapshot after its plan was written: refused by
    its blake3 in the plan; the digest is the full fold's (from the ledger), never the forged text."""
    root = tmp_path / "ws"
    write(root, "src/a.py", BODY)
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": "anchored one", "anchors": ["src/a.py"]}, {"content": "the unanchored one"}])
    snapshot(root)
    path = foldsnap.snap_path(Ledger(root / ".anchorfs"))
    data = path.read_bytes()
    i = data.rindex(b"the unanchored one")
    st = os.stat(path)
    path.write_bytes(data[:i] + b"THE" + data[i + 3:])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with Workspace(root) as ws:
        got = _digest(ws, 2000)[0]
        assert ws._fold is not None  # the full fold decided
    assert "the unanchored one" in got and "THE unanchored" not in got
    with Workspace(root) as ws:
        ws._memories()
        assert _digest(ws, 2000)[0] == got


def _workspace(root: Path, n: int, *, tail: bool) -> list[str]:
    """`n` active memories over six files (anchored, unanchored, ties on time and anchor count),
    a snapshot, optionally lines after it; then two files stale and one a link out (unknown)."""
    for name in "abcdef":
        write(root, f"src/{name}.py", BODY.replace("24", name))
    anchorfs.init(root)
    specs = [["src/a.py"], ["src/b.py", "src/a.py#issue"], ["src/c.py:5-6"], [], ["src/d.py"], [], ["src/e.py"],
             ["src/f.py"], ["src/a.py#keep", "src/c.py"]]
    kinds = ["decision", "note", "constraint", "note", "goal", "preference", "note", "reference"]
    with Workspace(root) as ws:
        ids = []
        for start in range(0, n, 37):  # batches: many memories share a time, broken by anchor count then id
            batch = ws.record_many([{"content": f"fact {i} " + "words " * (i % 7), "kind": kinds[i % len(kinds)],
                                     "anchors": specs[i % len(specs)]} for i in range(start, min(n, start + 37))])
            ids += [m.id for m in batch]
        for i in range(2, n, 11):
            if specs[i % len(specs)]:
                ws.reanchor(ids[i])
        if len(ids) > 5:
            _mark(ws, ids[3])
            ws.retract(ids[5])
    snapshot(root)
    if tail:
        with Workspace(root) as ws:
            ws.record("after the snapshot, on b", anchors=["src/b.py"])
            ws.record("after the snapshot, unanchored", kind="decision")
            ws.supersede(ids[0], "fact 0, corrected", anchors=["src/a.py"])
            if len(ids) > 9:
                ws.retract(ids[9])
                ws.reanchor(ids[8])
        time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    write(root, "src/b.py", "changed\n")
    (root / "src/e.py").unlink()
    (root / "src/f.py").unlink()
    os.symlink("/etc/hostname", root / "src/f.py")
    return ids


@pytest.mark.parametrize("tail", [False, True])
def test_the_plans_digest_keys_are_the_full_folds(tmp_path: Path, tail: bool) -> None:
    """Every active memory's key (id, time, anchor count, kind) in columns from the plan, the
    snapshot whole and with a tail folded in: the full fold's, and each one read is its memory."""
    from anchorfs.snapplan import read_plan

    root = tmp_path / "ws"
    _workspace(root, 60, tail=tail)
    with Workspace(root) as ws:
        full = {m.id: m for m in ws.list(status="active")}
    plan = read_plan(Ledger(root / ".anchorfs"))
    assert plan is not None and (type(plan).__name__ == "OverlayPlan") is tail
    try:
        ids, ts, na, kind, kinds, read = plan.active_keys()
        assert sorted(ids) == sorted(full) and len(ids) == len(ts) == len(na) == len(kind)
        for i, mid in enumerate(ids):
            m = full[mid]
            assert (ts[i], na[i], kinds[kind[i]]) == ((m.verified_at or m.recorded_at).timestamp(), len(m.anchors),
                                                      m.kind)
        for i in (0, len(ids) // 2, len(ids) - 1):
            assert read(i) == full[ids[i]]
    finally:
        plan.close()


@pytest.mark.parametrize("n", [1, 6, 60, 250])
@pytest.mark.parametrize("tail", [False, True])
def test_the_digest_from_the_plan_is_the_full_folds_at_every_size(tmp_path: Path, n: int, tail: bool) -> None:
    """Stale, unknown and fresh memories at several sizes, the cap hit (300, 2,000) and not
    (1,000,000 characters): the same text byte for byte from the plan as from the full fold."""
    root = tmp_path / "ws"
    _workspace(root, n, tail=tail)
    for limit in (300, 2000, 1_000_000):
        planned, full = both(root, limit)
        assert planned == full, limit
        assert planned.startswith("anchorfs memories of this repository")
        if limit == 1_000_000:
            assert "more not shown" not in full
            with Workspace(root) as ws:
                assert full.count("\n- ") == len(ws.list(status="active"))
        elif n >= 60:
            assert "more not shown" in full


@pytest.mark.parametrize("seed", range(6))
def test_the_digest_order_is_the_sort_by_time_anchors_and_id(seed: int) -> None:
    """`_Keys.newest`, run by run of equal times, gives the order of the full sort on (newest
    time, most anchors, id), the skipped ids left out: many ties, few, none."""
    import random

    from anchorfs.digest import _Keys

    rng = random.Random(seed)
    n = rng.choice([1, 2, 17, 300, 2000])
    spread = rng.choice([1, 3, 50, 10**6])
    ids = rng.sample([f"01m{i:07d}" for i in range(10 * n)], n)
    ts = [1.7e9 + rng.randrange(spread) * 0.25 for _ in range(n)]
    na = [rng.randrange(rng.choice([1, 3])) for _ in range(n)]
    skip = set(rng.sample(ids, n // 7))
    want = [i for i in sorted(range(n), key=lambda i: (-ts[i], -na[i], ids[i])) if ids[i] not in skip]
    from anchorfs.snapplan import FoldIds

    as_plan = FoldIds(memoryview("\n".join(ids).encode()), n, len(ids[0]))  # each read alone, or all in one go
    for form in (ids, as_plan):
        keys = _Keys(form, ts, na, [0] * n, ["note"], lambda i: None)  # type: ignore[arg-type,return-value]
        assert list(keys.newest(skip)) == want


@pytest.mark.parametrize("seed", range(4))
def test_the_memos_deadline_is_the_first_envelope_to_change(tmp_path: Path, seed: int) -> None:
    """`_envelopes_until` over the keys: the earliest of each memory's expiry (or, past it, its
    next whole day), one kind or several, none expired or some."""
    import random

    from anchorfs.digest import _Keys
    from anchorfs.digest_memo import _envelopes_until

    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    day = 86400.0
    now = time.time()
    kinds = ["note", "decision", "constraint"][: rng.choice([1, 3])]
    n = rng.choice([1, 5, 400])
    with Workspace(root) as ws:
        expiry = {k: ws.config.expiry_days(k) * day for k in kinds}
        reach = max(expiry.values()) * rng.choice([0.5, 3.0])
        ts = [now - rng.random() * reach for _ in range(n)]
        kind = [rng.randrange(len(kinds)) for _ in range(n)]
        want = min(since + expiry[kinds[k]] if now <= since + expiry[kinds[k]]
                   else since + (int((now - since) / day) + 1) * day for since, k in zip(ts, kind))
        keys = _Keys([str(i) for i in range(n)], ts, [1] * n, kind, kinds, lambda i: None)  # type: ignore[arg-type,return-value]
        assert _envelopes_until(ws, keys, now) == want


def test_fresh_lines_are_the_passs_own_results_not_checked_again(tmp_path: Path,
                                                                  count_checks: Callable[[], list[str]]) -> None:
    """Each fresh line of the digest reads what the drift pass found for its memory: unchanged
    anchors, a file moved away (its new place named), a symbol whose file changed elsewhere,
    each the envelope of a check of that memory on its own, and no anchor checked a second
    time (at 10,000 memories each shown fresh line was a checker and a probe of its files)."""
    from anchorfs.envelopes import envelope

    root = tmp_path
    write(root, "src/a.py", BODY)
    write(root, "src/b.py", BODY.replace("24", "25"))
    write(root, "src/c.py", "X = 1\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        kept = ws.record("keep returns one", anchors=["src/a.py#keep"])
        moved = ws.record("c holds X", anchors=["src/c.py"])
        edited = ws.record("b keeps one too", anchors=["src/b.py#keep"])
        plain = ws.record("a note without anchors")
    os.rename(root / "src/c.py", root / "src/d.py")
    write(root, "src/b.py", BODY.replace("24", "26"))  # `issue` changed: `keep` still holds
    with Workspace(root) as ws:
        report = ws.drift()
        assert report.count(anchorfs.model.Drift.FRESH) == 3
        want = {}
        for m in (kept, moved, edited):
            md = ws.check(m)
            want[m.id] = envelope(m, md.drift, md.checks, expiry_days=ws.config.expiry_days(m.kind))
        assert "now at src/d.py" in want[moved.id], want[moved.id]
        calls = count_checks()
        text = _digest(ws, 4000)[0]
    assert sorted(calls) == sorted([moved.id, edited.id])  # the pass's own, once each; `kept` hashed as recorded
    for mid, env in want.items():
        assert f"- {mid} {env} " in text, (env, text)
    assert f"- {plain.id} [unanchored" in text
