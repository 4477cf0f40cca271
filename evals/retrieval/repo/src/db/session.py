"""Engine and session lifecycle. One engine per process, one session per unit of work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from core.config import Settings

_engine: Engine | None = None
_factory: sessionmaker[Session] | None = None


def get_engine(settings: Settings) -> Engine:
    global _engine, _factory
    if _engine is None:
        db = settings.raw["database"]
        _engine = create_engine(
            settings.database_url,
            pool_size=db.get("pool_size", 10),
            max_overflow=db.get("max_overflow", 5),
            pool_pre_ping=True,
        )
        timeout = int(db.get("statement_timeout_ms", 5000))

        @event.listens_for(_engine, "connect")
        def _set_timeout(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            with dbapi_conn.cursor() as cur:
                cur.execute(f"SET statement_timeout = {timeout}")

        _factory = sessionmaker(bind=_engine, expire_on_commit=False)
    return _engine


@contextmanager
def session_scope(settings: Settings) -> Iterator[Session]:
    """Commit on success, roll back on any exception, always close."""
    get_engine(settings)
    assert _factory is not None
    session = _factory()
    try:
        yield session
        session.commit()
    except Exception:
        session.rollback()
        raise
    finally:
        session.close()


def try_advisory_lock(session: Session, key: int) -> bool:
    """Session-level pg_try_advisory_lock: only one replica runs a given job."""
    return bool(session.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())


def release_advisory_lock(session: Session, key: int) -> None:
    session.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
