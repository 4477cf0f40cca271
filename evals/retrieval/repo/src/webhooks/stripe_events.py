"""Stripe webhook endpoint. Every handler must be idempotent: Stripe delivers at least once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import stripe
from sqlalchemy.dialects.postgresql import insert
from starlette.requests import Request
from starlette.responses import Response

from db.models import ProcessedEvent

log = logging.getLogger(__name__)
SIGNATURE_TOLERANCE_SECONDS = 300


def verify_signature(payload: bytes, header: str, secret: str) -> dict[str, Any]:
    """Raises stripe.SignatureVerificationError; timestamps older than 5 minutes are rejected."""
    return stripe.Webhook.construct_event(payload, header, secret, tolerance=SIGNATURE_TOLERANCE_SECONDS)


def on_invoice_paid(deps: Any, data: dict[str, Any]) -> None:
    invoice_id = int(data["metadata"]["invoice_id"])
    deps.invoices.mark_paid(invoice_id, charge_id=data["id"])


def on_payment_failed(deps: Any, data: dict[str, Any]) -> None:
    invoice_id = int(data["metadata"]["invoice_id"])
    deps.dunning.start(invoice_id, reason=data.get("last_payment_error", {}).get("code"))


HANDLERS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "payment_intent.succeeded": on_invoice_paid,
    "payment_intent.payment_failed": on_payment_failed,
}


def claim_event(session: Any, event_id: str) -> bool:
    """Insert the event id; False when it was already processed (duplicate delivery)."""
    result = session.execute(
        insert(ProcessedEvent).values(event_id=event_id).on_conflict_do_nothing()
    )
    return result.rowcount == 1


async def stripe_webhook(request: Request) -> Response:
    deps = request.app.state.deps
    payload = await request.body()
    try:
        event = verify_signature(payload, request.headers.get("stripe-signature", ""), deps.webhook_secret)
    except (stripe.SignatureVerificationError, ValueError):
        return Response(status_code=400)
    handler = HANDLERS.get(event["type"])
    if handler is None:
        return Response(status_code=200)  # unknown types are acknowledged so Stripe stops retrying
    if not claim_event(deps.session, event["id"]):
        log.info("duplicate webhook %s", event["id"])
        return Response(status_code=200)
    handler(deps, event["data"]["object"])
    deps.session.commit()
    return Response(status_code=200)
