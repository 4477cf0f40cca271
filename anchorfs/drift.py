"""The drift pass's face: every name callers import from `anchorfs.drift`, from the module of
its concept, imported the first time it is asked for (PEP 562).

- `anchorfs.drift_check`: `DriftChecker`, the pass (re-check anchors through the hash cache,
  judge memories; one memory, or a whole workspace in batches the cache vouches for at once);
  it stands on `drift_moves.MoveSearch` (where moved content went), which stands on
  `drift_probe.FileProbe` (the pass's files, located, hashed and read once each).
- `anchorfs.drift_batch`: the batch pass's plan (`_Plan`, `_plan_of`, `plan_of_files`).
- `anchorfs.drift_report`: the results (`MemoryDrift`, `DriftReport`).
- `anchorfs.envelopes`: the freshness envelope line (`envelope`, `weak_envelope`, `expired`).

So `from anchorfs.drift import envelope` (a hook's digest) loads the envelope and the model,
not the checker. The names are the very objects of their modules; the pass's tunables
(`_CHUNK`, `_RECHECKS`, `_FOLLOW_BUDGET`, ...) are not served here: a module reads its own, so
patch them there (`anchorfs.drift_check._CHUNK`).
"""

from __future__ import annotations

__all__ = ["DriftChecker", "MemoryDrift", "DriftReport", "envelope", "weak_envelope", "WEAK_MARK"]

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .drift_batch import _HEAD, _PLANS, _SHA, _absent, _places, _Plan, _plan_of, _plans_lock, _suspicious, plan_of_files
    from .drift_check import _THEN_TOKENS, DriftChecker
    from .drift_moves import (
        _FOLLOWED,
        _GONE,
        _SKIP_DIRS,
        _TOPS,
        _UNFOUND,
        MoveSearch,
        _closeness,
        _followed_lock,
        _move_key,
        _utf8,
    )
    from .drift_probe import _ERRNO_WORDS, FileProbe, _why
    from .drift_report import _ANCHORS, _PATH, DriftReport, MemoryDrift, _all_fresh, _Chained, _new
    from .envelopes import WEAK_MARK, _envelope, _history_parts, _moved_words, age_days, envelope, expired, weak_envelope
else:
    _HOMES = {
        **dict.fromkeys(("DriftChecker", "_THEN_TOKENS"), "drift_check"),
        **dict.fromkeys(("MoveSearch", "_FOLLOWED", "_UNFOUND", "_followed_lock", "_GONE", "_TOPS", "_SKIP_DIRS",
                         "_move_key", "_utf8", "_closeness"), "drift_moves"),
        **dict.fromkeys(("FileProbe", "_why", "_ERRNO_WORDS"), "drift_probe"),
        **dict.fromkeys(("_Plan", "_PLANS", "_plans_lock", "_plan_of", "plan_of_files", "_places", "_absent",
                         "_suspicious", "_SHA", "_HEAD"), "drift_batch"),
        **dict.fromkeys(("MemoryDrift", "DriftReport", "_Chained", "_new", "_all_fresh", "_ANCHORS", "_PATH"),
                        "drift_report"),
        **dict.fromkeys(("envelope", "weak_envelope", "WEAK_MARK", "expired", "age_days", "_history_parts",
                         "_envelope", "_moved_words"), "envelopes"),
    }

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(__import__(home, globals(), None, (name,), 1), name)  # `from .home import name`
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_HOMES})
