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


# a start time above this is seconds since the epoch (what `create_time` recorded before it
# counted from boot); below it, seconds since boot (over 30 years of uptime)
_EPOCH_STARTS = 1e9


def create_time(pid: int) -> float:
    """When `pid` started, to name the process with its pid even after the pid is reused.

    On Linux: seconds from boot to its start, the kernel's count of clock ticks, which no
    change of the system clock moves. psutil's wall-clock start time adds the boot time
    that /proc/stat gives in whole seconds, recomputed from the clock at each read: when
    the clock is stepped (NTP, a VM's time sync) across a second, every running process
    seemed to have started a second earlier or later, so a running job's attempt read as
    ended ("without recording an exit code"). Elsewhere: psutil's wall-clock start time.

    Raises:
        psutil.NoSuchProcess: no process has that pid.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():  # Linux, and no such process
            raise psutil.NoSuchProcess(pid) from None
        return float(psutil.Process(pid).create_time())
    # the fields after the command's name, which may hold spaces and parentheses; the
    # 22nd field (starttime) is the 20th after it
    ticks = int(stat.rpartition(")")[2].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def same_process(pid: int, created: float) -> bool:
    """Whether `pid` is still the process that started at `created` (`create_time`)."""
    if created > _EPOCH_STARTS:  # recorded as wall-clock time: compare as such
        # /proc/stat's boot time is whole seconds; a stepped clock moves it by one
        return abs(psutil.Process(pid).create_time() - created) < 1.5
    return abs(create_time(pid) - created) < 0.005


def is_alive(pid: int, created: float | None = None) -> bool:
    """Whether `pid` runs (not a zombie), and is the process created at `created` if given."""
    try:
        if created is not None and not same_process(pid, created):
            return False
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError, ValueError, IndexError):
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
