"""ASGI application factory."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from api import routes_auth, routes_billing
from api.errors import ApiError, handle_api_error, handle_unexpected
from auth.middleware import AuthMiddleware
from auth.token import SigningKey, TokenIssuer
from core.clock import SystemClock
from core.config import Settings, load_settings
from webhooks.stripe_events import stripe_webhook


class RequestIdMiddleware:
    """Reuse the caller's X-Request-Id or mint one; every log line carries it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if b"x-request-id" not in headers:
                scope["headers"] = [*scope["headers"], (b"x-request-id", uuid.uuid4().hex.encode())]
        await self.app(scope, receive, send)


async def healthz(request):  # type: ignore[no-untyped-def]
    from starlette.responses import PlainTextResponse

    return PlainTextResponse("ok")


def create_app(settings: Settings, issuer: TokenIssuer) -> Starlette:
    routes = [
        Route("/healthz", healthz),
        Route("/webhooks/stripe", stripe_webhook, methods=["POST"]),
        *routes_auth.routes,
        *routes_billing.routes,
    ]
    # Order matters: request id must exist before auth logs anything.
    middleware = [
        Middleware(RequestIdMiddleware),
        Middleware(AuthMiddleware, issuer=issuer),
    ]
    app = Starlette(routes=routes, middleware=middleware)
    app.add_exception_handler(ApiError, handle_api_error)
    app.add_exception_handler(Exception, handle_unexpected)
    app.state.settings = settings
    app.state.issuer = issuer
    return app


def load_signing_keys(folder: Path) -> list[SigningKey]:
    """<kid>.pem / <kid>.pub pairs; the lexically greatest kid is the active signer."""
    kids = sorted({p.stem for p in folder.glob("*.pem")}, reverse=True)
    return [
        SigningKey(kid, (folder / f"{kid}.pem").read_bytes(), (folder / f"{kid}.pub").read_bytes())
        for kid in kids
    ]


def build_app() -> Starlette:
    """Entry point for `uvicorn --factory api.app:build_app`."""
    settings = load_settings()
    keys = load_signing_keys(Path(os.environ.get("QP_SIGNING_KEYS_DIR", "secrets/signing-keys")))
    return create_app(settings, TokenIssuer(settings.auth, keys, SystemClock()))
