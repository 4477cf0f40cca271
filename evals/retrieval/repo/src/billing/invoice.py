"""Invoice assembly and finalization.

Drafts are mutable and unnumbered. Finalizing assigns the next gapless number and freezes the
invoice; later corrections are credit notes, never edits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from billing.tax import TaxCalculator
from core.clock import Clock
from core.money import Money, sum_money
from db.models import Account, Invoice, InvoiceLine

ALLOWED_TRANSITIONS: dict[str, set[str]] = {
    "draft": {"open", "void"},
    "open": {"paid", "void", "uncollectible"},
    "uncollectible": {"paid"},
    "paid": set(),
    "void": set(),
}


class InvoiceStateError(Exception):
    pass


@dataclass
class InvoiceBuilder:
    account: Account
    currency: str
    lines: list[InvoiceLine] = field(default_factory=list)

    def add_line(self, description: str, quantity: int, unit_price: Money) -> "InvoiceBuilder":
        if unit_price.currency != self.currency:
            raise ValueError("line currency differs from invoice currency")
        amount = unit_price.multiply(quantity)
        self.lines.append(
            InvoiceLine(
                description=description,
                quantity=quantity,
                unit_amount_minor=unit_price.amount_minor,
                amount_minor=amount.amount_minor,
            )
        )
        return self

    def build(self, tax: TaxCalculator) -> Invoice:
        subtotal = sum_money([Money(l.amount_minor, self.currency) for l in self.lines], self.currency)
        tax_amount = tax.compute_tax(subtotal, self.account.country, self.account.vat_id)
        return Invoice(
            account_id=self.account.id,
            status="draft",
            currency=self.currency,
            subtotal_minor=subtotal.amount_minor,
            tax_minor=tax_amount.amount_minor,
            total_minor=(subtotal + tax_amount).amount_minor,
            lines=self.lines,
        )


def transition(invoice: Invoice, new_status: str) -> None:
    if new_status not in ALLOWED_TRANSITIONS[invoice.status]:
        raise InvoiceStateError(f"{invoice.status} -> {new_status} not allowed")
    invoice.status = new_status


def next_invoice_number(session: Session, year: int) -> str:
    """INV-2024-000123. Row lock on the per-year counter keeps numbers gapless."""
    seq = session.execute(
        text(
            "INSERT INTO invoice_number_seq (year, last_value) VALUES (:y, 1) "
            "ON CONFLICT (year) DO UPDATE SET last_value = invoice_number_seq.last_value + 1 "
            "RETURNING last_value"
        ),
        {"y": year},
    ).scalar_one()
    return f"INV-{year}-{seq:06d}"


def finalize_invoice(session: Session, invoice: Invoice, clock: Clock, due_days: int) -> Invoice:
    now: datetime = clock.now()
    transition(invoice, "open")
    invoice.number = next_invoice_number(session, now.year)
    invoice.issued_at = now
    invoice.due_at = now + timedelta(days=due_days)
    return invoice
