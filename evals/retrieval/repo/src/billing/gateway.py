"""Thin wrapper over the Stripe SDK. The rest of the code never imports stripe directly."""

from __future__ import annotations

from dataclasses import dataclass

import stripe

from core.config import BillingSettings
from core.money import Money


class PaymentDeclined(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class GatewayUnavailable(Exception):
    """Network or 5xx from the gateway: safe to retry with the same idempotency key."""


@dataclass(frozen=True, slots=True)
class ChargeResult:
    charge_id: str
    amount: Money


def idempotency_key_for(invoice_id: int, attempt: int) -> str:
    """One key per invoice attempt, so a retried HTTP call can never double-charge."""
    return f"inv_{invoice_id}_attempt_{attempt}"


class PaymentGateway:
    def __init__(self, api_key: str, settings: BillingSettings) -> None:
        self._client = stripe.StripeClient(
            api_key,
            stripe_version=settings.gateway_api_version,
            max_network_retries=2,
        )
        self._timeout = settings.gateway_timeout_seconds

    def charge(self, customer_id: str, amount: Money, invoice_id: int, attempt: int) -> ChargeResult:
        try:
            intent = self._client.payment_intents.create(
                params={
                    "customer": customer_id,
                    "amount": amount.amount_minor,
                    "currency": amount.currency.lower(),
                    "confirm": True,
                    "off_session": True,
                    "metadata": {"invoice_id": str(invoice_id)},
                },
                options={"idempotency_key": idempotency_key_for(invoice_id, attempt)},
            )
        except stripe.CardError as exc:
            raise PaymentDeclined(exc.code or "card_declined", exc.user_message or "declined") from exc
        except (stripe.APIConnectionError, stripe.APIError) as exc:
            raise GatewayUnavailable(str(exc)) from exc
        return ChargeResult(charge_id=intent.id, amount=amount)

    def refund(self, charge_id: str, amount: Money | None = None) -> str:
        params: dict[str, object] = {"payment_intent": charge_id}
        if amount is not None:
            params["amount"] = amount.amount_minor  # partial refund
        refund = self._client.refunds.create(params=params)
        return refund.id
