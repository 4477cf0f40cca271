"""Bearer authentication for every route except the public ones."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import ApiError
from auth.token import TokenError, TokenIssuer

PUBLIC_PATHS: frozenset[str] = frozenset(
    {"/healthz", "/auth/login", "/auth/refresh", "/webhooks/stripe"}
)


def extract_bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class AuthMiddleware:
    def __init__(self, app: ASGIApp, issuer: TokenIssuer) -> None:
        self.app = app
        self.issuer = issuer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = extract_bearer(request.headers.get("authorization"))
        if token is None:
            await ApiError("unauthenticated", 401).to_response()(scope, receive, send)
            return
        try:
            scope["claims"] = self.issuer.verify(token)
        except TokenError:
            await ApiError("unauthenticated", 401).to_response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


def require_scope(scope_name: str) -> Callable[..., Any]:
    """Route decorator: 403 unless the access token carries the scope."""

    def decorator(handler: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
        @wraps(handler)
        async def wrapper(request: Request, *args: Any, **kwargs: Any) -> Response:
            claims = request.scope.get("claims")
            if claims is None or scope_name not in claims.scp:
                raise ApiError("forbidden", 403, detail=f"missing scope {scope_name}")
            return await handler(request, *args, **kwargs)

        return wrapper

    return decorator
