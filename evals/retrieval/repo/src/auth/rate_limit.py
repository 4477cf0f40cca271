"""Login throttling: a sliding window per (email, client ip) in Redis."""

from __future__ import annotations

import hashlib
import time

from redis import Redis

from core.config import AuthSettings


class LoginRateLimiter:
    def __init__(self, redis: Redis, settings: AuthSettings) -> None:
        self._redis = redis
        self._max = settings.login_max_attempts
        self._window = settings.login_window_seconds

    @staticmethod
    def _key(email: str, ip: str) -> str:
        # Hash the email so no address sits in Redis in clear text.
        digest = hashlib.sha256(f"{email.lower()}|{ip}".encode()).hexdigest()[:32]
        return f"login:fail:{digest}"

    def is_blocked(self, email: str, ip: str) -> bool:
        key = self._key(email, ip)
        cutoff = time.time() - self._window
        self._redis.zremrangebyscore(key, 0, cutoff)
        return self._redis.zcard(key) >= self._max

    def hit(self, email: str, ip: str) -> int:
        """Record a failed attempt; returns failures in the current window."""
        key = self._key(email, ip)
        now = time.time()
        pipe = self._redis.pipeline()
        pipe.zadd(key, {f"{now:.6f}": now})
        pipe.zremrangebyscore(key, 0, now - self._window)
        pipe.zcard(key)
        pipe.expire(key, self._window)
        return int(pipe.execute()[2])

    def reset(self, email: str, ip: str) -> None:
        """Called after a successful login."""
        self._redis.delete(self._key(email, ip))
