"""Relocating a moved line anchor (issue 15, item 8): the search goes outward from the old place
within a hashing budget instead of hashing n lines at every offset of the file, with the same
answers as the whole scan it replaced wherever that budget reaches, and `changed` with a
detail saying why past it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorfs.anchor.anchors import SCAN_BUDGET_BYTES, _find_block, _lines_text, judge, parse_spec, take, text_hash
from anchorfs.core.model import Verdict


def whole_scan(lines: list[bytes], n: int, want: str, near: int) -> tuple[int, int] | None:
    """The algorithm `_find_block` replaced, verbatim: hash n lines at every offset."""
    best: tuple[int, int] | None = None
    for i in range(0, len(lines) - n + 1):
        if text_hash(_lines_text(lines, i + 1, i + n)) == want:
            if best is None or abs(i + 1 - near) < abs(best[0] - near):
                best = (i + 1, i + n)
    return best


# Few distinct lines, so blocks repeat and ties between two equally near copies are common.
LINES = st.lists(st.sampled_from([b"", b"a", b"b", b"ab", b"  x = 1", b"\xff\xfe"]), max_size=40)


@st.composite
def searches(draw: st.DrawFn) -> tuple[list[bytes], int, str, int]:
    lines = draw(LINES)
    n = draw(st.integers(1, 6))
    near = draw(st.integers(-3, len(lines) + 5))
    if len(lines) >= n and draw(st.booleans()):
        i = draw(st.integers(0, len(lines) - n))
        want = text_hash(b"\n".join(lines[i:i + n]))  # a block that is there (maybe more than once)
    else:
        want = draw(st.sampled_from([text_hash(b"zz"), text_hash(b""), "", "A" * 64, "not hex"]))
    return lines, n, want, near


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(searches())
def test_the_outward_search_answers_as_the_whole_scan_did(case: tuple[list[bytes], int, str, int]) -> None:
    lines, n, want, near = case
    found, complete = _find_block(lines, n, want, near)
    assert complete
    assert found == whole_scan(lines, n, want, near)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(searches(), st.integers(0, 600))
def test_a_spent_budget_never_gives_another_answer(case: tuple[list[bytes], int, str, int], budget: int) -> None:
    """Within any budget the answer is the whole scan's or none: nearest-first means a block
    found before the budget runs out is the one the whole scan would have picked."""
    lines, n, want, near = case
    found, complete = _find_block(lines, n, want, near, budget=budget)
    if complete or found is not None:
        assert found == whole_scan(lines, n, want, near)
    else:
        assert found is None


def _big(count: int, tag: bytes = b"") -> list[bytes]:
    return [b"value_%d = compute(%d)  # line of filler %s" % (i, i * 7, tag) for i in range(count)]


def test_a_400_line_anchor_in_a_large_file_is_found_where_it_moved(tmp_path: Path) -> None:
    body = _big(200_000)
    f = tmp_path / "big.py"
    f.write_bytes(b"\n".join(body) + b"\n")
    ref = take(str(tmp_path), parse_spec("big.py:150001-150400"))
    block = body[150_000:150_400]
    # 37 lines land above the block, and one line changes far below it.
    moved = [b"# new %d" % i for i in range(37)] + body[:150_400] + [b"changed"] + body[150_401:]
    verdict, detail, where = judge(ref, b"\n".join(moved) + b"\n")
    assert verdict is Verdict.MOVED, detail
    assert where == (150_038, 150_437)
    assert detail == "big.py:150001-150400 now at lines 150038-150437"
    assert moved[150_037:150_437] == block


def test_a_400_line_anchor_gone_from_a_large_file_is_changed_saying_the_search_was_bounded(tmp_path: Path) -> None:
    body = _big(200_000)
    f = tmp_path / "big.py"
    f.write_bytes(b"\n".join(body) + b"\n")
    ref = take(str(tmp_path), parse_spec("big.py:1001-1400"))
    edited = body[:1200] + [b"the anchored text changed here"] + body[1201:]
    verdict, detail, where = judge(ref, b"\n".join(edited) + b"\n")
    assert verdict is Verdict.CHANGED
    assert where is None
    assert "not found near its old place" in detail and "200000-line file" in detail
    assert f"{SCAN_BUDGET_BYTES >> 20} MiB relocation bound" in detail


def test_a_small_file_is_searched_whole_and_a_missing_block_is_plainly_changed(tmp_path: Path) -> None:
    body = _big(300)
    (tmp_path / "small.py").write_bytes(b"\n".join(body) + b"\n")
    ref = take(str(tmp_path), parse_spec("small.py:10-12"))
    far = body[12:] + body[9:12]  # moved to the very end: found, however far
    verdict, detail, where = judge(ref, b"\n".join(far) + b"\n")
    assert (verdict, where) == (Verdict.MOVED, (289, 291))
    gone = body[:10] + body[12:]
    verdict, detail, where = judge(ref, b"\n".join(gone) + b"\n")
    assert (verdict, detail, where) == (Verdict.CHANGED, "small.py:10-12 changed", None)


def test_crlf_files_still_relocate_by_their_normalized_lines(tmp_path: Path) -> None:
    body = _big(50)
    (tmp_path / "w.py").write_bytes(b"\r\n".join(body) + b"\r\n")
    ref = take(str(tmp_path), parse_spec("w.py:5-7"))
    shifted = [b"# top"] + body
    verdict, _, where = judge(ref, b"\n".join(shifted) + b"\n")
    assert (verdict, where) == (Verdict.MOVED, (6, 8))
