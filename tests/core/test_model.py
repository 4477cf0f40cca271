"""One validation at the door: the ledger reader's rules (`model.check_snapshot`) decide what
every SDK write may acknowledge, so nothing the SDK accepts is dropped by a later read, and
wrong types are an `InputError` naming the argument, with nothing written.

Real files, a real ledger and a real LanceDB store in tmp_path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import anchorfs
from anchorfs.core.errors import AnchorfsError, InputError
from anchorfs.ledger.log import Entry
from anchorfs.core.model import (
    KINDS,
    AnchorRef,
    Memory,
    SnapshotError,
    check_snapshot,
    new_id,
    utcnow,
    validate_anchor,
    validate_memory,
    validate_query_args,
)
from anchorfs.sdk.workspace import Workspace

NOTES = "one\ntwo\nthree\nfour\nfive\n"


def _workspace(root: Path, *, cap: int | None = None) -> Path:
    root.mkdir()
    (root / "notes.txt").write_text(NOTES)
    if cap is not None:
        (root / ".anchorfs.toml").write_text(f"[limits]\ncontent_chars = {cap}\n")
    anchorfs.init(root)
    return root


def _ledger(root: Path) -> bytes:
    path = root / ".anchorfs" / "ledger.jsonl"
    return path.read_bytes() if path.exists() else b""


def _snapshot_dict(**changes: Any) -> dict[str, Any]:
    now = utcnow()
    d = Memory(id=new_id(), content="x", anchors=(AnchorRef("a.py", sha256="0" * 64),),
               recorded_at=now, valid_from=now).to_dict()
    for key, value in changes.items():
        if key.startswith("anchor_"):
            d["anchors"][0][key[len("anchor_"):]] = value
        else:
            d[key] = value
    return d


# --------------------------------------------------------------------------- the rules themselves


@pytest.mark.parametrize("changes, fragment", [
    ({"author": 5}, "author must be a string, got int"),
    ({"reason": 5}, "reason must be a string, got int"),
    ({"kind": ["note"]}, "kind must be a string, got list"),
    ({"content": 7}, "content must be a string, got int"),
    ({"tags": [1]}, "tags must be a list of strings"),
    ({"tags": "auth"}, "tags must be a list of strings"),
    ({"anchors": {"path": "a.py"}}, "anchors must be a list, got dict"),
    ({"anchor_path": 123}, "anchors[0] path must be a non-empty string, got int"),
    ({"anchor_path": ""}, "anchors[0] path must be a non-empty string"),
    ({"anchor_lines": [True, True]}, "anchors[0] lines must be [start, end]"),
    ({"anchor_lines": ["1", "2"]}, "anchors[0] lines must be [start, end]"),
    ({"anchor_lines": [3, 2]}, "anchors[0] lines must be [start, end]"),
    ({"anchor_lines": [5]}, "anchors[0] lines must be [start, end]"),
    ({"anchor_symbol": 1}, "anchors[0] symbol must be a string, got int"),
    ({"anchor_dirty": "yes"}, "anchors[0] dirty must be a boolean, got str"),
    ({"id": ""}, "id must be a non-empty string"),
])
def test_check_snapshot_names_the_field(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SnapshotError) as info:
        check_snapshot(_snapshot_dict(**changes))
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)  # what the ledger reader catches to skip a line


def test_the_ledger_reader_applies_the_same_rules() -> None:
    """A line the model's rules refuse is exactly a line `Entry.from_dict` refuses."""
    good = {"v": 1, "tx": "t", "op": "record", "at": "2026-01-01T00:00:00Z", "actor": "a", "reason": None,
            "memories": [_snapshot_dict()]}
    assert Entry.from_dict(good).memories[0].content == "x"
    for changes in ({"author": 5}, {"anchor_lines": [True, True]}, {"tags": [1]}):
        bad = {**good, "memories": [_snapshot_dict(**changes)]}
        with pytest.raises(ValueError, match="bad ledger line"):
            Entry.from_dict(bad)


def test_validate_memory_returns_what_a_later_read_gives() -> None:
    now = utcnow()
    m = Memory(id=new_id(), content="x", tags=("a",),
               anchors=(AnchorRef("a.py", sha256="0" * 64, lines=(1, 2), content_hash="1" * 64),),
               recorded_at=now, valid_from=now)
    again = validate_memory(m)
    assert again == m and again.anchors[0].lines == (1, 2)
    with pytest.raises(InputError, match="author must be a string, got int; nothing was written"):
        validate_memory(m.replace(author=5))
    with pytest.raises(InputError, match="not valid UTF-8"):
        validate_memory(m.replace(content="bad \ud800 text"))


@pytest.mark.parametrize("ref, fragment", [
    (AnchorRef(path=123), "anchors[0] path must be a string, got int"),  # type: ignore[arg-type]
    (AnchorRef(path=b".."), "anchors[0] path must be a string, got bytes"),  # type: ignore[arg-type]
    (AnchorRef("a.py", lines=["1", "2"]), "anchors[0] lines must be (start, end) integers"),  # type: ignore[arg-type]
    (AnchorRef("a.py", lines=(True, True)), "anchors[0] lines must be (start, end) integers"),
    (AnchorRef("a.py", lines=(1.0, 2.0)), "anchors[0] lines must be (start, end) integers"),  # type: ignore[arg-type]
    (AnchorRef("a.py", lines=5), "anchors[0] lines must be (start, end) integers"),  # type: ignore[arg-type]
    (AnchorRef("a.py", symbol=5), "anchors[0] symbol must be a string, got int"),  # type: ignore[arg-type]
    (AnchorRef("a.py", sha256=b"00"), "anchors[0] sha256 must be a string, got bytes"),  # type: ignore[arg-type]
    (AnchorRef("a.py", dirty="no"), "anchors[0] dirty must be a boolean, got str"),  # type: ignore[arg-type]
])
def test_validate_anchor_refuses_wrong_types(ref: AnchorRef, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        validate_anchor(ref, "anchors[0]")
    assert fragment in str(info.value)


def test_validate_anchor_takes_a_list_of_lines_as_a_tuple() -> None:
    assert validate_anchor(AnchorRef("a.py", lines=[2, 3])).lines == (2, 3)  # type: ignore[arg-type]


def test_validate_query_args() -> None:
    from datetime import datetime, timezone

    assert validate_query_args(None, False, None) == (None, None)
    assert validate_query_args(3, True, datetime(2026, 1, 1)) == (3, datetime(2026, 1, 1, tzinfo=timezone.utc))
    for args, fragment in [(("5", False, None), "k must be an integer, got str"),
                           ((True, False, None), "k must be an integer, got bool"),
                           ((2.5, False, None), "k must be an integer, got float"),
                           ((None, "no", None), "include_superseded must be true or false, got str"),
                           ((None, False, 5), "as_of must be an ISO 8601 time"),
                           ((None, False, "garbage"), "bad time 'garbage'")]:
        with pytest.raises(InputError, match=fragment.replace("(", r"\(")):
            validate_query_args(*args)


# --------------------------------------------------------------------------- the doors (issue 15, item 4)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _workspace(tmp_path / "ws")


@pytest.mark.parametrize("call, fragment", [
    (lambda ws: ws.record("a", author=5), "author must be a string, got int"),
    (lambda ws: ws.record("a", anchors=[AnchorRef("notes.txt", lines=(True, True))]), "lines must be"),
    (lambda ws: ws.record("a", anchors=[AnchorRef(path=123)]), "path must be a string, got int"),  # type: ignore[arg-type]
    (lambda ws: ws.record("a", anchors=[AnchorRef(path=b"..")]), "path must be a string, got bytes"),  # type: ignore[arg-type]
    (lambda ws: ws.record("a", anchors=[AnchorRef("notes.txt", lines=["1", "2"])]), "lines must be"),  # type: ignore[arg-type]
    (lambda ws: ws.record("a", anchors=5), "anchors must be a list of anchor specs"),
    (lambda ws: ws.record("a", tags=5), "tags must be a list of strings, got int"),
    (lambda ws: ws.record("a", kind=5), "kind must be a string, got int"),
    (lambda ws: ws.record(5), "content must be a string, got int"),
    (lambda ws: ws.record_many([{"content": "a", "author": ["me"]}]), "author must be a string, got list"),
    (lambda ws: ws.record_many(5), "record_many takes a list"),
    (lambda ws: ws.retract(ws.list()[0].id, reason=5), "reason must be a string, got int"),
    (lambda ws: ws.supersede(ws.list()[0].id, "b", reason=5), "reason must be a string, got int"),
    (lambda ws: ws.supersede(ws.list()[0].id, "b", author=5), "author must be a string, got int"),
    (lambda ws: ws.supersede(ws.list()[0].id, "b", anchors=[AnchorRef(path=123)]), "path must be a string"),  # type: ignore[arg-type]
    (lambda ws: ws.reanchor(ws.list()[0].id, reason=5), "reason must be a string, got int"),
    (lambda ws: ws.reanchor(ws.list()[0].id, anchors=[AnchorRef("notes.txt", lines=(True, True))]), "lines"),
    (lambda ws: ws.revert(ws.list()[0].id, reason=5), "reason must be a string, got int"),
    (lambda ws: ws.get(5), "a memory id must be a string, got int"),
    (lambda ws: ws.query("a", k="5"), "k must be an integer, got str"),
    (lambda ws: ws.query("a", include_superseded="no"), "include_superseded must be true or false"),
    (lambda ws: ws.query("a", as_of=5), "as_of must be an ISO 8601 time"),
])
def test_wrong_types_are_refused_at_the_door_naming_the_argument(root: Path, call: Any, fragment: str) -> None:
    with anchorfs.open(root) as ws:
        ws.record("an earlier memory", anchors=["notes.txt:2"])
        before = _ledger(root)
        with pytest.raises(InputError) as info:
            call(ws)
        assert fragment in str(info.value)
        assert "\n" not in str(info.value)
        assert _ledger(root) == before
    with anchorfs.open(root) as again:  # and the earlier memory is intact, still active
        assert [m.content for m in again.list()] == ["an earlier memory"]


def test_a_naive_as_of_datetime_means_utc(root: Path) -> None:
    from datetime import datetime, timedelta

    with anchorfs.open(root) as ws:
        ws.record("the port is 8080")
        later = datetime.utcnow() + timedelta(hours=1)  # noqa: DTZ003 - naive on purpose
        assert [h.memory.content for h in ws.query("port", as_of=later)] == ["the port is 8080"]


# --------------------------------------------------------------------------- the property

_WEIRD = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 7), st.sampled_from([1.5, float("inf"), -0.0]),
    st.text(max_size=6), st.binary(max_size=4), st.sampled_from(["\ud800", "", " ", "notes.txt"]),
    st.lists(st.one_of(st.integers(-1, 6), st.booleans(), st.text(max_size=2)), max_size=3),
    st.tuples(st.integers(-1, 6), st.integers(-1, 6)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
_PATH = st.one_of(st.sampled_from(["notes.txt", "missing.txt", "../out.txt", ".anchorfs/ledger.jsonl"]), _WEIRD)
_REF = st.builds(AnchorRef, path=_PATH,
                 lines=st.one_of(st.none(), st.tuples(st.integers(0, 7), st.integers(0, 7)), _WEIRD),
                 symbol=st.one_of(st.none(), st.just("one"), _WEIRD),
                 dirty=st.one_of(st.none(), st.booleans(), _WEIRD))
_GOOD_ANCHOR = st.sampled_from(["notes.txt", "notes.txt:2-3", "notes.txt:4", AnchorRef("notes.txt", lines=(1, 2))])
_VALID = {
    "content": st.text(min_size=1, max_size=80),
    "kind": st.sampled_from(KINDS),
    "tags": st.lists(st.text(min_size=1, max_size=5), max_size=3),
    "anchors": st.lists(_GOOD_ANCHOR, max_size=2),
    "author": st.one_of(st.none(), st.text(max_size=10)),
    "reason": st.one_of(st.none(), st.text(max_size=10)),
}
_BROKEN = {
    **{k: _WEIRD for k in _VALID},
    "anchors": st.one_of(st.lists(st.one_of(_GOOD_ANCHOR, _REF, _WEIRD), min_size=1, max_size=3), _WEIRD),
}


@st.composite
def _arguments(draw: st.DrawFn) -> dict[str, Any]:
    """Valid arguments with at most one (sometimes two) of them made hostile."""
    args = {k: draw(v) for k, v in _VALID.items()}
    for key in draw(st.lists(st.sampled_from(sorted(_VALID)), max_size=2, unique=True)):
        args[key] = draw(_BROKEN[key])
    return args


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(op=st.sampled_from(["record", "supersede", "retract", "reanchor", "revert"]), args=_arguments())
def test_what_the_sdk_accepts_survives_a_fresh_read_and_what_it_refuses_writes_nothing(
        tmp_path_factory: pytest.TempPathFactory, op: str, args: dict[str, Any]) -> None:
    """Any value a door accepts reads back equal from a fresh Workspace on the same root (so
    the ledger reader kept it); anything it refuses is an AnchorfsError with the ledger bytes
    unchanged. No other exception escapes."""
    content, kind, tags, anchors = args["content"], args["kind"], args["tags"], args["anchors"]
    author, reason = args["author"], args["reason"]
    root = _workspace(tmp_path_factory.mktemp("prop") / "ws", cap=64)
    with anchorfs.open(root) as ws:
        base = ws.record("the base memory", anchors=["notes.txt:1"])
        if op == "revert":
            ws.retract(base.id)
        before = _ledger(root)
        calls = {
            "record": lambda: [ws.record(content, kind=kind, tags=tags, anchors=anchors, author=author)],
            "supersede": lambda: [ws.supersede(base.id, content, reason=reason, anchors=anchors, kind=kind,
                                               tags=tags, author=author), ws.get(base.id)],
            "retract": lambda: [ws.retract(base.id, reason=reason)],
            "reanchor": lambda: [ws.reanchor(base.id, anchors=anchors, reason=reason)],
            "revert": lambda: [ws.revert(base.id, reason=reason)],
        }
        try:
            acknowledged = calls[op]()
        except AnchorfsError as exc:
            event(f"{op}: refused")
            assert _ledger(root) == before, f"refused ({exc}) but the ledger changed"
            assert "\n" not in str(exc)
            return
    event(f"{op}: acknowledged")
    for line in _ledger(root).splitlines():  # every line the write appended reads back
        Entry.from_dict(orjson.loads(line))
    fresh = Workspace(root)
    everything = {m.id: m for m in fresh.list(status="all")}
    for m in acknowledged:
        assert fresh.get(m.id) == m
        assert everything[m.id] == m
    if op in ("retract", "reanchor", "revert"):
        last = fresh.ledger_entries(limit=1)[0]
        assert last.reason == reason
