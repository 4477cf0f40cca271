"""One anchor carried down a walk: whether it holds at each step, and where its text stands.

The walk's verdict at every step is the one `judge` would give that version of the file, so
`bisect` never contradicts `drift`: hunks that miss the tracked span prove the text identical;
when a hunk hits it, the content is re-judged, so a span moved as a block is still found.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial

from ..anchor.anchors import MAX_FILE_BYTES, judge, narrowed_text, resolve_path, same_chars
from ..core.errors import AnchorError
from ..core.git import Change, worktree_changes
from .follow import _NULL_OIDS, _Follower, _Judged, _intact, _norm, _renamed_to
from .patch import _MAX_HUNKS, Hunk, _RawHunk, _blob_hunks, _headline, _worktree_patch
from .repo import WORKING_TREE, _Commit, _Repo
from .results import _BREAKS, _HOLDS, Step
from ..core.model import AnchorRef, Verdict, span_text, to_iso

__all__ = ["_Tracker"]


def _shift(span: tuple[int, int], hunks: list[Hunk]) -> tuple[int, int]:
    delta = sum(h.new_count - h.old_count for h in hunks if h.above(span))
    return span[0] + delta, span[1] + delta


class _Tracker(_Follower):
    """Carries one anchor down the walk. Lines anchors follow hunks exactly. Symbol anchors are
    re-parsed only when a hunk hits the symbol or its enclosing definitions or mentions one of
    its names; other steps carry the verdict (`provisional`). The last version is then judged in
    full, and any disagreement re-walks the anchor parsing every step."""

    def __init__(self, repo: _Repo, ref: AnchorRef, base_blob: str | None, *, fast: bool = True) -> None:
        self.repo = repo
        self.orig = ref  # the anchor as recorded; `ref`: the same anchor at the path the walk follows
        self.ref = ref
        self.fast = fast
        self.kind = "symbol" if ref.symbol else "lines" if ref.lines else "file"
        self.names = tuple(p.encode() for p in (ref.symbol or "").split(".") if p)
        self.state: bool | None = None  # True holds, False broken, None: the anchored text was never committed
        self.verdict = Verdict.UNREADABLE  # of the latest version judged (the anchored one to begin with)
        self.span: tuple[int, int] | None = None  # where the text stands in the previous step's version
        self.guard: tuple[int, int] | None = None
        self.geometry = False  # a symbol's verdict, span and guard are known for the previous version
        self.provisional = 0
        self.mismatch = False  # a carried verdict turned out wrong: redo the walk parsing every step
        self.text: bytes | None = None  # the anchored text (line endings normalized), when known
        self.anchored_oid: str | None = None
        self.prev_oid = base_blob
        self.final_data: bytes | None = None
        data = repo.blobs.get(base_blob) if base_blob else None
        if data is None:
            return
        if hashlib.sha256(data).hexdigest() == ref.sha256:
            self.anchored_oid = base_blob
            self.state, self.verdict = True, Verdict.FRESH
            if self.kind == "file":
                return
            try:
                text, _ = narrowed_text(ref, data)
                self.text = _norm(text)
            except AnchorError:
                pass
        elif self.kind == "file":
            return  # dirty at write time: the anchored bytes are not in this commit
        judged = self._judge(data, ref.lines)
        if judged.verdict in _HOLDS:
            self.state, self.verdict = True, judged.verdict
            self._place(judged)

    def _place(self, judged: _Judged) -> None:
        self.span = judged.where
        self.guard = judged.guard
        self.geometry = self.kind == "symbol" and (
            judged.verdict is Verdict.SYMBOL_MISSING or (judged.where is not None and judged.guard is not None)
        )

    def _relative(self, verdict: Verdict, where: tuple[int, int] | None) -> Verdict:
        """A holding verdict as `drift` gives it: `moved` in another file or (lines) at other lines."""
        if verdict not in (Verdict.FRESH, Verdict.MOVED):
            return verdict
        if self.ref.path != self.orig.path:
            return Verdict.MOVED
        if self.kind == "lines" and where is not None and where != self.orig.lines:
            return Verdict.MOVED
        return verdict

    def _step_verdict(self, verdict: Verdict, before: tuple[int, int] | None,
                      after: tuple[int, int] | None, moved_file: bool) -> Verdict:
        """What this step did, for `log`: `moved` only when it moved the text; in place is `fresh`."""
        if verdict not in (Verdict.FRESH, Verdict.MOVED):
            return verdict
        if moved_file:
            return Verdict.MOVED
        if self.kind == "lines" and before is not None and after is not None:
            return Verdict.MOVED if after != before else Verdict.FRESH
        if verdict is Verdict.MOVED and self.ref.path != self.orig.path:
            return Verdict.FRESH  # in place in the file it moved to earlier
        return verdict

    # one step ----------------------------------------------------------------------------
    def step(self, meta: _Commit, distance: int, entry: tuple[str, str, str], hunks: list[_RawHunk] | None,
             binary: bool, load: Callable[[], bytes | None], *, size: int | None = None,
             follow: tuple[Callable[[], list[Change]], Callable[[str, str], bytes | None]] | None = None) -> Step:
        """Judge the version a step left behind (the step touched the anchored file). `size`: that
        version's size when known (over `MAX_FILE_BYTES`: `unreadable`, never loaded). `follow`
        (this step's changes, a loader by path and oid): where to look when the step loses the text."""
        status, _, oid = entry
        deleted = status == "D" or oid in _NULL_OIDS
        new_oid = None if deleted else oid
        before = self.span if (self.kind == "symbol" and self.geometry) or (
            self.kind == "lines" and self.state and self.span) else None
        usable = [h for h in (hunks or []) if not h.noop]
        plain = [h.hunk for h in usable]
        trusted = hunks is not None and not binary
        relevant: tuple[Hunk, ...] = ()
        renamed: str | None = None
        judged: _Judged

        if not deleted and size is not None and size > MAX_FILE_BYTES:
            judged = _Judged(Verdict.UNREADABLE,
                             f"{self.ref.path} is too large to judge ({size} bytes, over {MAX_FILE_BYTES})")
        elif deleted:
            judged = _Judged(Verdict.DELETED, f"{self.ref.path} deleted")
        elif self.kind == "file":
            if self.anchored_oid is not None:
                same = new_oid == self.anchored_oid
                judged = _Judged(Verdict.FRESH if same else Verdict.CHANGED,
                                 "identical to the anchored file" if same else f"{self.ref.path} changed")
            else:
                judged = self._load_and_judge(load, None, new_oid)
            relevant = tuple(plain[:_MAX_HUNKS])
        elif self.kind == "lines":
            judged, relevant = self._step_lines(before, plain, trusted, load, new_oid)
        else:
            judged, relevant = self._step_symbol(before, usable, trusted, load, new_oid)

        moved_to: str | None = None
        if self.state is True and follow and (judged.verdict in (Verdict.DELETED, Verdict.SYMBOL_MISSING) or (
                judged.verdict is Verdict.CHANGED and self.kind == "lines")):  # lines gone from a file still there
            changes, loader = follow
            listed = changes()
            found = self._relocate(listed, loader)
            if found is not None:
                old_oid = self.prev_oid
                judged, moved_to, new_oid, renamed = found
                self.ref = replace(self.orig, path=moved_to)
                relevant = ()
                if judged.verdict in _BREAKS and old_oid and new_oid not in _NULL_OIDS:
                    # changed on the way: the hunks are those between the old file and the new one
                    relevant = _headline(_blob_hunks(self.repo.top, old_oid, new_oid), before, judged.where)
            elif deleted:
                renamed = _renamed_to(listed, self.repo.repo_path(self.ref.path))

        verdict = self._relative(judged.verdict, judged.where)
        holds_now: bool | None = True if verdict in _HOLDS else False if verdict in _BREAKS else None
        invalidates = self.state is True and holds_now is False
        restores = self.state is False and holds_now is True
        self.verdict = verdict  # what this version earns: an unreadable one is not carried over
        if holds_now is True:
            self.state = True
        elif holds_now is False and self.state is not None:
            self.state = False
        if self.kind == "lines":
            self.span = judged.where if holds_now else None
        elif self.kind == "symbol":
            if holds_now is None:
                self.span, self.guard, self.geometry = None, None, False
            else:
                self._place(judged)
        self.prev_oid = new_oid
        after = judged.where if holds_now else None
        return Step(
            commit=meta.commit, short=meta.short, date=meta.date, author=meta.author, subject=meta.subject,
            verdict=self._step_verdict(verdict, before, after, moved_to is not None), detail=judged.detail,
            lines_before=before, lines_after=after, hunks=relevant, invalidates=invalidates, restores=restores,
            merge=len(meta.parents) > 1, renamed_to=renamed, distance=distance, path=self.ref.path, path_now=moved_to,
        )

    def _load_and_judge(self, load: Callable[[], bytes | None], near: tuple[int, int] | None,
                        oid: str | None = None) -> _Judged:
        data = load()
        if data is None:
            return _Judged(Verdict.UNREADABLE, self.repo.blobs.why_missing(oid, self.ref.path))
        if self.kind == "lines" and self.text is not None and not (
                same_chars(self.text, data) if self.ref.token_hash else self.text in _norm(data)):
            return _Judged(Verdict.CHANGED, f"{self.ref.spec} changed")  # no block can match, in any layout
        return self._judge(data, near)

    def _step_lines(self, before: tuple[int, int] | None, hunks: list[Hunk], trusted: bool,
                    load: Callable[[], bytes | None], new_oid: str | None) -> tuple[_Judged, tuple[Hunk, ...]]:
        if before is None or not trusted:
            judged = self._load_and_judge(load, before or self.ref.lines, new_oid)
            if judged.verdict is Verdict.MOVED and before and judged.where != before:
                judged = replace(judged, detail=f"lines {span_text(before)} now at {span_text(judged.where)}")
            touched = tuple(h for h in hunks if before and h.hits(before))
            return judged, touched if judged.verdict in _BREAKS else ()
        hit = [h for h in hunks if h.hits(before)]
        if not hit:
            after = _shift(before, hunks)
            if new_oid == self.anchored_oid:
                return _Judged(Verdict.FRESH, "identical to the anchored file", after), ()
            if self.verdict not in (Verdict.FRESH, Verdict.MOVED):  # reformatted: still so
                return _Judged(self.verdict, f"{self.ref.spec} {self.verdict.value}", after), ()
            verdict = _intact("lines") if after == self.ref.lines else Verdict.MOVED
            detail = (f"lines {span_text(before)} now at {span_text(after)}" if after != before
                      else "unchanged; the file changed elsewhere")
            return _Judged(verdict, detail, after), ()
        judged = self._load_and_judge(load, before, new_oid)
        if judged.verdict is Verdict.CHANGED:
            judged = replace(judged, detail=f"{hit[0].header} hits lines {span_text(before)}")
        elif judged.verdict is Verdict.MOVED:
            judged = replace(judged, detail=f"the text of lines {span_text(before)} now stands at {span_text(judged.where)}")
        return judged, tuple(hit) if judged.verdict in _BREAKS else ()

    def _step_symbol(self, before: tuple[int, int] | None, hunks: list[_RawHunk], trusted: bool,
                     load: Callable[[], bytes | None], new_oid: str | None) -> tuple[_Judged, tuple[Hunk, ...]]:
        plain = [h.hunk for h in hunks]
        named = any(n in h.body for h in hunks for n in self.names)
        guard = self.guard
        if (self.fast and trusted and self.geometry and not named and self.verdict is not Verdict.UNREADABLE
                and (guard is None or not any(h.hits(guard) for h in plain))):
            # Nothing that decides what the symbol resolves to changed: carry the verdict.
            self.provisional += 1
            if self.verdict is Verdict.SYMBOL_MISSING:
                return _Judged(Verdict.SYMBOL_MISSING, f"{self.ref.spec} no longer found"), ()
            assert before is not None and guard is not None
            after, guard_after = _shift(before, plain), _shift(guard, plain)
            if new_oid == self.anchored_oid:
                return _Judged(Verdict.FRESH, "identical to the anchored file", after, guard_after), ()
            if self.verdict not in (Verdict.FRESH, Verdict.MOVED):  # changed, reformatted: still so
                return _Judged(self.verdict, f"{self.ref.spec} {self.verdict.value}", after, guard_after), ()
            return _Judged(_intact("symbol"), f"{self.ref.spec} unchanged; the file changed elsewhere",
                           after, guard_after), ()
        carried, self.provisional = self.provisional, 0
        data = load()
        if data is None:
            return _Judged(Verdict.UNREADABLE, self.repo.blobs.why_missing(new_oid, self.ref.path)), ()
        judged = self._judge(data, None)
        if carried and (judged.verdict in _HOLDS) != (self.verdict in _HOLDS) and self.prev_oid:
            # A flip after carried steps: make sure this step flipped it, not a carried one.
            prev = self.repo.blobs.get(self.prev_oid)
            if prev is not None and (self._judge(prev, None).verdict in _HOLDS) != (self.verdict in _HOLDS):
                self.mismatch = True
        relevant = _headline(plain, before, judged.where, everything=False)
        if judged.verdict in _BREAKS and not relevant:
            relevant = tuple(plain[:_MAX_HUNKS])
        return judged, relevant

    # the working tree --------------------------------------------------------------------
    def working_tree(self) -> Step | None:
        """The last step: the file on disk against HEAD's version."""
        ref = self.ref
        head_data = self.repo.blobs.get(self.prev_oid) if self.prev_oid else None
        head_big = bool(self.prev_oid) and self.repo.blobs.too_large(self.prev_oid or "")
        self.final_data = head_data
        try:
            _, real = resolve_path(self.repo.root_real, ref.path)
        except AnchorError:
            return None  # drift reports it unsafe; history has no evidence to add
        from ..core.guard import GuardError, NotRegularError, open_guarded

        try:  # the one guarded open: a link out or a FIFO swapped in is refused, never read
            fd, st = open_guarded(real, root=self.repo.root_real)
            with os.fdopen(fd, "rb") as fh:
                data: bytes | None = fh.read(MAX_FILE_BYTES + 1)
            mtime: str | None = to_iso(datetime.fromtimestamp(st.st_mtime).astimezone())
        except NotRegularError as exc:
            if not exc.is_dir:
                return None
            data, mtime = None, None
        except (FileNotFoundError, NotADirectoryError):
            data, mtime = None, None
        except (OSError, GuardError):
            return None
        self.final_data = data
        meta = _Commit(WORKING_TREE, WORKING_TREE, mtime, None, "uncommitted changes")
        head = self.repo.head
        follow = (partial(worktree_changes, self.repo.top, head), self._read_disk)
        pending = self.state is None
        if pending:
            # The anchored text never reached a commit: it lived on disk when the anchor was
            # taken, so the disk is where it holds or was lost.
            self.state = True
        if data is None:
            if head_data is None and not head_big and not pending:
                return None
            step = self.step(meta, -1, ("D", "", ""), None, False, lambda: None, follow=follow)
            if step.path_now is not None:
                self.final_data = self._read_disk(step.path_now, "")
            return step
        if data == head_data and not pending:
            return None
        if head_big and len(data) > MAX_FILE_BYTES and not pending:
            return None  # too large on disk as at HEAD: HEAD's unreadable step already says so
        hunks: list[_RawHunk] | None = []
        binary = False
        if head_data is not None and data != head_data:
            rpath = self.repo.repo_path(ref.path)
            found = _worktree_patch(self.repo.top, rpath).mine(rpath)
            if found is not None:
                _, hunks, binary = found
        elif head_data is None:
            hunks = None  # untracked: nothing to diff against
        same = hashlib.sha256(data).hexdigest() == ref.sha256
        oid = self.anchored_oid if same and self.anchored_oid else "working-tree"
        if pending and self.kind == "symbol":
            self.geometry = False
        step = self.step(meta, -1, ("M", self.prev_oid or "", oid), hunks, binary, lambda: data, size=len(data),
                         follow=follow)
        if step.path_now is not None:
            self.final_data = self._read_disk(step.path_now, "")
        if pending and step.verdict in _HOLDS and data == head_data:
            return None  # an uncommitted anchor still on disk, unchanged since HEAD: no news
        return step

    def _read_disk(self, path: str, _oid: str = "") -> bytes | None:
        """A workspace file's bytes through the one guarded open; None if gone, odd or too big."""
        from ..core.guard import GuardError, open_guarded

        try:
            _, real = resolve_path(self.repo.root_real, path)
            fd, st = open_guarded(real, root=self.repo.root_real)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except (AnchorError, GuardError, OSError):
            return None
        return None if len(data) > MAX_FILE_BYTES else data

    def consistent(self) -> bool:
        """After the walk: a carried symbol verdict agrees with judging the last version."""
        if self.mismatch:
            return False
        if self.kind != "symbol" or not self.provisional or self.final_data is None:
            return True
        verdict, _, where = judge(self.ref, self.final_data)
        return self._relative(verdict, where) is self.verdict
