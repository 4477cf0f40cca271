"""Retrying failed payments, then giving up politely."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# Days after the first failure at which the charge is retried.
RETRY_SCHEDULE_DAYS: tuple[int, ...] = (1, 3, 7)
# After the last retry fails, the invoice becomes uncollectible and the account is downgraded.
GRACE_DAYS_AFTER_LAST_RETRY = 7


@dataclass(frozen=True, slots=True)
class DunningState:
    invoice_id: int
    first_failed_at: datetime
    attempts: int  # retries already made, not counting the original charge


class DunningPolicy:
    def __init__(self, schedule: tuple[int, ...] = RETRY_SCHEDULE_DAYS) -> None:
        self.schedule = schedule

    def next_retry_at(self, state: DunningState) -> datetime | None:
        if state.attempts >= len(self.schedule):
            return None
        return state.first_failed_at + timedelta(days=self.schedule[state.attempts])

    def should_give_up(self, state: DunningState, now: datetime) -> bool:
        if state.attempts < len(self.schedule):
            return False
        last = state.first_failed_at + timedelta(days=self.schedule[-1])
        return now >= last + timedelta(days=GRACE_DAYS_AFTER_LAST_RETRY)

    def reminder_template(self, state: DunningState) -> str:
        """Which email the notifier sends for this attempt."""
        if state.attempts == 0:
            return "payment_failed"
        if state.attempts < len(self.schedule):
            return "payment_retry_failed"
        return "final_notice"
