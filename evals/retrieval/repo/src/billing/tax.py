"""VAT for EU customers. Tax is computed once on the invoice subtotal, not per line."""

from __future__ import annotations

import re
from decimal import Decimal

from core.money import Money

EU_COUNTRIES = frozenset(
    "AT BE BG HR CY CZ DK EE FI FR DE GR HU IE IT LV LT LU MT NL PL PT RO SK SI ES SE".split()
)
HOME_COUNTRY = "DE"
VAT_ID_PATTERN = re.compile(r"^[A-Z]{2}[0-9A-Z]{2,12}$")


class TaxCalculator:
    # Standard rates only; reduced rates do not apply to software subscriptions.
    RATES: dict[str, Decimal] = {
        "DE": Decimal("0.19"),
        "FR": Decimal("0.20"),
        "NL": Decimal("0.21"),
        "IE": Decimal("0.23"),
        "ES": Decimal("0.21"),
        "IT": Decimal("0.22"),
        "AT": Decimal("0.20"),
    }

    def is_reverse_charge(self, country: str, vat_id: str | None) -> bool:
        """EU business outside the home country with a VAT id: the customer self-assesses."""
        return (
            country in EU_COUNTRIES
            and country != HOME_COUNTRY
            and vat_id is not None
            and bool(VAT_ID_PATTERN.match(vat_id))
        )

    def rate_for(self, country: str, vat_id: str | None) -> Decimal:
        if country not in EU_COUNTRIES or self.is_reverse_charge(country, vat_id):
            return Decimal(0)  # exports and reverse charge; US sales tax is out of scope
        return self.RATES.get(country, self.RATES[HOME_COUNTRY])

    def compute_tax(self, subtotal: Money, country: str, vat_id: str | None) -> Money:
        return subtotal.multiply(self.rate_for(country, vat_id))
