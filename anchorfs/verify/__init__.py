"""verify: what a memory's prose claims (paths, symbols, URLs), checked against the workspace.

`text` finds the claims in a memory's text; `claims` checks them (`verify`, `--mark`) and
proposes anchors for unanchored memories from what their text names. Imports `core`
and `anchor` only (`drift` for nothing).
"""

from __future__ import annotations

from .claims import (CLAIM_KINDS, ClaimResult, MemoryVerdict, SymbolIndex, VerifyReport, check_memory, check_url,
                     check_urls, mark_reason, marked_claims, Suggestion, SuggestReport, suggest_anchors, suggest_report,
                     verify, verify_texts)
from .text import Claim, extract_claims, remote_context

__all__ = [
    "CLAIM_KINDS", "Claim", "ClaimResult", "MemoryVerdict", "SuggestReport", "Suggestion", "SymbolIndex",
    "VerifyReport", "check_memory", "check_url", "check_urls", "extract_claims", "mark_reason", "marked_claims",
    "remote_context", "suggest_anchors", "suggest_report", "verify", "verify_texts",
]
