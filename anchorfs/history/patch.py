"""git's zero-context diffs, parsed: the hunks a walk carries an anchored span through.

`--raw -p -U0` output (a walk's `git log` stream, read in blocks, each hunk's body one slice; the
working tree's `diff-index`; two blobs' `diff`) becomes records of entries and hunks. Zero
context is what makes a hunk evidence: one that misses the tracked span proves the text
identical, and the headline hunk shown for a step is always one that hits the anchored text.
"""

from __future__ import annotations

import re
from _codecs import escape_decode
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..anchor.anchors import MAX_FILE_BYTES
from ..core.errors import HistoryError
from ..core.git import popen_git, run_git
from .repo import _FORMAT, WORKING_TREE, _Commit, _parse_commit

__all__ = ["_MAX_HUNKS", "Hunk", "_RawHunk", "_stream", "_worktree_patch", "_headline", "_blob_hunks"]


_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_HEADER_RE = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})\x1f")
"""A commit's line (`_FORMAT`) opening its record."""
_MAX_HUNKS = 20
_MAX_HUNK_LINES = 200


@dataclass(frozen=True, slots=True)
class Hunk:
    """A zero-context hunk as git printed it: old and new line numbers, `-`/`+` lines."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...] = ()

    @property
    def header(self) -> str:
        def part(start: int, count: int) -> str:
            return str(start) if count == 1 else f"{start},{count}"

        return f"@@ -{part(self.old_start, self.old_count)} +{part(self.new_start, self.new_count)} @@"

    @property
    def text(self) -> str:
        return "\n".join((self.header, *self.lines))

    def hits(self, span: tuple[int, int]) -> bool:
        """Does this hunk change a line inside `span` (old numbering)?"""
        start, end = span
        if self.old_count == 0:  # pure insertion after old line `old_start`
            return start <= self.old_start < end
        return self.old_start <= end and self.old_start + self.old_count - 1 >= start

    def hits_new(self, span: tuple[int, int]) -> bool:
        """Does this hunk put a line inside `span` (new numbering: where the text stands after)?"""
        start, end = span
        if self.new_count == 0:  # pure deletion after new line `new_start`
            return start <= self.new_start < end
        return self.new_start <= end and self.new_start + self.new_count - 1 >= start

    def above(self, span: tuple[int, int]) -> bool:
        if self.old_count == 0:
            return self.old_start < span[0]
        return self.old_start + self.old_count - 1 < span[0]

    def to_dict(self) -> dict[str, Any]:
        return {"old_start": self.old_start, "old_count": self.old_count, "new_start": self.new_start,
                "new_count": self.new_count, "header": self.header, "text": self.text}


@dataclass(frozen=True, slots=True)
class _RawHunk:
    hunk: Hunk
    noop: bool
    """Identical up to line endings (judge compares lines with endings normalized)."""
    body: bytes
    """Every removed and added line, untruncated: what name checks look at."""


@dataclass(slots=True)
class _Record:
    """One commit (or the working tree) of the diff stream, limited to the anchored path."""

    commit: str
    meta: _Commit | None = None
    entries: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(status, old oid, new oid, path) per raw line."""
    sections: list[list[_RawHunk]] = field(default_factory=list)
    binary: list[bool] = field(default_factory=list)

    def mine(self, path: str) -> tuple[tuple[str, str, str], list[_RawHunk] | None, bool] | None:
        """The raw entry for exactly `path`, its hunks (None if they cannot be trusted), binary?"""
        for i, (status, old, new, p) in enumerate(self.entries):
            if p == path:
                if len(self.sections) == len(self.entries):
                    return (status, old, new), self.sections[i], self.binary[i]
                return (status, old, new), None, False
        return None


def _unquote(path: bytes) -> str:
    """git's C-style quoting of unusual path names (core.quotepath is off, so only rare ones)."""
    if path.startswith(b'"') and path.endswith(b'"'):
        path = escape_decode(path[1:-1])[0]  # C's escapes, as git writes them: \t, \", \ooo (a byte)
    return path.decode("utf-8", "surrogateescape")


def _no_cr(block: bytes) -> bytes:
    """Joined lines, each with one carriage return at its end dropped (as judge compares lines)."""
    block = block.replace(b"\r\n", b"\n")
    return block[:-1] if block.endswith(b"\r") else block


class _PatchParser:
    """Parse `--raw -p -U0` output (a `git log` or `diff-tree --stdin` stream, or one diff) into records."""

    def __init__(self, first: _Record | None = None) -> None:
        self.current = first
        self._old_left = 0
        self._new_left = 0
        self._hunk: dict[str, Any] | None = None

    def _close_hunk(self) -> None:
        h = self._hunk
        if h is None or self.current is None or not self.current.sections:
            self._hunk = None
            return
        old, new = h["old"], h["new"]  # lines as git printed them, `-` / `+` first: joined once, each
        # line's first byte swapped or dropped after each newline (a few C calls, not a Python step a line)
        old_b, new_b = b"\n".join(old), b"\n".join(new)
        noop = len(old) == len(new) and (_no_cr(b"+" + old_b[1:].replace(b"\n-", b"\n+")) == _no_cr(new_b))
        body = b"\n".join([*([old_b[1:].replace(b"\n-", b"\n")] if old else []),
                           *([new_b[1:].replace(b"\n+", b"\n")] if new else [])])
        both = old[:_MAX_HUNK_LINES] + new[:_MAX_HUNK_LINES - min(len(old), _MAX_HUNK_LINES)]
        shown = tuple(b"\n".join(both).decode("utf-8", "replace").split("\n")) if both else ()
        if len(old) + len(new) > _MAX_HUNK_LINES:
            shown += (f"... {len(old) + len(new) - _MAX_HUNK_LINES} more lines",)
        hunk = Hunk(h["os"], h["oc"], h["ns"], h["nc"], shown)
        self.current.sections[-1].append(_RawHunk(hunk, noop, body))
        self._hunk = None

    def feed(self, lines: list[bytes]) -> list[_Record]:
        """Lines (without their newlines); the records they complete. A hunk's body is taken as
        one slice of `lines`: git prints exactly the counts its header says."""
        done, i = [], 0
        while i < len(lines):
            side, left = ("old", self._old_left) if self._old_left else ("new", self._new_left)
            k = min(left, len(lines) - i)
            if k and self._hunk and lines[i][:1] == lines[i + k - 1][:1] == (b"-" if side == "old" else b"+"):
                self._hunk[side].extend(lines[i:i + k])
                setattr(self, f"_{side}_left", left - k)
                i += k
                continue
            if not (k and lines[i][:1] == b"\\"):  # `\ No newline at end of file` comes between the sides
                self._old_left = self._new_left = 0  # the hunk is over (or was malformed: resynchronise)
            rec = self._line(lines[i])
            i += 1
            if rec is not None:
                done.append(rec)
        return done

    def _line(self, raw: bytes) -> _Record | None:
        c = raw[:1]  # one test per line, most lines: the first byte
        if c == b"\\":
            return None
        finished: _Record | None = None
        if c in b"0123456789abcdef" and _HEADER_RE.match(raw):
            self._close_hunk()
            finished, head = self.current, _parse_commit(raw)
            self.current = _Record(head.commit, head)
            return finished
        if self.current is None:
            return None
        if c == b":":
            meta, _, path = raw.partition(b"\t")
            fields = meta[1:].split()
            if len(fields) >= 5:
                self.current.entries.append(
                    (fields[4][:1].decode(), fields[2].decode(), fields[3].decode(), _unquote(path))
                )
        elif c == b"i" and raw.startswith(b"index ") and 0 < len(self.current.sections) <= len(self.current.entries):
            entry = self.current.entries[len(self.current.sections) - 1]  # its oids in full
            old, _, new = raw[6:].split(b" ")[0].decode().partition("..")
            if old.startswith(entry[1]) and new.startswith(entry[2]):
                self.current.entries[len(self.current.sections) - 1] = (entry[0], old, new, entry[3])
        elif c == b"d" and (raw.startswith(b"diff --git ") or raw.startswith(b"diff --cc ")):
            self._close_hunk()
            self.current.sections.append([])
            self.current.binary.append(False)
        elif c == b"@" and raw.startswith(b"@@ "):
            self._close_hunk()
            m = _HUNK_RE.match(raw)
            if m and self.current.sections:
                oc = int(m.group(2)) if m.group(2) is not None else 1
                nc = int(m.group(4)) if m.group(4) is not None else 1
                self._hunk = {"os": int(m.group(1)), "oc": oc, "ns": int(m.group(3)), "nc": nc,
                              "old": [], "new": []}
                self._old_left, self._new_left = oc, nc
                if oc == 0 and nc == 0:
                    self._close_hunk()
        elif c == b"B" and raw.startswith(b"Binary files ") and self.current.binary:
            self.current.binary[-1] = True
        return None

    def finish(self) -> _Record | None:
        self._close_hunk()
        last, self.current = self.current, None
        return last


def _big_files() -> str:
    """git treats a file over the size bound as binary (no hunks): its diff is never computed."""
    return f"core.bigFileThreshold={MAX_FILE_BYTES}"


def _stream(top: Path, paths: list[str], *revs: str, pairs: str | None = None) -> Generator[_Record, None, None]:
    """One record per commit touching `paths`, each with its commit's metadata: `git log` of
    the first-parent chain REVS names, oldest first, or `diff-tree --stdin` fed `pairs` ("commit
    previous" lines, every commit a record). The process starts now, read as the records are."""
    cmd = ("diff-tree", "--stdin", "--always") if pairs is not None else (
        "-c", "log.follow=false", "-c", "log.showSignature=false", "-c", "log.diffMerges=first-parent", "log", "-m",
        "--first-parent", "--reverse", "--diff-algorithm=myers", "--inter-hunk-context=0", "--submodule=short", *revs)
    proc = popen_git(top, "-c", "core.quotepath=false", "-c", _big_files(), *cmd, f"--format={_FORMAT}", "-r",
                     "--raw", "-p", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color",
                     "--full-index", "--", *(":(literal)" + p for p in paths))  # raw oids as %h: see `_line`
    assert proc.stdin is not None and proc.stdout is not None
    try:  # a few bytes at most: written before a line is read
        proc.stdin.write((pairs or "").encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):  # git died; its stderr tells why
        pass
    return _read(proc, "log" if pairs is None else "diff-tree")


def _read(proc: Any, what: str) -> Generator[_Record, None, None]:
    parser = _PatchParser()
    parts: list[bytes] = []  # the last line's pieces: joined once its newline comes, however long it is
    try:
        while block := proc.stdout.read1(1 << 16):  # what git has written so far, not a line at a time
            parts.append(block)
            if b"\n" in block:
                lines = b"".join(parts).split(b"\n")
                parts = [lines.pop()]
                yield from parser.feed(lines)
        yield from parser.feed([tail] if (tail := b"".join(parts)) else [])
        rec = parser.finish()
        if rec is not None:
            yield rec
    finally:
        proc.stdout.close()
        err = proc.stderr.read() if proc.stderr else b""
        code = proc.wait()
        if proc.stderr:
            proc.stderr.close()
    if code != 0:
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise HistoryError(f"git {what} failed: {msg[-1] if msg else code}")


def _worktree_patch(top: Path, repo_path: str) -> _Record:
    out = run_git(top, "-c", "core.quotepath=false", "-c", _big_files(), "diff-index", "--raw", "-p", "-U0",
                  "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "--no-relative",
                  "--full-index", "--abbrev=64", "HEAD", "--", ":(literal)" + repo_path)
    parser = _PatchParser(_Record(WORKING_TREE))
    parser.feed(out.split(b"\n"))
    rec = parser.finish()
    assert rec is not None
    return rec


def _headline(hunks: list[Hunk], before: tuple[int, int] | None, after: tuple[int, int] | None,
              *, everything: bool = True) -> tuple[Hunk, ...]:
    """The hunks that hit the anchored text first (where it stood before the step, in old
    numbering, or where it stands after, in new numbering), in file order; then, with
    `everything`, the rest: the first hunk shown is always one that touches the anchor."""
    hitting = [h for h in hunks if (before and h.hits(before)) or (after and h.hits_new(after))]
    rest = [h for h in hunks if h not in hitting] if everything else []
    return tuple((hitting + rest)[:_MAX_HUNKS])


def _blob_hunks(top: Path, old_oid: str, new_oid: str) -> list[Hunk]:
    """Zero-context hunks between two blobs (a file renamed and changed in one step)."""
    out = run_git(top, "-c", _big_files(), "diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv",
                  old_oid, new_oid, check=False)
    rec = _Record("blobs", entries=[("M", old_oid, new_oid, "")])
    parser = _PatchParser(rec)
    parser.feed(out.split(b"\n"))
    parser.finish()
    return [h.hunk for section in rec.sections for h in section if not h.noop]
