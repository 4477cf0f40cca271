"""Invoice listing, PDF download and plan changes."""

from __future__ import annotations

import base64

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from api.errors import ApiError
from auth.middleware import require_scope
from billing.pricing import get_plan
from db.models import Invoice

DEFAULT_PAGE_SIZE = 25
MAX_PAGE_SIZE = 100


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        return int(base64.urlsafe_b64decode(padded).decode())
    except ValueError:
        raise ApiError("validation_failed", 400, detail="bad cursor") from None


def invoice_json(invoice: Invoice) -> dict[str, object]:
    return {
        "id": invoice.id, "number": invoice.number, "status": invoice.status,
        "currency": invoice.currency, "total_minor": invoice.total_minor,
        "issued_at": invoice.issued_at.isoformat() if invoice.issued_at else None,
    }


@require_scope("billing:read")
async def list_invoices(request: Request) -> Response:
    """Newest first, keyset pagination on id: ?cursor=...&limit=..."""
    limit = min(int(request.query_params.get("limit", DEFAULT_PAGE_SIZE)), MAX_PAGE_SIZE)
    before_id = decode_cursor(request.query_params.get("cursor"))
    account_id = request.scope["claims"].acct
    stmt = select(Invoice).where(Invoice.account_id == account_id, Invoice.status != "draft")
    if before_id is not None:
        stmt = stmt.where(Invoice.id < before_id)
    rows = list(request.app.state.deps.session.scalars(stmt.order_by(Invoice.id.desc()).limit(limit + 1)))
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return JSONResponse({"data": [invoice_json(i) for i in rows[:limit]], "next_cursor": next_cursor})


@require_scope("billing:read")
async def download_invoice_pdf(request: Request) -> Response:
    """302 to a short-lived signed object-store URL; the API never streams PDF bytes."""
    invoice_id = int(request.path_params["invoice_id"])
    deps = request.app.state.deps
    invoice = deps.session.get(Invoice, invoice_id)
    if invoice is None or invoice.account_id != request.scope["claims"].acct:
        raise ApiError("not_found", 404)  # 404, not 403, so ids of other accounts do not leak
    url = deps.pdf_store.signed_url(f"invoices/{invoice.number}.pdf", ttl=deps.settings.billing.pdf_link_ttl_seconds)
    return RedirectResponse(url, status_code=302)


@require_scope("billing:write")
async def change_plan(request: Request) -> Response:
    body = await request.json()
    try:
        plan = get_plan(body["plan"])
    except (KeyError, ValueError):
        raise ApiError("validation_failed", 422, detail="unknown plan") from None
    result = request.app.state.deps.subscriptions.change_plan(
        request.scope["claims"].acct, plan, int(body.get("seats", 1))
    )
    return JSONResponse({"effective_at": result.effective_at.isoformat(), "net_minor": result.net.amount_minor})


routes = [
    Route("/invoices", list_invoices),
    Route("/invoices/{invoice_id:int}/pdf", download_invoice_pdf),
    Route("/subscription/plan", change_plan, methods=["PUT"]),
]
