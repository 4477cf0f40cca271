"""Login, refresh and logout. The refresh token travels only in an httpOnly cookie."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api.errors import ApiError
from auth.password import hash_password, needs_rehash, verify_password
from auth.token import RefreshReuseDetected, TokenError

REFRESH_COOKIE = "qp_refresh"
DEFAULT_SCOPES = ("billing:read", "users:read")


def _set_refresh_cookie(response: Response, raw: str, max_age: int) -> None:
    response.set_cookie(
        REFRESH_COOKIE, raw, max_age=max_age, httponly=True, secure=True,
        samesite="strict", path="/auth",
    )


async def login(request: Request) -> Response:
    body = await request.json()
    email, password = body.get("email", ""), body.get("password", "")
    ip = request.client.host if request.client else "unknown"
    deps = request.app.state.deps
    if deps.rate_limiter.is_blocked(email, ip):
        raise ApiError("rate_limited", 429)
    user = deps.users.get_by_email(email)
    if user is None or not verify_password(user.password_hash, password):
        deps.rate_limiter.hit(email, ip)
        raise ApiError("unauthenticated", 401)  # same answer for unknown email and bad password
    deps.rate_limiter.reset(email, ip)
    if needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
    access = request.app.state.issuer.issue(user.id, user.account_id, DEFAULT_SCOPES)
    refresh = request.app.state.issuer.new_refresh_token(deps.session, user.id)
    response = JSONResponse({"access_token": access, "token_type": "Bearer"})
    _set_refresh_cookie(response, refresh, deps.settings.auth.refresh_token_ttl_days * 86400)
    return response


async def refresh(request: Request) -> Response:
    raw = request.cookies.get(REFRESH_COOKIE)
    if not raw:
        raise ApiError("unauthenticated", 401)
    deps = request.app.state.deps
    try:
        user_id, new_raw = request.app.state.issuer.rotate_refresh(deps.session, raw)
    except RefreshReuseDetected:
        deps.audit("refresh_reuse", cookie_family=True)
        raise ApiError("unauthenticated", 401)
    except TokenError:
        raise ApiError("unauthenticated", 401)
    user = deps.users.get_by_id(user_id)
    if user is None:
        raise ApiError("unauthenticated", 401)
    access = request.app.state.issuer.issue(user.id, user.account_id, DEFAULT_SCOPES)
    response = JSONResponse({"access_token": access, "token_type": "Bearer"})
    _set_refresh_cookie(response, new_raw, deps.settings.auth.refresh_token_ttl_days * 86400)
    return response


async def logout(request: Request) -> Response:
    response = Response(status_code=204)
    response.delete_cookie(REFRESH_COOKIE, path="/auth")
    return response


routes = [
    Route("/auth/login", login, methods=["POST"]),
    Route("/auth/refresh", refresh, methods=["POST"]),
    Route("/auth/logout", logout, methods=["POST"]),
]
