"""Access and refresh tokens.

Access tokens are short-lived EdDSA-signed JWTs. Refresh tokens are opaque random strings,
stored only as sha256 digests, rotated on every use.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

import jwt
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from core.clock import Clock
from core.config import AuthSettings
from db.models import RefreshToken


class TokenError(Exception):
    """Any token problem; the API maps it to 401 without detail."""


class RefreshReuseDetected(TokenError):
    pass


@dataclass(frozen=True, slots=True)
class TokenClaims:
    sub: str
    acct: int
    scp: tuple[str, ...]
    jti: str


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    private_pem: bytes
    public_pem: bytes


def hash_refresh_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class TokenIssuer:
    def __init__(self, settings: AuthSettings, keys: list[SigningKey], clock: Clock) -> None:
        self._settings = settings
        self._keys = {key.kid: key for key in keys}
        self._active = keys[0]  # newest key signs; older keys only verify
        self._clock = clock

    def issue(self, user_id: int, account_id: int, scopes: tuple[str, ...]) -> str:
        now = self._clock.now()
        payload = {
            "iss": self._settings.issuer,
            "aud": self._settings.audience,
            "sub": str(user_id),
            "acct": account_id,
            "scp": " ".join(scopes),
            "iat": int(now.timestamp()),
            "exp": int((now + timedelta(seconds=self._settings.access_token_ttl_seconds)).timestamp()),
            "jti": uuid.uuid4().hex,
        }
        headers = {"kid": self._active.kid}
        return jwt.encode(payload, self._active.private_pem, algorithm="EdDSA", headers=headers)

    def verify(self, token: str) -> TokenClaims:
        try:
            kid = jwt.get_unverified_header(token)["kid"]
            key = self._keys[kid]
            data = jwt.decode(
                token,
                key.public_pem,
                algorithms=["EdDSA"],
                audience=self._settings.audience,
                issuer=self._settings.issuer,
                leeway=self._settings.clock_leeway_seconds,
            )
        except (KeyError, jwt.PyJWTError) as exc:
            raise TokenError("invalid token") from exc
        return TokenClaims(data["sub"], data["acct"], tuple(data["scp"].split()), data["jti"])

    def new_refresh_token(self, session: Session, user_id: int, family_id: str | None = None) -> str:
        raw = secrets.token_urlsafe(32)
        session.add(
            RefreshToken(
                user_id=user_id,
                family_id=family_id or str(uuid.uuid4()),
                token_sha256=hash_refresh_token(raw),
                expires_at=self._clock.now() + timedelta(days=self._settings.refresh_token_ttl_days),
            )
        )
        return raw

    def rotate_refresh(self, session: Session, raw: str) -> tuple[int, str]:
        """Spend a refresh token; presenting a spent one revokes its whole family."""
        now = self._clock.now()
        row = session.scalar(select(RefreshToken).where(RefreshToken.token_sha256 == hash_refresh_token(raw)))
        if row is None or row.expires_at <= now:
            raise TokenError("unknown or expired refresh token")
        if row.revoked_at is not None:
            session.execute(
                update(RefreshToken).where(RefreshToken.family_id == row.family_id).values(revoked_at=now)
            )
            raise RefreshReuseDetected(row.family_id)
        row.revoked_at = now
        return row.user_id, self.new_refresh_token(session, row.user_id, row.family_id)
