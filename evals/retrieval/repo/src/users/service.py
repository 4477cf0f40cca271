"""User lifecycle rules that span repositories, tokens and notifications."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from auth.password import PasswordPolicy, hash_password
from core.clock import Clock
from db.models import RefreshToken, User
from users.repository import UserRepository, normalize_email


class EmailTaken(Exception):
    pass


class WeakPassword(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class UserService:
    def __init__(self, session: Session, clock: Clock, notify) -> None:  # type: ignore[no-untyped-def]
        self._session = session
        self._clock = clock
        self._repo = UserRepository(session, clock)
        self._notify = notify  # publishes to the notifications stream
        self._policy = PasswordPolicy()

    def register(self, account_id: int, email: str, password: str) -> User:
        if self._repo.get_by_email(email) is not None:
            raise EmailTaken(normalize_email(email))
        problems = self._policy.validate(password, email)
        if problems:
            raise WeakPassword(problems)
        user = self._repo.create(account_id, email, hash_password(password))
        self._notify("verify_email", user_id=user.id)
        return user

    def change_email(self, user: User, new_email: str) -> None:
        """The new address must be verified again before it can receive invoices."""
        if self._repo.get_by_email(new_email) is not None:
            raise EmailTaken(normalize_email(new_email))
        old = user.email
        user.email = normalize_email(new_email)
        user.email_verified_at = None
        self._notify("verify_email", user_id=user.id)
        self._notify("email_changed_alert", user_id=user.id, old_email=old)

    def deactivate(self, user: User) -> None:
        """Soft delete and revoke every refresh token so open sessions die within one access TTL."""
        self._repo.soft_delete(user)
        self._session.execute(
            update(RefreshToken)
            .where(RefreshToken.user_id == user.id, RefreshToken.revoked_at.is_(None))
            .values(revoked_at=self._clock.now())
        )
