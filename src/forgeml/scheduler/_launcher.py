"""The tiny parent of every local job attempt: `python _launcher.py SPEC_FILE`.

The local executor starts this script detached (`forgeml.core.processes.spawn_detached`,
by path, so only the standard library loads): it leads its own session, its output goes
to the attempt's log file, and the control plane is never its parent (so its death or
restart changes nothing for the job). It starts one process per worker (command, env,
CPU set, cwd), forwards SIGTERM to them, and when they have all ended writes
`{"exit_code": N, "ended_at": T}` to the spec's exit file atomically (temp + rename). A
restarted control plane finds a live attempt by the launcher's pid and create time, or
reads how it ended from the exit file. Before anything else the launcher writes its pid to
the spec's pid file: a control plane that died between starting it and recording its pid
finds it there (`LocalExecutor.recover`) instead of starting the attempt a second time.

If one worker fails the others are stopped, as torchrun does: a gang lives and dies together.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_POLL_SECONDS = 0.05
_GRACE_SECONDS = 10.0
_BACKSTOP_SECONDS = 600.0


def _start(worker: dict) -> subprocess.Popen[bytes]:
    cpus = worker.get("cpus")

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen(
        worker["command"],
        env=worker["env"],
        cwd=worker.get("cwd"),
        preexec_fn=pin,  # noqa: PLW1509 - the launcher runs no threads
    )


def _stop(workers: list[subprocess.Popen[bytes]], sig: int) -> None:
    for process in workers:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)


def _write_exit(path: Path, code: int) -> None:
    _write_atomic(path, json.dumps({"exit_code": code, "ended_at": time.time()}))


def _write_atomic(path: Path, text: str) -> None:
    temp = path.with_suffix(".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def main(spec_path: str) -> int:
    """Run the workers of one attempt; returns the gang's exit code."""
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("pid_file"):
        _write_atomic(Path(spec["pid_file"]), str(os.getpid()))
    terminating: list[float] = []

    def on_term(*_: object) -> None:
        if not terminating:
            terminating.append(time.monotonic())
            _stop(workers, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        workers.extend(_start(worker) for worker in spec["workers"])
    except OSError as error:
        sys.stderr.write(f"forgeml: cannot start the job command: {error}\n")
        sys.stderr.flush()
        _stop(workers, signal.SIGKILL)
        _write_exit(Path(spec["exit_file"]), 127)
        return 127
    first_failure = 0  # the gang's exit code: the first worker to fail, else 0
    gang_stopped: list[float] = []  # when a failed worker made us stop the others
    while [process.poll() for process in workers].count(None):
        failed = [p.returncode for p in workers if p.returncode not in (None, 0)]
        if failed and not first_failure:
            first_failure = failed[0]
            gang_stopped.append(time.monotonic())
            on_term()
        # a SIGTERM from outside is the executor's: it kills the session after its own
        # grace (the scheduler's); ours is a backstop for when no control plane is left
        grace = spec.get("grace", _GRACE_SECONDS) if gang_stopped else _BACKSTOP_SECONDS
        since = (gang_stopped or terminating or [math.inf])[0]
        if time.monotonic() - since > grace:
            _stop(workers, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)
    codes = [process.returncode for process in workers]
    code = first_failure or next((c for c in codes if c != 0), 0)
    _write_exit(Path(spec["exit_file"]), code)
    return code


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.exit(code if code >= 0 else 128 - code)
