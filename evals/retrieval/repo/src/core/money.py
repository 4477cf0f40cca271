"""Money as integer minor units. Floats never touch an amount."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

# Digits after the decimal point per ISO 4217 currency.
CURRENCY_EXPONENTS: dict[str, int] = {"EUR": 2, "USD": 2, "GBP": 2, "JPY": 0}


class CurrencyMismatch(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Money:
    amount_minor: int
    currency: str

    @classmethod
    def zero(cls, currency: str) -> "Money":
        return cls(0, currency)

    @classmethod
    def from_decimal(cls, amount: Decimal | str, currency: str) -> "Money":
        exponent = CURRENCY_EXPONENTS[currency]
        quantum = Decimal(1).scaleb(-exponent)
        rounded = Decimal(amount).quantize(quantum, rounding=ROUND_HALF_UP)
        return cls(int(rounded.scaleb(exponent)), currency)

    def to_decimal(self) -> Decimal:
        return Decimal(self.amount_minor).scaleb(-CURRENCY_EXPONENTS[self.currency])

    def _check(self, other: "Money") -> None:
        if other.currency != self.currency:
            raise CurrencyMismatch(f"{self.currency} != {other.currency}")

    def __add__(self, other: "Money") -> "Money":
        self._check(other)
        return Money(self.amount_minor + other.amount_minor, self.currency)

    def __sub__(self, other: "Money") -> "Money":
        self._check(other)
        return Money(self.amount_minor - other.amount_minor, self.currency)

    def multiply(self, factor: Decimal | int) -> "Money":
        exact = Decimal(self.amount_minor) * Decimal(factor)
        return Money(int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP)), self.currency)

    def allocate(self, ratios: list[int]) -> list["Money"]:
        """Split without losing a cent: leftover minor units go to the first parts."""
        if not ratios or sum(ratios) <= 0:
            raise ValueError("ratios must be positive")
        total = sum(ratios)
        parts = [self.amount_minor * r // total for r in ratios]
        remainder = self.amount_minor - sum(parts)
        for i in range(remainder):
            parts[i % len(parts)] += 1
        return [Money(p, self.currency) for p in parts]


def sum_money(items: list[Money], currency: str) -> Money:
    total = Money.zero(currency)
    for item in items:
        total = total + item
    return total
