"""Errors as RFC 7807 problem+json. Clients branch on `code`, never on `title` or `detail`."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger(__name__)

ERROR_CODES: dict[str, str] = {
    "unauthenticated": "Authentication required",
    "forbidden": "Not allowed",
    "not_found": "Resource not found",
    "validation_failed": "Request is invalid",
    "rate_limited": "Too many requests",
    "payment_declined": "Payment was declined",
    "conflict": "State conflict",
    "internal": "Internal error",
}


class ApiError(Exception):
    def __init__(self, code: str, status: int, *, detail: str | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unregistered error code {code!r}")
        super().__init__(code)
        self.code = code
        self.status = status
        self.detail = detail

    def to_response(self) -> JSONResponse:
        body = {"type": f"https://docs.quillpay.dev/errors/{self.code}", "title": ERROR_CODES[self.code],
                "status": self.status, "code": self.code}
        if self.detail:
            body["detail"] = self.detail
        return JSONResponse(body, status_code=self.status, media_type="application/problem+json")


async def handle_api_error(request: Request, exc: ApiError) -> JSONResponse:
    return exc.to_response()


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Log with the request id; the client gets a generic 500 with no exception text."""
    log.exception("unhandled error", extra={"request_id": request.headers.get("x-request-id")})
    return ApiError("internal", 500).to_response()
