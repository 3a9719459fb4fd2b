"""Per-key rate limits (token bucket) and daily quotas; both answer 429 with `Retry-After`.

The bucket holds up to `burst` tokens and refills at `rate_per_s`; a request takes one.
Buckets live in the gateway's memory (one process = one budget). The daily quota counts
forwarded requests per UTC day: what `key_usage` held at the last flush plus what this
gateway has counted since (`UsageRecorder.requests_today`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from forgeml.core.errors import RateLimitedError
from forgeml.gateway._keys import VerifiedKey


class TokenBucket:
    """`burst` tokens, refilled continuously at `rate_per_s`."""

    def __init__(self, rate_per_s: float, burst: int, now: float) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.tokens = float(burst)
        self.updated = now

    def take(self, now: float) -> float:
        """Take a token: 0.0 when granted, else the seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate_per_s)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate_per_s


def retry_after_header(seconds: float) -> str:
    """`Retry-After` in whole seconds, rounded up (RFC 9110 §10.2.3), at least 1."""
    return str(max(1, math.ceil(seconds)))


def seconds_to_utc_midnight(now: datetime | None = None) -> float:
    """Seconds until the daily quotas reset."""
    moment = now or datetime.now(UTC)
    midnight = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return (midnight - moment).total_seconds()


class RateLimiter:
    """Token buckets per key id, created on first use from the key's limits."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, key: VerifiedKey) -> None:
        """Take a token for `key`.

        Raises:
            RateLimitedError: the bucket is empty; `retry_after` says for how long.
        """
        if key.rate_per_s is None:
            return
        now = self._clock()
        bucket = self._buckets.get(key.id)
        burst = key.burst or 1
        if bucket is None or bucket.rate_per_s != key.rate_per_s or bucket.burst != burst:
            bucket = self._buckets[key.id] = TokenBucket(key.rate_per_s, burst, now)
        wait = bucket.take(now)
        if wait > 0:
            raise RateLimitedError(
                f"API key {key.prefix} is over its rate limit of {key.rate_per_s:g} requests/s "
                f"(burst {burst}); retry in {retry_after_header(wait)} s.",
                retry_after=wait,
            )


def check_quota(key: VerifiedKey, used_today: int) -> None:
    """Refuse a request past the key's daily quota.

    Raises:
        RateLimitedError: `used_today` has reached the quota; retry after UTC midnight.
    """
    if key.daily_quota is not None and used_today >= key.daily_quota:
        raise RateLimitedError(
            f"API key {key.prefix} has used its daily quota of {key.daily_quota} requests; "
            "it resets at 00:00 UTC.",
            retry_after=seconds_to_utc_midnight(),
        )
