"""Fill a local database with a demo account. Refuses to run against anything but localhost."""

from __future__ import annotations

import sys
from urllib.parse import urlparse

from auth.password import hash_password
from core.clock import SystemClock
from core.config import load_settings
from db.models import Account
from db.session import session_scope
from users.repository import UserRepository

DEMO_PASSWORD = "correct horse battery staple"
DEMO_USERS = [
    ("owner@demo.test", "owner"),
    ("admin@demo.test", "admin"),
    ("member@demo.test", "member"),
]


def assert_local(database_url: str) -> None:
    host = urlparse(database_url.replace("+psycopg", "")).hostname
    if host not in {"localhost", "127.0.0.1", "postgres"}:
        sys.exit(f"refusing to seed non-local database host {host!r}")


def seed() -> None:
    settings = load_settings()
    assert_local(settings.database_url)
    with session_scope(settings) as session:
        account = Account(name="Demo GmbH", plan_code="team", country="DE", vat_id="DE123456789")
        session.add(account)
        session.flush()
        users = UserRepository(session, SystemClock())
        for email, role in DEMO_USERS:
            if users.get_by_email(email) is None:
                users.create(account.id, email, hash_password(DEMO_PASSWORD), role=role)
    print(f"seeded account {account.id} with {len(DEMO_USERS)} users; password: {DEMO_PASSWORD}")


if __name__ == "__main__":
    seed()
