"""Apply migrations/NNNN_*.sql in order, once each.

Applied files are recorded with their sha256 in schema_migrations. A recorded file whose
content changed is an error: migrations are immutable once merged; write a new one instead.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import psycopg

BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name        TEXT PRIMARY KEY,
    sha256      CHAR(64) NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def pending(conn: psycopg.Connection, folder: Path) -> list[Path]:
    applied = dict(conn.execute("SELECT name, sha256 FROM schema_migrations").fetchall())
    todo = []
    for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if path.name in applied:
            if applied[path.name] != digest:
                sys.exit(f"{path.name} was edited after it was applied; add a new migration instead")
            continue
        todo.append(path)
    return todo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute(BOOTSTRAP)
        for path in pending(conn, args.folder):
            # Each file carries its own BEGIN/COMMIT.
            conn.execute(path.read_text())
            conn.execute(
                "INSERT INTO schema_migrations (name, sha256) VALUES (%s, %s)",
                (path.name, hashlib.sha256(path.read_bytes()).hexdigest()),
            )
            print(f"applied {path.name}")


if __name__ == "__main__":
    main()
