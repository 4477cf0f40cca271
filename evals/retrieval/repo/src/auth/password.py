"""Password hashing with argon2id, and the password policy."""

from __future__ import annotations

from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerifyMismatchError

# OWASP 2023 baseline; raising these makes needs_rehash() upgrade hashes at next login.
_HASHER = PasswordHasher(time_cost=3, memory_cost=64 * 1024, parallelism=2)


def hash_password(plain: str) -> str:
    return _HASHER.hash(plain)


def verify_password(stored_hash: str, plain: str) -> bool:
    try:
        return _HASHER.verify(stored_hash, plain)
    except (VerifyMismatchError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    """True for legacy bcrypt hashes ($2b$) and argon2 hashes with weaker parameters."""
    if stored_hash.startswith("$2b$"):
        return True
    return _HASHER.check_needs_rehash(stored_hash)


@dataclass(frozen=True, slots=True)
class PasswordPolicy:
    min_length: int = 12
    max_length: int = 128

    def validate(self, plain: str, email: str) -> list[str]:
        """Length rules only (NIST 800-63B): no forced symbols or digits."""
        problems: list[str] = []
        if len(plain) < self.min_length:
            problems.append(f"must be at least {self.min_length} characters")
        if len(plain) > self.max_length:
            problems.append(f"must be at most {self.max_length} characters")
        local_part = email.split("@", 1)[0].lower()
        if local_part and local_part in plain.lower():
            problems.append("must not contain your email name")
        return problems
