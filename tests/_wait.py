"""The one way a test waits for another thread or process: poll a condition, bounded.

A test never sleeps for a fixed time and takes the sleep's length as its assertion; it
waits until what it needs is true, and fails (naming what) when that never happens.
Deadlines and TTLs of the code under test run on an injected `FakeClock` instead, and a
job that must run until the test says so waits at a `Gate`, not in a polling loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path


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


class FakeClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose timers (`call_later`, `asyncio.timeout`, `sleep`) run on `clock`.

    Sockets stay real; only the loop's time is the test's: a timer fires once the test has
    advanced the clock past it, however long the machine takes in between. Run a coroutine
    on it with `asyncio.Runner(loop_factory=lambda: FakeClockLoop(clock))`.
    """

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def time(self) -> float:
        return self.clock()


class Gate:
    """A named pipe that jobs in other processes wait at until the test lets them through.

    A job runs `wait_code` (one line of Python): it reads one byte from the pipe, which
    blocks until `release` writes it. The test holds the pipe open for reading and writing
    from the start (Linux allows one descriptor both ends of a FIFO, fifo(7)), so a byte
    released before a job arrives waits for it in the pipe, and nothing here ever waits on
    a job: a job that died cannot hang the test. `close` lets through every job still
    waiting, and any that arrives later, since a read with no writer left is end of file;
    the job opens its end without blocking so that it never waits for a writer.
    """

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    @property
    def wait_code(self) -> str:
        """Python source, one line, that returns once the gate lets its process through."""
        return (
            f"import os; gate = os.open({str(self.path)!r}, os.O_RDONLY | os.O_NONBLOCK); "
            "os.set_blocking(gate, True); os.read(gate, 1); os.close(gate)"
        )

    def release(self, jobs: int = 1) -> None:
        """Let `jobs` jobs through, whether they wait already or arrive later."""
        assert self._fd is not None, "the gate is closed"
        os.write(self._fd, b"\0" * jobs)

    def close(self) -> None:
        """Let every job through for good; idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
