"""Plans and seat pricing. Prices are per seat per month, in minor units, EUR-based."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.money import Money


@dataclass(frozen=True, slots=True)
class Plan:
    code: str
    seat_price_minor: int
    min_seats: int
    max_seats: int | None
    currency: str = "EUR"


PLANS: dict[str, Plan] = {
    "starter": Plan("starter", 0, 1, 3),
    "team": Plan("team", 1200, 1, 50),
    "business": Plan("business", 2500, 5, None),
}

ANNUAL_MONTHS_CHARGED = 10  # annual billing: pay 10 months, get 12


class SeatLimitError(ValueError):
    pass


def get_plan(code: str) -> Plan:
    try:
        return PLANS[code]
    except KeyError:
        raise ValueError(f"unknown plan {code!r}") from None


def price_for_seats(plan: Plan, seats: int, *, annual: bool = False) -> Money:
    if seats < 1:
        raise SeatLimitError("at least one seat")
    if plan.max_seats is not None and seats > plan.max_seats:
        raise SeatLimitError(f"{plan.code} allows at most {plan.max_seats} seats")
    billable = max(seats, plan.min_seats)  # business bills 5 seats even if fewer are used
    monthly = Money(plan.seat_price_minor * billable, plan.currency)
    return monthly.multiply(ANNUAL_MONTHS_CHARGED) if annual else monthly


def apply_discount(amount: Money, percent_off: Decimal) -> Money:
    """Coupons are percentages only; fixed-amount coupons were dropped for multi-currency."""
    if not Decimal(0) <= percent_off <= Decimal(100):
        raise ValueError("percent_off must be within 0..100")
    discount = amount.multiply(percent_off / Decimal(100))
    return amount - discount
