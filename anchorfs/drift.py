"""The drift pass: re-check anchors through the hash cache, judge memories, demote scores.

This runs on every read, so the common case (nothing moved) costs one `lstat` per anchored
file plus a dict lookup: directory realpaths are resolved once per pass, the whole-file hash
comes from the racy-safe cache, and a file is only read again when its hash changed.
Staleness needs positive evidence: an anchor we cannot read is `unknown`, never `stale`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from .anchors import MAX_FILE_BYTES, STATE_DIR, is_state_name, judge, resolve_path
from .errors import AnchorError, UnsafePathError
from .hashing import HashCache
from .model import AnchorCheck, AnchorRef, Drift, Memory, Verdict, drift_of, utcnow

__all__ = ["DriftChecker", "MemoryDrift", "DriftReport", "envelope"]


class MemoryDrift(NamedTuple):
    """One memory's drift and its anchors' checks (a tuple: one is built per memory per read)."""

    memory: Memory
    drift: Drift
    checks: tuple[AnchorCheck, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.memory.id,
            "content": self.memory.content,
            "drift": self.drift.value,
            "anchors": [c.to_dict() for c in self.checks],
        }


@dataclass(slots=True)
class DriftReport:
    memories: list[MemoryDrift] = field(default_factory=list)

    def count(self, drift: Drift) -> int:
        return sum(1 for m in self.memories if m.drift is drift)

    @property
    def stale(self) -> list[MemoryDrift]:
        return [m for m in self.memories if m.drift is Drift.STALE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": len(self.memories),
            "stale": self.count(Drift.STALE),
            "unknown": self.count(Drift.UNKNOWN),
            "fresh": self.count(Drift.FRESH),
            "memories": [m.to_dict() for m in self.memories],
        }


_ERRNO_WORDS = {13: "permission denied", 21: "a directory where a file was", 40: "too many symlink levels"}


class DriftChecker:
    """One drift pass. Memoizes per anchor and per directory; create a new one per read."""

    def __init__(self, root_real: str, cache: HashCache) -> None:
        self.root_real = root_real
        self.cache = cache
        self._dirs: dict[str, str | None] = {}
        self._files: dict[str, tuple[str, os.stat_result] | AnchorCheck] = {}
        self._full: dict[str, str] = {}
        self._data: dict[str, bytes] = {}

    def _dir_real(self, rel_dir: str) -> str | None:
        """The realpath of a workspace folder if it stays inside and is not `.anchorfs/`."""
        if rel_dir in self._dirs:
            return self._dirs[rel_dir]
        result: str | None = self.root_real
        if rel_dir:
            real = os.path.realpath(os.path.join(self.root_real, rel_dir))
            rel = os.path.relpath(real, self.root_real)
            outside = rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel)
            state = is_state_name(rel.partition(os.sep)[0])  # `.AnchorFS` too: see is_state_name
            result = None if outside or state else real
        self._dirs[rel_dir] = result
        return result

    def _locate(self, path: str) -> tuple[str, os.stat_result]:
        """Real path and stat of an anchored file, refusing anything outside the root."""
        if "\0" in path or path[:1] == "/" or (".." in path and ".." in path.split("/")):
            raise UnsafePathError(f"{path} now resolves outside the workspace")
        cut = path.rfind("/")
        if cut < 0:
            if path == STATE_DIR:
                raise UnsafePathError(f"{path} is anchorfs's own state folder")
            dir_real: str | None = self.root_real
        else:
            rel_dir = path[:cut]
            dir_real = self._dirs[rel_dir] if rel_dir in self._dirs else self._dir_real(rel_dir)
            if dir_real is None:
                raise UnsafePathError(f"{path} now resolves outside the workspace")
        full = f"{dir_real}/{path[cut + 1:]}"
        st = os.lstat(full)
        if st.st_mode & 0o170000 == 0o120000:  # a symlink: the whole chain must stay inside
            _, full = resolve_path(self.root_real, path)
            st = os.stat(full)
        return full, st

    def _probe(self, path: str) -> tuple[str, os.stat_result] | AnchorCheck:
        """(sha256, stat) of the file at an anchor's path, or the verdict that stops there.

        Memoized per path for the pass: many memories often rest on one file.
        """
        found = self._files.get(path)
        if found is not None:
            return found
        result: tuple[str, os.stat_result] | AnchorCheck
        try:
            full, st = self._locate(path)
            if stat.S_ISREG(st.st_mode):
                result = (self.cache.sha256(path, full, st=st), st)
                self._full[path] = full
            elif stat.S_ISDIR(st.st_mode):
                result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: a directory where a file was")
            else:
                result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: not a regular file")
        except UnsafePathError:
            result = AnchorCheck(AnchorRef(path), Verdict.UNSAFE, f"{path} now resolves outside the workspace")
        except AnchorError as exc:  # e.g. a symlink to the workspace root itself: a folder, not a file
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: {exc}")
        except FileNotFoundError:
            result = AnchorCheck(AnchorRef(path), Verdict.DELETED, f"{path} deleted")
        except OSError as exc:
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: {_why(exc)}")
        self._files[path] = result
        return result

    def check_anchor(self, ref: AnchorRef) -> AnchorCheck:
        probe = self._probe(ref.path)
        if type(probe) is tuple:
            sha, st = probe
            if sha == ref.sha256:
                return AnchorCheck(ref, Verdict.FRESH, "unchanged", ref.lines)
            return self._changed(ref, st)
        assert isinstance(probe, AnchorCheck)
        detail = probe.detail
        if probe.verdict is Verdict.UNSAFE and ref.spec != ref.path:
            detail = f"{ref.spec} now resolves outside the workspace"
        return AnchorCheck(ref, probe.verdict, detail)

    def _changed(self, ref: AnchorRef, st: os.stat_result) -> AnchorCheck:
        """The file's hash moved: judge a narrowed anchor by its own text."""
        if not ref.symbol and not ref.lines:
            return AnchorCheck(ref, Verdict.CHANGED, f"{ref.path} changed")
        if st.st_size > MAX_FILE_BYTES:
            return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: larger than {MAX_FILE_BYTES >> 20} MiB")
        data = self._data.get(ref.path)
        if data is None:
            try:
                with open(self._full[ref.path], "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
            except OSError as exc:
                return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: {_why(exc)}")
            self._data[ref.path] = data
        verdict, detail, where = judge(ref, data)
        return AnchorCheck(ref, verdict, detail, where)

    def check(self, memory: Memory) -> MemoryDrift:
        checks = tuple(self.check_anchor(a) for a in memory.anchors)
        return MemoryDrift(memory, drift_of([c.verdict for c in checks]), checks)

    def check_all(self, memories: Sequence[Memory],
                  progress: Callable[[int, int], None] | None = None) -> DriftReport:
        """`check` over many memories, with the all-fresh case inlined: it is nearly every case."""
        report = DriftReport()
        out = report.memories
        files, probe, check = self._files, self._probe, self.check
        total = len(memories)
        fresh, fresh_drift, new = Verdict.FRESH, Drift.FRESH, tuple.__new__
        for memory in memories:
            anchors = memory.anchors
            if len(anchors) == 1:
                ref = anchors[0]
                found = files.get(ref.path) or probe(ref.path)
                if type(found) is tuple and found[0] == ref.sha256:
                    # tuple.__new__ skips the NamedTuples' Python-level __new__: same values, faster
                    check_ = new(AnchorCheck, (ref, fresh, "unchanged", ref.lines))
                    out.append(new(MemoryDrift, (memory, fresh_drift, (check_,))))
                else:
                    out.append(check(memory))
            else:
                out.append(check(memory))
            if progress is not None:
                progress(len(out), total)
        return report


def _why(exc: OSError) -> str:
    return _ERRNO_WORDS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()


def age_days(memory: Memory, now: datetime) -> float:
    since = memory.verified_at or memory.recorded_at
    return max(0.0, (now - since).total_seconds() / 86400.0)


def expired(memory: Memory, expiry_days: float, now: datetime) -> bool:
    """Past its kind's expiry: demoted as unverified (the boundary day itself still holds)."""
    return age_days(memory, now) > expiry_days


def envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
             expiry_days: float, now: datetime | None = None, history: str | None = None) -> str:
    """One line an agent can read before trusting the memory.

    `history` is git's version (`anchorfs.history.history_envelope`) when there is one: it
    replaces the stale line, and the "anchored ..." part of a fresh one.
    """
    if history is not None and memory.status == "active":
        if drift is Drift.STALE and history.startswith("[STALE"):
            return history
        if drift is Drift.FRESH and history.startswith("[fresh · ") and checks:
            base = envelope(memory, drift, checks, expiry_days=expiry_days, now=now)
            anchored = history[len("[fresh · "):-1]
            rest = base[base.find(" · ", len("[fresh · ")):-1] if base.count(" · ") > 1 else ""
            return f"[fresh · {anchored}{rest}]"
    now = now or utcnow()
    since = (memory.verified_at or memory.recorded_at).date().isoformat()
    commits = {c.anchor.commit for c in checks if c.anchor.commit}
    at = f" at {sorted(commits)[0][:7]}" if len(commits) == 1 else ""
    tail = ""
    if expired(memory, expiry_days, now):
        tail = f" · unverified for {int(age_days(memory, now))} days ({memory.kind} expiry {int(expiry_days)})"
    if memory.status != "active":
        who = f" by {memory.superseded_by}" if memory.superseded_by else ""
        until = memory.valid_until.date().isoformat() if memory.valid_until else "?"
        return f"[{memory.status.upper()}{who} on {until} · held from {memory.valid_from.date().isoformat()} — do not rely on this]"
    if drift is Drift.STALE:
        bad = next(c for c in checks if c.verdict in (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING))
        return f"[STALE · {bad.detail} since {since} — re-verify before relying on this]"
    if drift is Drift.UNKNOWN:
        bad = next(c for c in checks if c.verdict in (Verdict.UNREADABLE, Verdict.UNSAFE))
        return f"[UNKNOWN · {bad.detail} — re-verify before relying on this]"
    if not checks:
        return f"[unanchored · recorded {since}{tail}]"
    moved = [c for c in checks if c.verdict is Verdict.MOVED]
    extra = f" · {moved[0].detail}" if moved else ""
    return f"[fresh · anchored {since}{at}{extra}{tail}]"
