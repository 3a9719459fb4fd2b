"""Agent runs driven on worker threads, so a caller (the API) can answer before they end.

A run is prepared or claimed first (`runner.prepare_run` / `claim_run`: checked and saved
as running), then handed here. A run ends within its budgets, so `close` waits for those
already running; runs still queued then are saved as stopped with a sentence, never left
looking as if they were running.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from forgeml.agents.loop import Clock
from forgeml.agents.runner import PreparedRun, drive
from forgeml.agents.state import StopReason, save_state
from forgeml.agents.trace import Tracer
from forgeml.core.errors import ForgemlError

__all__ = ["BackgroundRuns"]

logger = logging.getLogger(__name__)


class BackgroundRuns:
    """Drives runs on at most `max_workers` threads, each saved however it stops."""

    def __init__(self, home: Path, *, max_workers: int = 4, clock: Clock = time.monotonic):
        """Runs saved under `home` (FORGEML_HOME), their budgets on `clock`."""
        self.home = home
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agent-run")
        self._queued: dict[Future[None], PreparedRun] = {}
        self._lock = threading.Lock()

    def submit(self, run: PreparedRun, tracer: Tracer | None = None) -> None:
        """Drive `run` once a worker is free."""
        with self._lock:
            future = self._pool.submit(self._drive, run, tracer)
            self._queued[future] = run
        future.add_done_callback(self._forget)

    def close(self) -> None:
        """Save the runs still queued as stopped, then wait for those being driven."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            left = [run for future, run in self._queued.items() if future.cancelled()]
            self._queued.clear()
        for run in left:
            run.state.stop_reason = StopReason.ERROR
            run.state.error = "The server stopped before the run was driven."
            save_state(self.home, run.state)
        self._pool.shutdown(wait=True)

    def _forget(self, future: Future[None]) -> None:
        if future.cancelled():
            return  # close() saves it
        with self._lock:
            self._queued.pop(future, None)

    def _drive(self, run: PreparedRun, tracer: Tracer | None) -> None:
        try:
            drive(run, home=self.home, clock=self.clock, tracer=tracer)
        except ForgemlError:
            pass  # saved as the run's error; nobody waits on this thread to be told
        except Exception:
            logger.exception("agent run %s failed", run.state.run_id)  # saved as its error too
