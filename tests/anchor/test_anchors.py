"""Anchors: spec and marker parsing, the path guard, taking hashes, and judging drift.

Everything here runs on real files in tmp_path; the Workspace-level refusals (ledger and store
left untouched) are in test_workspace.py.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from anchorfs.anchor.anchors import (
    STATE_DIR,
    judge,
    narrowed_text,
    parse_markers,
    parse_spec,
    resolve_path,
    take,
    text_hash,
)
from anchorfs.core.errors import AnchorError, SymbolNotFoundError, UnsafePathError
from anchorfs.core.model import AnchorRef, Verdict

USERS_PY = b'''class UserRepo:
    def getUserById(self, uid):
        return self.rows[uid]

    class Inner:
        def deep(self):
            pass


def helper():
    return 1
'''

GET_USER_TEXT = b"""    def getUserById(self, uid):
        return self.rows[uid]"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace-shaped folder (real path) with a Python file, a text file and a state folder."""
    r = tmp_path / "ws"
    (r / "src").mkdir(parents=True)
    (r / "src" / "users.py").write_bytes(USERS_PY)
    (r / "notes.txt").write_bytes(b"one\ntwo\nthree\nfour\nfive\n")
    (r / STATE_DIR).mkdir()
    (r / STATE_DIR / "ledger.jsonl").write_bytes(b"")
    return Path(os.path.realpath(r))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A real file next to the workspace, never inside it."""
    f = tmp_path / "secret.txt"
    f.write_text("top secret\n")
    return f


# --------------------------------------------------------------------------- parse_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("src/users.py", AnchorRef(path="src/users.py")),
        ("  src/users.py  ", AnchorRef(path="src/users.py")),
        ("src/users.py#UserRepo.getUserById", AnchorRef(path="src/users.py", symbol="UserRepo.getUserById")),
        ("src/users.py:2-3", AnchorRef(path="src/users.py", lines=(2, 3))),
        ("src/users.py:7", AnchorRef(path="src/users.py", lines=(7, 7))),
        ("my dir/file name.txt", AnchorRef(path="my dir/file name.txt")),
    ],
)
def test_parse_spec_forms(spec: str, expected: AnchorRef) -> None:
    assert parse_spec(spec) == expected


def test_parse_spec_round_trips_through_spec_property() -> None:
    for spec in ("a/b.py", "a/b.py#C.d", "a/b.py:3-9", "a/b.py:4"):
        assert parse_spec(spec).spec == spec


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "empty anchor spec"),
        ("   ", "empty anchor spec"),
        ("src/users.py#", "PATH#SYMBOL"),
        ("#UserRepo", "PATH#SYMBOL"),
        ("src/users.py#User Repo", "PATH#SYMBOL"),
        ("src/users.py:0", "lines start at 1"),
        ("src/users.py:5-3", "start 5 is after end 3"),
    ],
)
def test_parse_spec_refuses_bad_specs(spec: str, fragment: str) -> None:
    with pytest.raises(AnchorError, match=fragment):
        parse_spec(spec)


def test_parse_spec_refuses_non_strings() -> None:
    with pytest.raises(AnchorError, match="spec string or an AnchorRef"):
        parse_spec(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- markers


def test_markers_every_one_counts_in_order() -> None:
    text = (
        "Token expiry is 24h @anchor(file=auth/token.py, symbol=TokenIssuer.issue) and the "
        "limit lives in @anchor(file=conf/limits.toml, lines=3-5); see also @anchor(file=README.md) "
        "and @anchor(file=conf/limits.toml, lines=9)."
    )
    assert parse_markers(text) == [
        AnchorRef(path="auth/token.py", symbol="TokenIssuer.issue"),
        AnchorRef(path="conf/limits.toml", lines=(3, 5)),
        AnchorRef(path="README.md"),
        AnchorRef(path="conf/limits.toml", lines=(9, 9)),
    ]


@pytest.mark.parametrize(
    "marker",
    [
        "@anchor(file=a/b.py,symbol=Outer.Inner.method)",
        "@anchor(file = a/b.py , symbol = Outer.Inner.method)",
        "@anchor(  file=a/b.py,\n   symbol=Outer.Inner.method  )",
        "@anchor(symbol=Outer.Inner.method, file=a/b.py)",
        '@anchor(file="a/b.py", symbol=\'Outer.Inner.method\')',
        "@anchor(file=a/b.py,\tsymbol=Outer.Inner.method)",
    ],
)
def test_markers_tolerate_whitespace_quotes_and_order(marker: str) -> None:
    assert parse_markers(f"note {marker} end") == [AnchorRef(path="a/b.py", symbol="Outer.Inner.method")]


@pytest.mark.parametrize(
    ("marker", "lines"),
    [("lines=3-5", (3, 5)), ("lines = 3 - 5", (3, 5)), ("lines=12", (12, 12)), ('lines="1-2"', (1, 2))],
)
def test_markers_lines(marker: str, lines: tuple[int, int]) -> None:
    assert parse_markers(f"@anchor(file=x.txt, {marker})") == [AnchorRef(path="x.txt", lines=lines)]


def test_a_space_before_the_parenthesis_is_still_a_marker() -> None:
    assert parse_markers("see @anchor (file=x.txt, lines=2)") == [AnchorRef(path="x.txt", lines=(2, 2))]
    with pytest.raises(AnchorError, match="malformed marker"):
        parse_markers("see @anchor (x.txt)")


def test_text_without_markers_has_no_anchors() -> None:
    assert parse_markers("anchor(file=x) and @ anchor and email@anchor.dev") == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("see @anchor(file=a.py", "no closing"),
        ("see @anchor()", "empty argument"),
        ("see @anchor(file=a.py,, lines=1)", "empty argument"),
        ("see @anchor(a.py)", "expected key=value"),
        ("see @anchor(file=)", "expected key=value"),
        ("see @anchor(path=a.py)", "unknown key 'path'"),
        ("see @anchor(symbol=Foo)", "file= is required"),
        ("see @anchor(file=a.py, file=b.py)", "'file' given twice"),
        ("see @anchor(file=a.py, symbol=Foo, lines=1-2)", "not both"),
        ("see @anchor(file=a.py, symbol=Foo bar)", "bad symbol"),
        ("see @anchor(file=a.py, lines=x-y)", "bad lines"),
        ("see @anchor(file=a.py, lines=0)", "lines start at 1"),
        ("see @anchor(file=a.py, lines=9-2)", "start 9 is after end 2"),
        ("ok @anchor(file=a.py) then bad @anchor(file=b.py, what=1)", "unknown key 'what'"),
    ],
)
def test_malformed_markers_are_errors_never_dropped(text: str, fragment: str) -> None:
    with pytest.raises(AnchorError, match="malformed marker|bad lines") as info:
        parse_markers(text)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- resolve_path


def test_resolve_inside_relative_absolute_and_normalized(root: Path) -> None:
    real = str(root / "src" / "users.py")
    assert resolve_path(str(root), "src/users.py") == ("src/users.py", real)
    assert resolve_path(str(root), "./src//users.py") == ("src/users.py", real)
    assert resolve_path(str(root), "src/../src/users.py") == ("src/users.py", real)
    assert resolve_path(str(root), real) == ("src/users.py", real)


def test_resolve_refuses_dotdot_leaving_the_root(root: Path, outside: Path) -> None:
    for path in ("../secret.txt", "src/../../secret.txt", "src/../../ws/../secret.txt"):
        with pytest.raises(UnsafePathError, match="outside the workspace"):
            resolve_path(str(root), path)


def test_resolve_refuses_absolute_outside(root: Path, outside: Path) -> None:
    with pytest.raises(UnsafePathError, match="outside the workspace"):
        resolve_path(str(root), str(outside))
    with pytest.raises(UnsafePathError, match="outside the workspace"):
        resolve_path(str(root), "/etc/passwd")


def test_resolve_uses_realpath_for_symlinks(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside)
    (root / "src" / "escape").symlink_to(outside.parent, target_is_directory=True)
    # lexically both look inside the root; their realpaths are not
    with pytest.raises(UnsafePathError, match="link.txt"):
        resolve_path(str(root), "link.txt")
    with pytest.raises(UnsafePathError, match="outside the workspace"):
        resolve_path(str(root), "src/escape/secret.txt")
    # a symlink that stays inside is fine and resolves to its target
    (root / "alias.py").symlink_to(root / "src" / "users.py")
    assert resolve_path(str(root), "alias.py")[0] == "src/users.py"


@pytest.mark.parametrize("path", [STATE_DIR, f"{STATE_DIR}/ledger.jsonl", f"src/../{STATE_DIR}/ledger.jsonl"])
def test_resolve_refuses_the_state_folder(root: Path, path: str) -> None:
    with pytest.raises(UnsafePathError, match=r"\.anchorfs/ folder"):
        resolve_path(str(root), path)


def test_resolve_refuses_a_symlink_into_the_state_folder(root: Path) -> None:
    (root / "ledger-link").symlink_to(root / STATE_DIR / "ledger.jsonl")
    with pytest.raises(UnsafePathError, match=r"\.anchorfs/ folder"):
        resolve_path(str(root), "ledger-link")


def test_resolve_refuses_nul_empty_and_the_root(root: Path) -> None:
    with pytest.raises(UnsafePathError, match="NUL"):
        resolve_path(str(root), "src/users.py\0.txt")
    with pytest.raises(UnsafePathError, match="empty"):
        resolve_path(str(root), "  ")
    with pytest.raises(AnchorError, match="workspace root"):
        resolve_path(str(root), ".")


# --------------------------------------------------------------------------- take


def test_take_whole_file(root: Path) -> None:
    ref = take(str(root), AnchorRef(path="src/users.py"), commit="c" * 40, dirty=False)
    assert ref == AnchorRef(path="src/users.py", sha256=sha(USERS_PY), commit="c" * 40, dirty=False)
    assert ref.content_hash is None


def test_take_symbol_hashes_the_symbol_text(root: Path) -> None:
    ref = take(str(root), parse_spec("src/users.py#UserRepo.getUserById"))
    assert ref.sha256 == sha(USERS_PY)
    assert ref.symbol == "UserRepo.getUserById"
    assert ref.content_hash == sha(GET_USER_TEXT.strip(b" "))
    deep = take(str(root), parse_spec("src/users.py#UserRepo.Inner.deep"))
    assert deep.content_hash != ref.content_hash


def test_take_lines_hashes_the_lines(root: Path) -> None:
    ref = take(str(root), parse_spec("notes.txt:2-4"))
    assert ref.lines == (2, 4)
    assert ref.content_hash == sha(b"two\nthree\nfour")
    last = take(str(root), parse_spec("notes.txt:5"))
    assert last.content_hash == sha(b"five")


def test_take_normalizes_the_path(root: Path) -> None:
    ref = take(str(root), AnchorRef(path=str(root / "src" / ".." / "notes.txt")))
    assert ref.path == "notes.txt"


def test_take_accepts_a_caller_hash_that_agrees(root: Path) -> None:
    given = AnchorRef(path="notes.txt", sha256=sha((root / "notes.txt").read_bytes()).upper())
    assert take(str(root), given).sha256 == sha((root / "notes.txt").read_bytes())


def test_take_refuses_a_caller_hash_that_disagrees(root: Path) -> None:
    with pytest.raises(AnchorError, match="given sha256 for notes.txt does not match"):
        take(str(root), AnchorRef(path="notes.txt", sha256="0" * 64))
    with pytest.raises(AnchorError, match="given content_hash"):
        take(str(root), AnchorRef(path="notes.txt", lines=(1, 2), content_hash="0" * 64))
    with pytest.raises(AnchorError, match="content_hash was given for notes.txt, a whole-file anchor"):
        take(str(root), AnchorRef(path="notes.txt", content_hash=sha(b"one")))


def test_take_refuses_missing_file_and_directory(root: Path) -> None:
    with pytest.raises(AnchorError, match="'src/nope.py' does not exist"):
        take(str(root), AnchorRef(path="src/nope.py"))
    with pytest.raises(AnchorError, match="'src' is a directory"):
        take(str(root), AnchorRef(path="src"))


def test_take_refuses_a_fifo(root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(AnchorError, match="not a regular file"):
        take(str(root), AnchorRef(path="pipe"))


def test_take_refuses_an_unknown_symbol_with_candidates(root: Path) -> None:
    with pytest.raises(SymbolNotFoundError, match="'UserRepo.getUserByID' not found in src/users.py") as info:
        take(str(root), parse_spec("src/users.py#UserRepo.getUserByID"))
    assert "UserRepo.getUserById" in info.value.candidates


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        (AnchorRef(path="notes.txt", lines=(4, 6)), "past the end of notes.txt (5 lines)"),
        (AnchorRef(path="notes.txt", lines=(9, 9)), "past the end"),
        (AnchorRef(path="notes.txt", lines=(4, 2)), "start 4 is after end 2"),
        (AnchorRef(path="notes.txt", lines=(0, 2)), "lines start at 1"),
    ],
)
def test_take_refuses_bad_lines(root: Path, ref: AnchorRef, fragment: str) -> None:
    with pytest.raises(AnchorError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        take(str(root), ref)


def test_take_refuses_lines_in_an_empty_file(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    with pytest.raises(AnchorError, match="past the end"):
        take(str(root), parse_spec("empty.txt:1"))


def test_take_refuses_a_symbol_in_a_binary_file(root: Path) -> None:
    (root / "blob.py").write_bytes(b"def f():\n    return 1\n\0\x01\x02")
    with pytest.raises(AnchorError, match="binary"):
        take(str(root), parse_spec("blob.py#f"))
    # the whole file is fine
    assert take(str(root), parse_spec("blob.py")).sha256 is not None


@pytest.mark.parametrize("name", ["notes.txt", "Makefile", "data.unknownext"])
def test_take_refuses_a_symbol_in_a_language_without_grammar(root: Path, name: str) -> None:
    if not (root / name).exists():
        (root / name).write_text("all:\n\techo hi\n")
    with pytest.raises(AnchorError, match="no grammar"):
        take(str(root), parse_spec(f"{name}#all"))


def test_take_refuses_symbol_and_lines_together(root: Path) -> None:
    with pytest.raises(AnchorError, match="not both"):
        take(str(root), AnchorRef(path="src/users.py", symbol="helper", lines=(1, 2)))


def test_take_refuses_unsafe_paths(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside)
    for path in ("../secret.txt", str(outside), "link.txt", f"{STATE_DIR}/ledger.jsonl", "a\0b"):
        with pytest.raises(UnsafePathError):
            take(str(root), AnchorRef(path=path))


# --------------------------------------------------------------------------- judge


def taken(root: Path, spec: str) -> AnchorRef:
    return take(str(root), parse_spec(spec))


def test_judge_fresh_when_identical(root: Path) -> None:
    for spec in ("notes.txt", "notes.txt:2-3", "src/users.py#helper"):
        ref = taken(root, spec)
        verdict, _, _ = judge(ref, (root / ref.path).read_bytes())
        assert verdict is Verdict.FRESH


def test_judge_whole_file_changed(root: Path) -> None:
    ref = taken(root, "notes.txt")
    assert judge(ref, b"one\ntwo\n")[0] is Verdict.CHANGED


def test_judge_lines_unchanged_in_place_but_file_changed_elsewhere_is_fresh(root: Path) -> None:
    ref = taken(root, "notes.txt:2-3")
    verdict, detail, where = judge(ref, b"one\ntwo\nthree\nFOUR\nfive\nsix\n")
    assert (verdict, where) == (Verdict.FRESH, (2, 3))  # nothing moved: `moved` means other lines or path
    assert detail == "notes.txt:2-3 unchanged; the file changed elsewhere"


def test_judge_lines_shifted_are_found_at_their_new_place(root: Path) -> None:
    ref = taken(root, "notes.txt:2-3")
    verdict, detail, where = judge(ref, b"zero\n\none\ntwo\nthree\nfour\nfive\n")
    assert (verdict, where) == (Verdict.MOVED, (4, 5))
    assert "now at lines 4-5" in detail


def test_judge_lines_changed(root: Path) -> None:
    ref = taken(root, "notes.txt:2-3")
    assert judge(ref, b"one\ntwo\nTHREE\nfour\nfive\n")[0] is Verdict.CHANGED
    assert judge(ref, b"one\n")[0] is Verdict.CHANGED  # the file shrank under the lines


def test_judge_crlf_conversion_keeps_narrowed_text_but_changes_the_file(root: Path) -> None:
    crlf = (root / "notes.txt").read_bytes().replace(b"\n", b"\r\n")
    assert judge(taken(root, "notes.txt:2-3"), crlf)[0] is Verdict.FRESH
    assert judge(taken(root, "notes.txt"), crlf)[0] is Verdict.CHANGED
    src_crlf = USERS_PY.replace(b"\n", b"\r\n")
    assert judge(taken(root, "src/users.py#UserRepo.getUserById"), src_crlf)[0] is Verdict.FRESH


def test_judge_symbol_moved_changed_missing(root: Path) -> None:
    ref = taken(root, "src/users.py#UserRepo.getUserById")
    moved = b"import os\n\n\n" + USERS_PY
    verdict, detail, where = judge(ref, moved)
    assert (verdict, where) == (Verdict.FRESH, (5, 6))  # found under its name, unchanged: a symbol's place is its name
    assert detail == "src/users.py#UserRepo.getUserById unchanged at lines 5-6; the file changed elsewhere"
    changed = USERS_PY.replace(b"self.rows[uid]", b"self.cache.get(uid)")
    assert judge(ref, changed)[0] is Verdict.CHANGED
    helper_changed = USERS_PY.replace(b"return 1", b"return 2")
    assert judge(ref, helper_changed)[0] is Verdict.FRESH  # changed elsewhere only
    missing = USERS_PY.replace(b"getUserById", b"get_user")
    verdict, detail, _ = judge(ref, missing)
    assert verdict is Verdict.SYMBOL_MISSING
    assert "UserRepo.getUserById" in detail


def test_judge_symbol_in_a_file_that_became_binary_is_unreadable_not_stale(root: Path) -> None:
    ref = taken(root, "src/users.py#helper")
    assert judge(ref, b"\0\0\0binary now")[0] is Verdict.UNREADABLE


def test_narrowed_text_and_text_hash_agree_with_take(root: Path) -> None:
    ref = taken(root, "src/users.py#helper")
    text, where = narrowed_text(ref, USERS_PY)
    assert text == b"def helper():\n    return 1"
    assert where == (10, 11)
    assert text_hash(text) == ref.content_hash
