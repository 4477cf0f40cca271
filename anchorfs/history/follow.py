"""Rename following: where a step moved an anchor's text (a rename, a move, a split), judged there.

Not `git log --follow` (one path per log, misbehaves with `--first-parent`): at a step that loses
the anchored text, one `diff-tree -M` of that step says where it went. Found intact, the step is
`moved` (with `path_now`) and the walk follows the new file; a rename whose text differs is the
culprit, `changed` at its new path. So the culprit never is a commit that only moved the content.
`_Tracker` (which carries the anchor down the walk) builds on `_Follower`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from ..anchor.anchors import (MAX_FILE_BYTES, STATE_DIR, _distinctive, judge, narrowed_text, nearest_now, same_chars,
                              text_hash)
from ..core.errors import AnchorError, AnchorfsError
from ..core.git import Change
from ..drift.moves import _closeness  # the same order of candidates as `drift`'s own search
from .repo import _Repo
from .results import _BREAKS, _HOLDS
from ..core.model import AnchorRef, Verdict, span_text

__all__ = ["_NULL_OIDS", "_intact", "_norm", "_Judged", "_Follower", "_renamed_to", "_safe_repo_path"]


def _renamed_to(changes: list[Change], repo_path: str) -> str | None:
    """Where git saw `repo_path` renamed to among one step's changes (repo paths), if it did."""
    return next((c.new for c in changes if c.status == "R" and c.old == repo_path), None)


_FOLLOW_FILES = 64
"""Candidate files one step may load looking for content its anchor lost (renames first)."""
_FOLLOW_BYTES = 16 * 1024 * 1024
"""Bytes one step may load looking for it."""


_NULL_OIDS = {"0" * 40, "0" * 64}


@lru_cache(maxsize=None)
def _intact(kind: str) -> Verdict:
    """The verdict `judge` gives a narrowed anchor (`kind` lines or symbol) whose text is intact
    at its own place while the file changed elsewhere. Asked of `judge` itself, once, so a
    carried step (judged from hunks) never contradicts what `drift` says of that version."""
    if kind == "lines":
        before, after, ref = b"a = 1\nb = 2\n", b"a = 1\nb = 3\n", AnchorRef("probe.txt", lines=(1, 1))
    else:
        before, after = b"def f():\n    return 1\n", b"import os\n\n\ndef f():\n    return 1\n"
        ref = AnchorRef("probe.py", symbol="f")
    try:
        text, _ = narrowed_text(ref, before)
        probe = replace(ref, sha256=hashlib.sha256(before).hexdigest(), content_hash=text_hash(text))
        verdict = judge(probe, after)[0]
    except AnchorfsError:  # pragma: no cover - no grammar: the older rule
        return Verdict.MOVED
    return verdict if verdict in (Verdict.FRESH, Verdict.MOVED) else Verdict.MOVED


def _norm(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def _safe_repo_path(path: str) -> bool:
    parts = path.split("/")
    return (bool(path) and not path.startswith("/") and "\0" not in path and ".." not in parts
            and parts[0] != STATE_DIR)


@dataclass(frozen=True, slots=True)
class _Judged:
    verdict: Verdict
    detail: str
    where: tuple[int, int] | None = None
    guard: tuple[int, int] | None = None
    """A symbol's span together with every symbol enclosing it: edits outside it and not naming
    it cannot change what the symbol resolves to (short of breaking the file's syntax)."""


class _Follower:
    """The anchor as a walk knows it, judged in one version of a file (its own or another). The
    state it reads is set by `_Tracker.__init__`."""

    repo: _Repo
    orig: AnchorRef
    ref: AnchorRef
    kind: str
    names: tuple[bytes, ...]
    text: bytes | None
    anchored_oid: str | None
    prev_oid: str | None

    # judging whole versions ------------------------------------------------------------
    def _judge(self, data: bytes, near: tuple[int, int] | None) -> _Judged:
        """`judge`'s verdict for this version (symbols: the same rules, plus the guard)."""
        if len(data) > MAX_FILE_BYTES:
            return _Judged(Verdict.UNREADABLE, f"{self.ref.path} is too large to judge")
        if self.kind != "symbol":
            ref = replace(self.ref, lines=near) if self.kind == "lines" and near else self.ref
            verdict, detail, where = judge(ref, data, text=self.text)  # the text: no parse unless it can match
            prev = self.repo.blobs.get(self.prev_oid) if (verdict is Verdict.CHANGED and near and self.prev_oid and self.text
                                                         and same_chars(self.text, data)) else None
            if prev is not None:  # shifted and re-laid in one step: followed from the version before, as drift does
                verdict, detail, where = nearest_now(replace(ref, sha256=hashlib.sha256(prev).hexdigest()), data, prev,
                                                     detail)
            return _Judged(verdict, detail, where)
        return self._judge_symbol(data)

    def _judge_symbol(self, data: bytes, ref: AnchorRef | None = None) -> _Judged:
        from ..anchor.symbols import list_symbols

        ref = ref or self.ref
        same_file = hashlib.sha256(data).hexdigest() == ref.sha256
        try:
            symbols = list_symbols(ref.path, data)
        except AnchorError as exc:
            if same_file:
                return _Judged(Verdict.FRESH, "unchanged")
            return _Judged(Verdict.UNREADABLE, str(exc))
        sym = next((s for s in symbols if s.name == ref.symbol), None)
        if sym is None:
            if same_file:  # pragma: no cover - the symbol was there when the anchor was taken
                return _Judged(Verdict.FRESH, "unchanged")
            return _Judged(Verdict.SYMBOL_MISSING, f"{ref.spec} no longer found")
        where = (sym.start_line, sym.end_line)
        outer = [s for s in symbols if s.start_byte <= sym.start_byte and s.end_byte >= sym.end_byte]
        guard = (min(s.start_line for s in outer), max(s.end_line for s in outer))
        if same_file:
            return _Judged(Verdict.FRESH, "unchanged", where, guard)
        text = data[sym.start_byte:sym.end_byte].replace(b"\r\n", b"\n")
        if hashlib.sha256(text).hexdigest() == ref.content_hash:
            return _Judged(_intact("symbol"), f"{ref.spec} unchanged; the file changed elsewhere", where, guard)
        verdict, detail, _ = judge(ref, data)  # changed, or reformatted where the judge knows tokens
        if verdict in _BREAKS or verdict in _HOLDS:
            return _Judged(verdict, detail, where, guard)
        return _Judged(Verdict.CHANGED, f"{ref.spec} changed", where, guard)

    # following the text to another file --------------------------------------------------
    def _judge_in(self, path: str, data: bytes) -> _Judged:
        """The anchor judged in `data`, the bytes of another file `path`: intact there is `moved`."""
        orig = self.orig
        probe = replace(orig, path=path)
        if self.kind == "file":
            if hashlib.sha256(data).hexdigest() == orig.sha256:
                return _Judged(Verdict.MOVED, f"{orig.spec} now at {path}")
            return _Judged(Verdict.CHANGED, f"{orig.path} renamed to {path} and changed")
        if len(data) > MAX_FILE_BYTES:
            return _Judged(Verdict.UNREADABLE, f"{path} is too large to judge")
        if self.kind == "symbol":
            judged = self._judge_symbol(data, probe)
        else:
            verdict, detail, span = judge(probe, data, text=self.text)
            judged = _Judged(verdict, detail, span)
        at = f" (lines {span_text(judged.where)})" if judged.where else ""
        if judged.verdict in (Verdict.FRESH, Verdict.MOVED):
            return replace(judged, verdict=Verdict.MOVED, detail=f"{orig.spec} now at {path}{at}")
        if judged.verdict is Verdict.REFORMATTED:
            return replace(judged, detail=f"{orig.spec} now at {path}, reformatted: same tokens, other layout")
        if judged.verdict is Verdict.CHANGED:
            return replace(judged, detail=f"{orig.path} renamed to {path}; {orig.spec} changed")
        if judged.verdict is Verdict.SYMBOL_MISSING:
            return replace(judged, detail=f"{orig.path} renamed to {path}; {orig.spec} no longer found")
        return judged

    def _relocate(self, changes: list[Change], load: Callable[[str, str], bytes | None]
                  ) -> tuple[_Judged, str, str, str | None] | None:
        """Where the text this step lost went, by `drift`'s rules: the file git saw ours renamed to,
        else the first file the step added, copied, renamed or (a symbol, distinctive lines)
        changed, closest name first, holding the text intact: (judged, path, oid, renamed_to).
        A rename whose text differs is its evidence (`changed`) unless an intact copy turns up."""
        from ..anchor.symbols import language_for

        repo = self.repo
        rpath = repo.repo_path(self.ref.path)
        renamed = _renamed_to(changes, rpath)

        def inside(repo_path: str) -> str | None:
            p = repo.workspace_path(repo_path)
            return None if p.startswith(":/") or not _safe_repo_path(p) else p

        seen = {rpath}
        others: list[tuple[str, str]] = []
        for c in changes:
            if (c.status in ("A", "C", "R", "?") or c.status in ("M", "T") and self.kind != "file") and c.new not in seen:
                seen.add(c.new)
                p = inside(c.new)
                if p is not None and c.new != renamed:
                    others.append((p, c.oid))
        others.sort(key=lambda pair: _closeness(self.orig.path)(pair[0]))
        queue: list[tuple[str, str, bool]] = []
        if renamed is not None and inside(renamed) is not None:
            oid = next(c.oid for c in changes if c.status == "R" and c.old == rpath)
            queue.append((inside(renamed) or "", oid, True))
        queue += [(p, oid, False) for p, oid in others]
        lang = language_for(self.orig.path) if self.kind == "symbol" else None
        ext = os.path.splitext(self.orig.path)[1]
        leaf = self.names[-1] if self.names else None
        files = spent = 0
        evidence: tuple[_Judged, str, str, str | None] | None = None
        for path, oid, is_rename in queue:
            if not is_rename:
                if self.kind == "file" and self.anchored_oid and oid not in _NULL_OIDS:
                    if oid == self.anchored_oid:  # the very blob: no need to read it
                        return _Judged(Verdict.MOVED, f"{self.orig.spec} now at {path}"), path, oid, renamed
                    continue
                if self.kind == "symbol" and language_for(path) != lang:
                    continue
                if self.kind == "lines" and os.path.splitext(path)[1] != ext:
                    continue
            if files >= _FOLLOW_FILES or spent > _FOLLOW_BYTES:
                break
            data = load(path, oid)
            files += 1
            if data is None:
                continue
            spent += len(data)
            if not is_rename:
                if leaf is not None and leaf not in data:
                    continue
                if self.kind == "lines" and self.text is not None and not (  # the tracker's rule: no match possible
                        same_chars(self.text, data) if self.orig.token_hash else self.text in _norm(data)):
                    continue
            judged = self._judge_in(path, data)
            if judged.verdict in _HOLDS and (is_rename or self.kind != "lines" or _distinctive(data, judged.where)):
                return judged, path, oid, renamed
            if is_rename and judged.verdict is not Verdict.UNREADABLE:
                evidence = (judged, path, oid, renamed)
        return evidence
