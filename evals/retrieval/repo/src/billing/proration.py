"""Plan changes mid-period.

Upgrades are prorated immediately by the day. Downgrades wait for the period end, so there is
never a credit to refund.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from billing.pricing import Plan, price_for_seats
from core.clock import start_of_day
from core.money import Money


@dataclass(frozen=True, slots=True)
class ProrationResult:
    credit: Money
    charge: Money
    effective_at: datetime

    @property
    def net(self) -> Money:
        return self.charge - self.credit


def is_downgrade(old: Plan, new: Plan, old_seats: int, new_seats: int) -> bool:
    return price_for_seats(new, new_seats).amount_minor < price_for_seats(old, old_seats).amount_minor


def prorate(
    old: Plan,
    new: Plan,
    old_seats: int,
    new_seats: int,
    period_start: datetime,
    period_end: datetime,
    changed_at: datetime,
) -> ProrationResult:
    currency = old.currency
    if is_downgrade(old, new, old_seats, new_seats):
        zero = Money.zero(currency)
        return ProrationResult(credit=zero, charge=zero, effective_at=period_end)
    total_days = (start_of_day(period_end) - start_of_day(period_start)).days
    remaining_days = (start_of_day(period_end) - start_of_day(changed_at)).days
    fraction = Decimal(remaining_days) / Decimal(total_days)
    credit = price_for_seats(old, old_seats).multiply(fraction)
    charge = price_for_seats(new, new_seats).multiply(fraction)
    return ProrationResult(credit=credit, charge=charge, effective_at=changed_at)
