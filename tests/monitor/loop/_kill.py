"""Killing `forgeml server` at a chosen point of the loop, on purpose rather than by luck.

`Server` runs the real `forgeml server` and SIGKILLs it. `Freezer` pins a process with
SIGSTOP so that the world can be moved to an exact state around it: a frozen server
cannot act on what it has not yet seen (an alert, a job that ended), a frozen pipeline
runner cannot record a step its job finished. Every store session takes SQLite's write
lock up front (BEGIN IMMEDIATE), so a process frozen inside one would stall every other;
`Freezer.freeze` lets the process run on and tries again until it is frozen outside one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import JobAttemptRecord, JobRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.lease import running_server
from tests._wait import wait_until

_DATABASES = ("forgeml.db", "mlflow.db")


class Server:
    """The real `forgeml server` of a home, started again after each SIGKILL."""

    def __init__(self, home: Path, log: Path) -> None:
        self.home, self.log = home, log
        self.kills = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("FORGEML_DB_URL", "FORGEML_ARTIFACTS_URL", "MLFLOW_TRACKING_URI")
        }
        env |= {"FORGEML_HOME": str(self.home), "FORGEML_USER": "tester"}
        forgeml = str(Path(sys.executable).with_name("forgeml"))
        with self.log.open("ab") as sink:
            process = subprocess.Popen(
                [forgeml, "server", "--interval", "0.2"],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.process = process
        settings = Settings(home=self.home)

        def up() -> bool:
            assert process.poll() is None, self.log.read_text()[-2000:]
            found = running_server(settings)
            return found is not None and found.pid == process.pid

        wait_until(up, 60, "the server's lease", 0.05)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL the server (frozen or not): no handler, no clean-up runs."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(30)
        self.process = None
        self.kills += 1

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None


def _lock_free(home: Path) -> bool:
    """No process holds a write lock on the home's databases (one held for a moment by a
    running process is waited for, one held by a frozen process is not released)."""
    for name in _DATABASES:
        path = home / name
        if not path.exists():
            continue
        connection = sqlite3.connect(path, timeout=1.0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
        except sqlite3.OperationalError:
            return False
        finally:
            connection.close()
    return True


class Freezer:
    """SIGSTOP processes outside any transaction; `thaw_all` lets every one go on."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.frozen: set[int] = set()

    def freeze(self, pid: int, what: str) -> None:
        def stopped() -> bool:
            return bool(psutil.Process(pid).status() == psutil.STATUS_STOPPED)

        def frozen() -> bool:
            os.kill(pid, signal.SIGSTOP)
            wait_until(stopped, 10, f"{what} stopped", 0.001)
            if _lock_free(self.home):
                return True
            os.kill(pid, signal.SIGCONT)  # caught inside a transaction: let it finish
            return False

        wait_until(frozen, 60, f"{what} frozen outside a transaction", 0.01)
        self.frozen.add(pid)

    def thaw(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        self.frozen.discard(pid)

    def thaw_all(self) -> None:
        for pid in list(self.frozen):
            self.thaw(pid)


def job(workspace: Workspace, name: str) -> JobRecord | None:
    """The job called `name` (a step's: PIPELINE.STEP), or whose name starts `name@` (a
    trigger's run job: TRIGGER@FIRING)."""
    with workspace.store.session() as session:
        return session.scalars(
            select(JobRecord).where(
                (JobRecord.name == name) | JobRecord.name.startswith(f"{name}@")
            )
        ).first()


def worker_pid(workspace: Workspace, name: str, module: str) -> int:
    """The pid of the running job's worker process (`python -m MODULE`), under its launcher."""
    found = job(workspace, name)
    assert found is not None and found.state == "RUNNING", f"job {name} does not run"
    with workspace.store.session() as session:
        external = session.scalars(
            select(JobAttemptRecord.external_id).where(
                JobAttemptRecord.job_id == found.id, JobAttemptRecord.ended_at.is_(None)
            )
        ).one()
    assert external is not None
    launcher = psutil.Process(int(external.split(":", 1)[0]))
    workers: list[int] = []

    def started() -> bool:
        workers[:] = [p.pid for p in launcher.children(recursive=True) if module in p.cmdline()]
        return bool(workers)

    wait_until(started, 30, f"job {name}'s `python -m {module}`", 0.01)
    return workers[0]
