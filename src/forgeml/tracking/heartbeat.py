"""The run's heartbeat: proof, renewed every lease/3 seconds, that its process is alive.

A process that dies without a word (SIGKILL, OOM killer, power loss) stops renewing its
lease; `runs.reap_expired` then marks the run KILLED in forgeml and MLflow. MLflow alone
leaves such runs RUNNING forever (mlflow/mlflow#5963, #3932).
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from forgeml.core.store import RunRecord, Store

_log = logging.getLogger(__name__)

RUNNING = "RUNNING"


class Heartbeat:
    """A daemon thread that renews `run_id`'s lease in the metadata store.

    Args:
        store: the metadata store holding the run.
        run_id: the run to keep alive.
        lease_seconds: how long a beat stays valid; beats come every third of it, so
            two can be lost (a busy database, a long pause) before the lease expires.
    """

    def __init__(self, store: Store, run_id: str, lease_seconds: float) -> None:
        self.store = store
        self.run_id = run_id
        self.interval = lease_seconds / 3
        self.beats = 0
        self._lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"forgeml-heartbeat-{run_id[:8]}", daemon=True
        )

    @property
    def lost(self) -> bool:
        """True once the run was found no longer RUNNING (it was reaped or finished)."""
        return self._lost

    def start(self) -> Heartbeat:
        """Start beating; the first beat is immediate."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and wait for the thread (at most one interval)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 5)

    def beat(self) -> bool:
        """Renew the lease once, in its own transaction; False if the run is no longer RUNNING."""
        with self.store.session() as session:
            result = session.execute(
                update(RunRecord)
                .where(RunRecord.id == self.run_id, RunRecord.status == RUNNING)
                .values(heartbeat_at=datetime.now(UTC))
            )
        self.beats += 1
        return bool(getattr(result, "rowcount", 0))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                alive = self.beat()
            except SQLAlchemyError as error:
                # a locked or briefly unreachable database must not kill training;
                # the lease has room for two missed beats
                _log.warning("Heartbeat of run %s failed: %s", self.run_id, error)
            else:
                if not alive:
                    self._lost = True
                    _log.warning(
                        "Run %s is no longer RUNNING in the store (its lease expired and it "
                        "was reaped); its heartbeat stops.",
                        self.run_id,
                    )
                    return
            self._stop.wait(self.interval)
