"""Data access for users. Soft-deleted users are invisible unless asked for."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.clock import Clock
from db.models import User


def normalize_email(email: str) -> str:
    """Trim and lowercase. The unique index is on lower(email), so lookups must match it."""
    return email.strip().lower()


class UserRepository:
    def __init__(self, session: Session, clock: Clock) -> None:
        self._session = session
        self._clock = clock

    def get_by_id(self, user_id: int, *, include_deleted: bool = False) -> User | None:
        stmt = select(User).where(User.id == user_id)
        if not include_deleted:
            stmt = stmt.where(User.deleted_at.is_(None))
        return self._session.scalar(stmt)

    def get_by_email(self, email: str) -> User | None:
        stmt = select(User).where(
            func.lower(User.email) == normalize_email(email),
            User.deleted_at.is_(None),
        )
        return self._session.scalar(stmt)

    def list_for_account(self, account_id: int, *, limit: int = 25, after_id: int = 0) -> list[User]:
        stmt = (
            select(User)
            .where(User.account_id == account_id, User.deleted_at.is_(None), User.id > after_id)
            .order_by(User.id)
            .limit(limit)
        )
        return list(self._session.scalars(stmt))

    def create(self, account_id: int, email: str, password_hash: str, role: str = "member") -> User:
        user = User(
            account_id=account_id,
            email=normalize_email(email),
            password_hash=password_hash,
            role=role,
        )
        self._session.add(user)
        self._session.flush()  # assigns user.id without committing
        return user

    def soft_delete(self, user: User) -> None:
        user.deleted_at = self._clock.now()
