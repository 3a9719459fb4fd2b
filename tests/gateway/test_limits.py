from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from forgeml.core.errors import RateLimitedError
from forgeml.gateway import CircuitBreaker, TokenBucket, VerifiedKey
from forgeml.gateway._limits import (
    RateLimiter,
    check_quota,
    retry_after_header,
    seconds_to_utc_midnight,
)
from forgeml.gateway._routing import Route


def _key(
    rate: float | None = None, burst: int | None = None, quota: int | None = None
) -> VerifiedKey:
    return VerifiedKey("k1", "abc", "default", frozenset({"*"}), rate, burst, quota)


def test_bucket_grants_burst_then_refills_at_rate() -> None:
    bucket = TokenBucket(rate_per_s=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.25) == pytest.approx(0.25)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(100.0) == 0.0  # refills up to burst, never beyond
    assert bucket.tokens == pytest.approx(2.0)


def test_limiter_raises_with_retry_after() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    key = _key(rate=0.5, burst=1)
    limiter.check(key)
    with pytest.raises(RateLimitedError) as raised:
        limiter.check(key)
    assert raised.value.retry_after == pytest.approx(2.0)
    now[0] = 2.0
    limiter.check(key)
    limiter.check(_key())  # no rate limit: never refused


@pytest.mark.parametrize(("seconds", "header"), [(0.01, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_rounded_up(seconds: float, header: str) -> None:
    assert retry_after_header(seconds) == header


def test_quota_refuses_at_the_limit_until_midnight() -> None:
    check_quota(_key(quota=3), 2)
    with pytest.raises(RateLimitedError, match="daily quota of 3") as raised:
        check_quota(_key(quota=3), 3)
    assert 0 < raised.value.retry_after <= 86400
    assert seconds_to_utc_midnight(datetime(2026, 12, 1, 23, 59, 30, tzinfo=UTC)) == 30


def test_breaker_opens_after_k_failures_and_half_opens_after_cooldown() -> None:
    breaker = CircuitBreaker(failures_to_open=3, cooldown_s=5.0)
    for moment in (0.0, 1.0):
        breaker.failure(moment)
        assert breaker.allow(moment)
    breaker.failure(2.0)
    assert breaker.state == "open" and not breaker.allow(6.9)
    assert breaker.allow(7.0) and breaker.state == "half-open"
    assert not breaker.allow(7.1)  # one trial per cool-down
    breaker.failure(7.2)
    assert breaker.state == "open" and not breaker.allow(12.1)
    assert breaker.allow(12.2)
    breaker.success()
    assert breaker.state == "closed" and breaker.allow(12.3)


def test_split_sends_weight_percent_to_canary_and_rotates_replicas() -> None:
    route = Route("d", ["p1", "p2"], ["c1"], [], canary_weight=25)
    rng = random.Random(3)
    draws = [route.candidates(rng) for _ in range(20_000)]
    canary = sum(role == "canary" for role, _ in draws)
    assert abs(canary - 5000) < 3 * (20_000 * 0.25 * 0.75) ** 0.5
    primaries = [order for role, order in draws if role == "primary"]
    assert {order[0] for order in primaries} == {"p1", "p2"}
    assert all(sorted(order) == ["c1", "p1", "p2"] for order in primaries)


def test_split_falls_back_when_a_pool_is_empty() -> None:
    rng = random.Random(0)
    assert Route("d", [], ["c1"], [], 10).candidates(rng) == ("canary", ["c1"])
    assert Route("d", ["p1"], [], [], 100).candidates(rng) == ("primary", ["p1"])
