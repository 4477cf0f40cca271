"""`ws.drift()` in a new process from the fold snapshot's plan (`anchorfs.driftplan`).

The lazy path must answer as the full fold does, value for value (counts, flagged, stale, every
memory's result, drift.json's write-back), build a memory only where a file failed, and never
trust a plan that does not hold: torn, crafted, of another folder or version, a ledger moved
since, a record that does not hash as its plan says. Each of those falls back to the full fold.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import blake3
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

import anchorfs
from anchorfs import catchup, foldsnap
from anchorfs.drift import DriftReport
from anchorfs.errors import AnchorfsError, WorkspaceError
from anchorfs.ledger import Ledger
from anchorfs.model import Memory
from anchorfs.workspace import Workspace

from conftest import git

pytestmark = pytest.mark.usefixtures("no_racy_window")


@pytest.fixture(autouse=True)
def _small_ledgers_snapshotted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small ledgers are snapshotted too, so every case here has a plan on disk."""
    monkeypatch.setattr(foldsnap, "MIN_LINES", 0)


def settle() -> None:
    """Past the ledger's racy window (`catchup.FINE_NS`): a snapshot taken now is trusted on the stat."""
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)


def backdate(path: Path) -> None:
    old = os.stat(path).st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(old, old))


def snapshot(root: Path) -> None:
    """The fold snapshot written, with its plan, as a quiet while after the last write leaves it."""
    settle()
    with Workspace(root) as w:
        w._memories()
    plan = foldsnap.read_plan(Ledger(root / ".anchorfs"))
    assert plan is not None
    plan.close()


def answers(report: DriftReport) -> tuple[Any, ...]:
    """Everything a caller can read off a report."""
    return (report.to_dict(every=True), report.to_dict(), [r.to_dict() for r in report.flagged],
            [r.memory.id for r in report.stale], [(r.memory, r.drift, r.checks) for r in report.memories],
            len(report.checked), list(report.checked), report.anchored_paths(), sorted(report.paths_now()))


def lazy(root: Path) -> tuple[DriftReport, Workspace]:
    ws = Workspace(root)
    report = ws.drift()
    assert ws._fold is None and ws.__dict__.get("_planned") is not None, "the full fold was taken"
    return report, ws


def full(root: Path) -> DriftReport:
    with Workspace(root) as ws:
        ws._memories()  # a workspace that has folded the ledger takes the full path
        return ws.drift()


def drift_json(root: Path) -> Any:
    path = root / ".anchorfs" / "drift.json"
    return orjson.loads(path.read_bytes()) if path.exists() else None


def compare(root: Path) -> tuple[Any, ...]:
    """The lazy path and the full one from the same drift.json: their answers and what each wrote."""
    path = root / ".anchorfs" / "drift.json"
    before = path.read_bytes() if path.exists() else None
    report, ws = lazy(root)
    got = answers(report), drift_json(root)
    ws.close()
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)
    want = answers(full(root)), drift_json(root)
    assert got == want
    return want


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    backdate(root / rel)


def test_the_lazy_pass_answers_as_the_full_fold_in_every_case(git_repo: Path) -> None:
    root = git_repo
    body = "def keep():\n    return 1\n\n\ndef issue():\n    return 24\n"
    for name in "abcdefgh":
        write(root, f"src/{name}.py", body.replace("24", name))
    write(root, "docs/index.md", "# docs\n")  # the folder the marked claims name files in
    git(root, "add", "-A")
    git(root, "commit", "-qm", "files")
    anchorfs.init(root)
    with Workspace(root) as ws:
        mems = ws.record_many([
            {"content": "a holds", "anchors": ["src/a.py"]},
            {"content": "b one", "anchors": ["src/b.py"]}, {"content": "b two", "anchors": ["src/b.py#issue"]},
            {"content": "b three", "anchors": ["src/b.py:1-2", "src/a.py"]},
            {"content": "c lines", "anchors": ["src/c.py:5-6"]},
            {"content": "d gone", "anchors": ["src/d.py"]},
            {"content": "e moved", "anchors": ["src/e.py"]},
            {"content": "f symbol", "anchors": ["src/f.py#issue"]},
            {"content": "g before", "anchors": ["src/g.py"]},
            {"content": "h comes back", "anchors": ["src/h.py"]},
            {"content": "the runbook is docs/runbook.md", "anchors": ["src/a.py"]},
            {"content": "the guide is docs/guide.md"},
            {"content": "to be superseded", "anchors": ["src/a.py"]},
            {"content": "to be retracted", "anchors": ["src/c.py"]},
        ])
        write(root, "src/g.py", body + "# later\n")
        after = ws.record("g after", anchors=["src/g.py"])  # two hashes recorded for one file
        ws.supersede(mems[12].id, "superseded, now this", anchors=["src/b.py"])
        ws.retract(mems[13].id)
        ws.verify(mark=True)  # the runbook and guide claims: stale in the memories' own text
    snapshot(root)
    assert after.anchors[0].sha256 != mems[8].anchors[0].sha256

    write(root, "src/b.py", body.replace("24", "48"))  # every anchor on b changed
    write(root, "src/c.py", "# new first line\n" + body.replace("24", "c"))  # c's lines moved down
    (root / "src/d.py").unlink()
    git(root, "mv", "src/e.py", "src/e2.py")
    write(root, "src/f.py", "def keep():\n    return 1\n")  # f's symbol gone
    h = (root / "src/h.py").read_text()
    write(root, "src/h.py", "changed\n")
    full(root)  # drift.json: h stale
    assert drift_json(root)["drift"][mems[9].id] == "stale"
    write(root, "src/h.py", h)  # back as recorded: fresh again, written back as such

    want, written = compare(root)
    d = want[0]
    drifts = {m["id"]: m["drift"] for m in d["memories"]}
    assert drifts[mems[0].id] == "fresh" and drifts[mems[9].id] == "fresh"
    assert {drifts[mems[i].id] for i in (1, 2, 5, 7)} == {"stale"}
    assert {drifts[mems[i].id] for i in (3, 4, 6)} == {"fresh"}  # lines in place, lines moved, file moved
    assert drifts[mems[10].id] == "stale" and drifts[mems[11].id] == "stale"  # marked, anchored or not
    assert mems[12].id not in drifts and mems[13].id not in drifts
    assert drifts[mems[8].id] != drifts[after.id]
    assert written["drift"][mems[9].id] == "fresh"
    assert mems[10].id not in written["drift"]  # drift.json keeps what the anchors alone say


def test_a_new_workspaces_drift_builds_only_the_memories_on_a_file_that_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    files = [f"pkg{i % 3}/m{i}.py" for i in range(10)]
    for rel in files:
        write(root, rel, f"x = {rel!r}\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": f"fact {k} of {rel}", "anchors": [rel]} for rel in files for k in range(10)])
        ws.drift()
    snapshot(root)
    write(root, files[3], "changed\n")
    built = []
    real = Memory.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Memory], d: dict[str, Any]) -> Memory:
        built.append(d["id"])
        return real(cls, d)  # type: ignore[no-any-return]

    monkeypatch.setattr(Memory, "from_dict", classmethod(counting))
    report, ws = lazy(root)
    assert (report.count(report.flagged[0].drift), len(report.checked)) == (10, 100)
    assert len(built) == 10  # the memories on the changed file, and no other
    assert {r.memory.content for r in report.stale} == {f"fact {k} of {files[3]}" for k in range(10)}
    assert len(built) == 10  # counts and flagged read nothing more
    assert len(report.memories) == 100 and len(built) == 100  # a whole read builds the rest, once
    ws.close()


BLOBS = ("at", "own", "own_at", "sums", "ids", "all_at", "all_sums", "all_ids", "act_j", "act_ts", "act_na", "act_kind",
         "ix")
"""The plan's raw arrays, in file order (format 6: the targets', every memory's, the active ones'),
then (format 7) the hooks' index."""


def _parts(path: Path) -> tuple[dict[str, Any], bytes, dict[str, Any], dict[str, bytearray], bytes]:
    """A snapshot's header, counts line, drift plan (its JSON and its arrays) and records."""
    header_line, body = path.read_bytes().split(b"\n", 1)
    header = orjson.loads(header_line)
    off, size, _ = header["plan"]
    region = body[off:off + size]
    cut = region.index(b"\n")
    plan = orjson.loads(region[:cut])
    names = BLOBS
    sizes = (8 * plan["n"], 4 * plan["own_n"], 4 * (len(plan["paths"]) + 1), 16 * plan["n"], plan["ids_size"],
             8 * plan["all_n"], 16 * plan["all_n"], plan["all_ids_size"],
             4 * plan["act_n"], 8 * plan["act_n"], 4 * plan["act_n"], 4 * plan["act_n"], plan["ix_size"])
    assert cut + 1 + sum(sizes) == len(region)
    blobs, at = {}, cut + 1
    for name, n in zip(names, sizes):
        blobs[name] = bytearray(region[at:at + n])
        at += n
    return header, body[:off - 1], plan, blobs, body[off + size + 1:]


def _put(path: Path, header: dict[str, Any], head: bytes, plan: dict[str, Any], blobs: dict[str, bytearray],
         records: bytes) -> None:
    """A snapshot with every checksum made right again: only the plan's own word can be wrong."""
    region = orjson.dumps(plan) + b"\n" + b"".join(blobs[k] for k in BLOBS)
    body = head + b"\n" + region + b"\n" + records
    ix = header.get("ix")
    if ix is not None:  # the index ends the plan: where it starts moves with the plan's JSON
        ix = [len(head) + 1 + len(region) - len(blobs["ix"]), *ix[1:]]
    header = {**header, "size": len(body), "body": blake3.blake3(body).hexdigest(),
              "plan": [len(head) + 1, len(region), foldsnap.plan_sum(region, len(blobs["ix"]))], "ix": ix}
    path.write_bytes(orjson.dumps(header) + b"\n" + body)
    os.utime(path, ns=(now := time.time_ns(), now))


DAMAGES = ["torn", "plan byte", "record in place", "wrong sum", "wrong want", "wrong owner", "folder", "v2",
           "owner range", "start range", "lengths", "link", "grown", "garbage"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_plan_that_does_not_hold_is_never_trusted(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "ws"
    files = [f"src/m{i}.py" for i in range(6)]
    for rel in files:
        write(root, rel, f"x = {rel!r}\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": f"fact {k} of {rel}", "anchors": [rel]} for rel in files for k in range(3)])
    snapshot(root)
    write(root, files[2], "changed\n")  # a file that fails: its memories' records are read
    path = foldsnap.snap_path(Ledger(root / ".anchorfs"))
    header, head, plan, blobs, records = _parts(path)
    if damage == "torn":
        path.write_bytes(path.read_bytes()[: len(head) + 200])
    elif damage == "plan byte":
        data = path.read_bytes()
        i = data.index(b'"paths"')
        path.write_bytes(data[:i + 2] + b"P" + data[i + 3:])
    elif damage == "record in place":  # a record's text changed after the plan was written
        i = records.index(f"fact 1 of {files[2]}".encode())
        data = path.read_bytes()
        j = data.index(records[i:i + 30])
        path.write_bytes(data[:j] + b"F" + data[j + 1:])
    elif damage == "wrong sum":
        blobs["sums"] = bytearray(len(blobs["sums"]))
        _put(path, header, head, plan, blobs, records)
    elif damage == "wrong want":
        plan["want"] = ["0" * 64 for _ in plan["want"]]
        _put(path, header, head, plan, blobs, records)
    elif damage == "wrong owner":  # the changed file's memories named as another's
        from array import array

        own = array("I")
        own.frombytes(bytes(blobs["own"]))
        own.reverse()
        blobs["own"] = bytearray(own.tobytes())
        _put(path, header, head, plan, blobs, records)
    elif damage == "folder":
        _put(path, {**header, "folder": [1, 2]}, head, plan, blobs, records)
    elif damage == "v2":
        _put(path, {**header, "v": 2}, head, plan, blobs, records)
    elif damage == "owner range":  # positions past the targets' count
        blobs["own"] = bytearray(b"\xff" * len(blobs["own"]))
        _put(path, header, head, plan, blobs, records)
    elif damage == "start range":  # records said to start past the end
        blobs["at"] = bytearray(b"\x7f" * len(blobs["at"]))
        _put(path, header, head, plan, blobs, records)
    elif damage == "lengths":
        plan["n"] += 1
        _put(path, header, head, plan, blobs, records)
    elif damage == "link":
        shutil.move(path, tmp_path / "elsewhere.snap")
        path.symlink_to(tmp_path / "elsewhere.snap")
    elif damage == "grown":
        with Workspace(root) as ws:
            ws.record("one more", anchors=[files[2]])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    if damage not in ("wrong sum", "record in place", "wrong want", "wrong owner", "owner range", "start range", "grown"):
        assert foldsnap.read_plan(Ledger(root / ".anchorfs")) is None
    if damage == "link":  # never followed: the workspace itself is refused (`statefs.check_state`)
        with pytest.raises(WorkspaceError, match="symbolic link"):
            Workspace(root)
        return
    ws = Workspace(root)
    got = answers(ws.drift())
    assert ws.__dict__.get("_planned") is None or damage == "grown", "a plan that does not hold was used"
    ws.close()
    want = answers(full(root))
    assert got == want
    stale = {m["id"] for m in want[0]["memories"] if m["drift"] == "stale"}
    assert (len(stale), want[0]["checked"]) == (3, 19 if damage == "grown" else 18)


def test_a_report_read_later_is_the_pass_it_came_from(tmp_path: Path) -> None:
    """The report keeps the snapshot it was planned from open: a snapshot written anew later does
    not change what it answers; the same file changed in place is refused, not served."""
    root = tmp_path / "ws"
    files = [f"src/m{i}.py" for i in range(4)]
    for rel in files:
        write(root, rel, f"x = {rel!r}\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": f"fact {k} of {rel}", "anchors": [rel]} for rel in files for k in range(3)])
    snapshot(root)
    want = answers(full(root))
    report, ws = lazy(root)
    with Workspace(root) as w:
        w.record("another", anchors=[files[0]])
    settle()
    with Workspace(root) as w:
        w._memories()  # a new snapshot replaces the file the report was planned from
    assert answers(report) == want
    ws.close()

    report, ws = lazy(root)
    path = foldsnap.snap_path(Ledger(root / ".anchorfs"))
    data = bytearray(path.read_bytes())
    i = data.rindex(b"fact 0 of")
    with open(path, "r+b") as f:  # in place: the inode the report holds
        f.seek(i)
        f.write(b"F")
    with pytest.raises(AnchorfsError, match="plan"):
        report.memories
    ws.close()


def _open_on(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def test_closing_the_workspace_closes_the_plans_file(tmp_path: Path) -> None:
    """`Workspace.close()` closes the snapshot it planned from (not garbage collection); the
    report's memories read afterwards open that very file again, and a file replaced since is
    refused in one line, never read as the plan's."""
    root = tmp_path / "ws"
    files = [f"src/m{i}.py" for i in range(4)]
    for rel in files:
        write(root, rel, f"x = {rel!r}\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": f"fact {k} of {rel}", "anchors": [rel]} for rel in files for k in range(3)])
    snapshot(root)
    want = answers(full(root))
    report, ws = lazy(root)
    fd = ws.__dict__["_planned"].snap._fd
    assert (_open_on(fd) or "").endswith(foldsnap.SNAP_FILE)
    ws.close()
    assert not (_open_on(fd) or "").endswith(foldsnap.SNAP_FILE)  # closed now, not at collection
    assert answers(report) == want  # read after the close: the same file, opened again

    report, ws = lazy(root)
    ws.close()
    with Workspace(root) as w:
        w.record("another", anchors=[files[0]])
    settle()
    with Workspace(root) as w:
        w._memories()  # a new snapshot replaces the file the report was planned from
    with pytest.raises(AnchorfsError, match="replaced"):
        report.memories


def test_drift_json_cli_answers_the_same_from_the_plan(tmp_path: Path) -> None:
    from anchorfs.cli import cli

    root = tmp_path / "ws"
    for i in range(3):
        write(root, f"m{i}.py", f"x = {i}\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record_many([{"content": f"fact {i}", "anchors": [f"m{i % 3}.py"]} for i in range(9)])
    snapshot(root)
    write(root, "m1.py", "changed\n")
    runner = CliRunner()
    planned = runner.invoke(cli, ["--root", str(root), "drift", "--json"])
    assert planned.exit_code == 90
    assert (root / ".anchorfs" / "drift.memo").exists()  # the memo rests on the plan's paths
    replayed = runner.invoke(cli, ["--root", str(root), "drift", "--json"])
    assert replayed.output == planned.output
    foldsnap.snap_path(Ledger(root / ".anchorfs")).unlink()
    (root / ".anchorfs" / "drift.memo").unlink()
    folded = runner.invoke(cli, ["--root", str(root), "drift", "--json"])
    assert folded.output == planned.output and folded.exit_code == 90
    assert orjson.loads(planned.output)["stale"] == 3


FILES = [f"d{i % 2}/f{i}.py" for i in range(5)]
TEXT = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_lazy_pass_equals_the_full_fold(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    root = tmp_path_factory.mktemp("prop") / "ws"
    for rel in FILES:
        write(root, rel, TEXT)
    anchorfs.init(root)
    specs = data.draw(st.lists(st.tuples(st.sampled_from(FILES), st.sampled_from(["", "#a", "#b", ":1-2", ":5-6"])),
                               min_size=1, max_size=12))
    with Workspace(root) as ws:
        mems = ws.record_many([{"content": f"fact {n}", "anchors": [rel + how]} for n, (rel, how) in enumerate(specs)])
        for m in mems:
            op = data.draw(st.sampled_from(["keep", "keep", "supersede", "retract"]))
            if op == "supersede":
                ws.supersede(m.id, f"{m.content}, corrected", anchors=[m.anchors[0].path])
            elif op == "retract":
                ws.retract(m.id)
    snapshot(root)
    for rel in FILES:
        change = data.draw(st.sampled_from(["keep", "keep", "edit", "edit b", "delete", "rename", "prepend"]))
        if change == "edit":
            write(root, rel, TEXT + "# more\n")
        elif change == "edit b":
            write(root, rel, TEXT.replace("return 2", "return 3"))
        elif change == "delete":
            (root / rel).unlink()
        elif change == "rename":
            os.rename(root / rel, root / rel.replace(".py", "_new.py"))
        elif change == "prepend":
            write(root, rel, "# top\n" + TEXT)
    if data.draw(st.booleans()):
        full(root)  # drift.json as a pass before this one left it
        if data.draw(st.booleans()):
            for rel in FILES:
                if (root / rel).exists():
                    write(root, rel, TEXT)  # back as recorded
    compare(root)
