"""ledger: the truth. The append-only log of every write (`log`: `Ledger`, `Entry`, the
order-free `fold`), the prefix a reader took in (`catchup`), the fold's snapshot between
processes (`foldsnap`, the one derived file of this package) and forks (`forks`). Imports
`core` only.
"""

from __future__ import annotations

from .log import Entry, FoldState, Ledger, fold, refold

__all__ = ["Entry", "FoldState", "Ledger", "fold", "refold"]
