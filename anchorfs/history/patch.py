"""git's zero-context diffs, parsed: the hunks a walk carries an anchored span through.

`--raw -p -U0` output (a walk's `git log` stream, read in blocks, a record at a time, by C
searches for the lines opening records, files and hunks; the working tree's `diff-index`; two
blobs' `diff`) becomes records of entries and hunks. Zero context is what makes a hunk
evidence: one that misses the tracked span proves the text identical, and the headline hunk
shown for a step is always one that hits the anchored text.
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


_HEAD_RE = re.compile(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})\x1f")
"""A commit's line (`_FORMAT`) starts so: where a record starts. No other line of the stream does
(a hunk's lines start with `-`, `+` or `\\`), so the text between two is one commit's, whole."""
_RAW_RE = re.compile(rb"\n:\S+ \S+ (\S+) (\S+) (\S)\S*\t([^\n]*)")
_INDEX_RE = re.compile(rb"\nindex ([0-9a-f]+)\.\.([0-9a-f]+)")
_HUNK_RE = re.compile(rb"\n@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@[^\n]*")


def _last_record(block: bytes) -> int:
    """Where the last record starting in `block` starts (at 0: if the block before ended a line),
    or -1: found from the end by C searches for unit separators (a hunk's line rarely holds one)."""
    end = len(block)
    while (sep := block.rfind(b"\x1f", 0, end)) >= 0:
        end = block.rfind(b"\n", 0, sep) + 1  # that line's start: its other separators are skipped
        if _HEAD_RE.match(block, end):
            return end
        if not end:
            break
    return -1


def _raw_hunk(head: re.Match[bytes], text: bytes) -> _RawHunk:
    """One hunk from its header (`_HUNK_RE`) and its lines as git printed them (`-`/`+` first,
    git's `\\ No newline at end of file` among them): the lines joined, split and swapped in a
    few C calls, not a Python step a line."""
    os_, oc, ns, nc = (int(n) if n is not None else 1 for n in head.groups())
    lines = [line for line in text.split(b"\n") if line[:1] != b"\\"] if b"\\" in text else text.split(b"\n")
    old, new = lines[:oc], lines[oc:oc + nc]
    old_b, new_b = b"\n".join(old), b"\n".join(new)
    noop = oc == nc and len(old) == len(new) and (_no_cr(b"+" + old_b[1:].replace(b"\n-", b"\n+")) == _no_cr(new_b))
    body = b"\n".join([*([old_b[1:].replace(b"\n-", b"\n")] if old else []),
                       *([new_b[1:].replace(b"\n+", b"\n")] if new else [])])
    both = old[:_MAX_HUNK_LINES] + new[:_MAX_HUNK_LINES - min(len(old), _MAX_HUNK_LINES)]
    shown = tuple(b"\n".join(both).decode("utf-8", "replace").split("\n")) if both else ()
    if len(old) + len(new) > _MAX_HUNK_LINES:
        shown += (f"... {len(old) + len(new) - _MAX_HUNK_LINES} more lines",)
    return _RawHunk(Hunk(os_, oc, ns, nc, shown), noop, body)


def _fill(rec: _Record, text: bytes, at: int, stop: int) -> None:
    """A record's raw lines, then per file its oids (`index`), binary flag and hunks, from
    `text[at:stop]` (starting with a newline). Sections and hunks are found by `bytes.find` of the
    lines opening them (no hunk's line starts so): C searches, each body copied once."""
    first = text.find(b"\ndiff --", at, stop)
    for m in _RAW_RE.finditer(text, at, first if first >= 0 else stop):
        old, new, status, path = m.groups()
        rec.entries.append((status.decode(), old.decode(), new.decode(), _unquote(path)))
    at = first
    while at >= 0:
        end = text.find(b"\ndiff --", at + 1, stop)
        last = end if end >= 0 else stop
        k = len(rec.sections)
        rec.sections.append([])
        hunk = text.find(b"\n@@ ", at, last)
        header = hunk if hunk >= 0 else last  # `index`, `Binary files` come before any hunk
        rec.binary.append(text.find(b"\nBinary files ", at, header) >= 0)
        found = _INDEX_RE.search(text, at, header)
        if found and k < len(rec.entries):  # the oids in full (the raw line's may be short)
            status, old, new, path = rec.entries[k]
            full_old, full_new = found.group(1).decode(), found.group(2).decode()
            if full_old.startswith(old) and full_new.startswith(new):
                rec.entries[k] = (status, full_old, full_new, path)
        while hunk >= 0:
            after = text.find(b"\n@@ ", hunk + 1, last)
            if h := _HUNK_RE.match(text, hunk, last):
                rec.sections[-1].append(_raw_hunk(h, text[h.end() + 1:after if after >= 0 else last].rstrip(b"\n")))
            hunk = after
        at = end


class _PatchParser:
    """Parse `--raw -p -U0` output (a `git log` or `diff-tree --stdin` stream, or one diff) into
    records, fed in blocks cut anywhere: each record is parsed once it is whole."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, block: bytes) -> list[_Record]:
        """The records this block completes: those before the last record start in it."""
        cut = _last_record(block)
        if cut < 0 or not cut and not (self._parts and self._parts[-1].endswith(b"\n")):
            self._parts.append(block)  # no record starts here (git writes one at a time: at 0 too)
            return []
        text = b"".join([*self._parts, block[:cut]])
        self._parts = [block[cut:]]
        return self.finish(text)

    def finish(self, text: bytes | None = None) -> list[_Record]:
        """The records in `text` (by default, all that is left), the last one whole too."""
        if text is None:
            text, self._parts = b"".join(self._parts), []
        text = b"\n" + text
        done: list[_Record] = []
        rec: _Record | None = None
        at = pos = 0
        while (sep := text.find(b"\x1f", pos)) >= 0:  # a commit's line holds them; a hunk's rarely
            start, pos = text.rfind(b"\n", 0, sep) + 1, text.find(b"\n", sep)
            pos = pos if pos >= 0 else len(text)  # that line's end: its other separators are skipped
            if not _HEAD_RE.match(text, start):
                continue
            if rec is not None:
                _fill(rec, text, at, start - 1)
                done.append(rec)
            head = _parse_commit(text[start:pos])
            rec, at = _Record(head.commit, head), pos
        if rec is not None:
            _fill(rec, text, at, len(text))
            done.append(rec)
        return done


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
                     "--full-index", "--", *(":(literal)" + p for p in paths))  # raw oids as %h: see `_fill`
    assert proc.stdin is not None and proc.stdout is not None
    try:  # a few bytes at most: written before a line is read
        proc.stdin.write((pairs or "").encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):  # git died; its stderr tells why
        pass
    return _read(proc, "log" if pairs is None else "diff-tree")


def _read(proc: Any, what: str) -> Generator[_Record, None, None]:
    parser = _PatchParser()
    try:
        while block := proc.stdout.read1(1 << 16):  # what git has written so far, not a line at a time
            yield from parser.feed(block)
        yield from parser.finish()
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
    rec = _Record(WORKING_TREE)
    _fill(rec, b"\n" + out, 0, len(out) + 1)
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
    _fill(rec, b"\n" + out, 0, len(out) + 1)
    return [h.hunk for section in rec.sections for h in section if not h.noop]
