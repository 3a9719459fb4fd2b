"""Processes that outlive the command that starts them: detached start, signals, free ports.

The local executor's job attempts and the model-server replicas are both started this way:
`spawn_detached` runs a command in its own session (so signals reach its whole process
group and the starting command may exit or restart), with stdout and stderr appended to a
log file, and returns its pid at once. `stop_groups` is SIGTERM, a grace, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

LOCALHOST = "127.0.0.1"
# run by path with only the standard library: starts the command in its own session,
# prints its pid and exits, so the command is never our child (nor our zombie)
_DETACH = Path(__file__).resolve().parent / "_detach.py"


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port free on `host` now (another process may take it before it is bound)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def spawn_detached(
    command: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start `command` in its own session, output appended to `log_path`; returns its pid.

    Raises:
        OSError: the command could not be started (the reason is the detacher's last line).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, str(_DETACH), str(log_path), str(cwd or ""), *command],
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0 or not result.stdout.strip().isdigit():
        reason = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise OSError(f"could not be started: {reason[0]}")
    return int(result.stdout)


def create_time(pid: int) -> float:
    """When `pid` started (with the pid, it names the process even after pid reuse)."""
    return float(psutil.Process(pid).create_time())


def is_alive(pid: int, created: float | None = None) -> bool:
    """Whether `pid` runs (not a zombie), and is the process created at `created` if given."""
    try:
        process = psutil.Process(pid)
        if created is not None and abs(process.create_time() - created) >= 0.01:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def signal_group(pid: int, signum: int) -> None:
    """Send `signum` to the process group `pid` leads (a detached process leads its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def stop_groups(
    pids: Sequence[int], grace_seconds: float, running: Callable[[int], bool] = is_alive
) -> list[int]:
    """SIGTERM each process group, SIGKILL those still `running` after the grace.

    Returns:
        The pids still running at the end (none, unless a process cannot be killed).
    """
    live = [pid for pid in pids if running(pid)]
    for pid in live:
        signal_group(pid, signal.SIGTERM)
    live = _wait_gone(live, grace_seconds, running)
    for pid in live:
        signal_group(pid, signal.SIGKILL)
    # a killed process disappears once init (its parent) reaps it
    return _wait_gone(live, 5.0, running)


def _wait_gone(pids: list[int], seconds: float, running: Callable[[int], bool]) -> list[int]:
    deadline = time.monotonic() + seconds
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = [pid for pid in pids if running(pid)]
    return pids
