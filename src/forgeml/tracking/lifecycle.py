"""One lifecycle for every tracked run: `with tracked_run(handle) as run:`.

Train, tune (the study and each trial) and optimize all open their run, then let this
context manager end it, so the rules are written once:

- the body returns: FINISHED (with the metrics it gave `run.finish`, if it called it);
- SIGTERM (a preemption or a cancel): KILLED. A body that can checkpoint passes
  `checkpoints=True`, polls `run.should_stop()`, saves and calls `run.kill(...)`; any
  other body is interrupted at once by `RunStopped`;
- Ctrl-C (`KeyboardInterrupt`), or a study's pruner (`optuna.TrialPruned`): KILLED;
- a `ForgemlError`: FAILED with its sentence; `MemoryError`: FAILED, "out of memory";
  anything else: FAILED with the exception's class and message.

The exception is always raised again after the run is recorded.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ForgemlError
from forgeml.scheduler.contract import JobPreempted
from forgeml.tracking.runs import RunStatus, finish_run

if TYPE_CHECKING:
    from forgeml.core.store import RunRecord
    from forgeml.tracking.runs import RunHandle

STOPPED_REASON = "stopped by SIGTERM"
PREEMPTED_REASON = "preempted: checkpoint written"


class RunStopped(JobPreempted):
    """SIGTERM stopped a run that cannot checkpoint; its job may be run again."""

    def __init__(self, reason: str = STOPPED_REASON) -> None:
        super().__init__({})
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


@dataclass
class RunScope:
    """The run inside `tracked_run`: its handle, its stop flag, and how it ends."""

    handle: RunHandle
    stop: threading.Event = field(default_factory=threading.Event)
    record: RunRecord | None = None

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    def should_stop(self) -> bool:
        """True once SIGTERM asked the run to stop (checkpoint, then `kill`)."""
        return self.stop.is_set()

    def finish(self, metrics: Mapping[str, Any]) -> RunRecord:
        """End the run FINISHED with its final metrics."""
        self.record = finish_run(self.handle, RunStatus.FINISHED, metrics)
        return self.record

    def kill(self, metrics: Mapping[str, Any], reason: str = PREEMPTED_REASON) -> RunRecord:
        """End the run KILLED (stopped on request), keeping the metrics it reached."""
        self.record = finish_run(self.handle, RunStatus.KILLED, metrics, error=reason)
        return self.record


@contextmanager
def sigterm_flag(stop: threading.Event, *, interrupt: bool = False) -> Iterator[threading.Event]:
    """While inside: SIGTERM sets `stop` (and raises `RunStopped` when `interrupt`).

    Signals reach only the main thread; elsewhere this does nothing. The previous
    handler comes back on exit, so scopes nest (a study's trial inside its study).
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_term(*_: object) -> None:
        stop.set()
        if interrupt:
            raise RunStopped()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def tracked_run(handle: RunHandle, *, checkpoints: bool = False) -> Iterator[RunScope]:
    """End `handle`'s run FINISHED, FAILED or KILLED by the rules above.

    Args:
        handle: a run this process just started, resumed or attached to.
        checkpoints: the body polls `should_stop()` and saves; else SIGTERM interrupts it.
    """
    scope = RunScope(handle)
    try:
        with sigterm_flag(scope.stop, interrupt=not checkpoints):
            yield scope
    except BaseException as error:
        if scope.record is None:  # a failure after `finish`/`kill` changes nothing
            status, message = _ending(error)
            scope.record = finish_run(handle, status, {}, error=message)
        raise
    if scope.record is None:
        scope.finish({})


def _ending(error: BaseException) -> tuple[RunStatus, str]:
    """The status and the sentence a run ends with when `error` stops it."""
    if isinstance(error, RunStopped):
        return RunStatus.KILLED, error.reason
    if isinstance(error, KeyboardInterrupt):
        return RunStatus.KILLED, str(error) or type(error).__name__
    if _is_pruned(error):  # a study's pruner stopped the trial on purpose: not a failure
        return RunStatus.KILLED, str(error) or "pruned"
    if isinstance(error, ForgemlError):
        return RunStatus.FAILED, str(error) or type(error).__name__
    if isinstance(error, MemoryError):
        return RunStatus.FAILED, "out of memory"
    return RunStatus.FAILED, f"{type(error).__name__}: {error}".rstrip(": ")


def _is_pruned(error: BaseException) -> bool:
    optuna = sys.modules.get("optuna")  # only a study imports it; a plain run need not
    return optuna is not None and isinstance(error, optuna.TrialPruned)
