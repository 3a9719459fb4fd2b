"""The one way a test waits for another thread or process: poll a condition, bounded.

A test never sleeps for a fixed time and takes the sleep's length as its assertion; it
waits until what it needs is true, and fails (naming what) when that never happens.
Deadlines and TTLs of the code under test run on an injected `FakeClock` instead.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    what: str = "the condition",
    interval: float = 0.02,
) -> None:
    """Return once `predicate()` is true; fail the test if it is not within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout:g} s"
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    what: str = "the condition",
    interval: float = 0.005,
) -> None:
    """`wait_until` inside an event loop: poll without blocking the loop that makes it true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout:g} s"
        await asyncio.sleep(interval)


class FakeClock:
    """A monotonic clock that moves only when the test says: `clock()`, `clock.advance(s)`."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
