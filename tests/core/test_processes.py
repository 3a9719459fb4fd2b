from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import psutil
import pytest

from forgeml.core.processes import (
    create_time,
    free_port,
    is_alive,
    spawn_detached,
    stop_groups,
)
from tests._wait import wait_until

PY = sys.executable


def _wait_for(path: Path, text: str, timeout: float = 20.0) -> None:
    wait_until(lambda: path.exists() and text in path.read_text(), timeout, f"{text!r} in {path}")


def test_a_free_port_can_be_bound() -> None:
    port = free_port()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_detached_command_leads_its_own_session_and_logs_to_its_file(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "a.log"
    code = "import os, time; print('ready', os.getcwd(), flush=True); time.sleep(60)"

    pid = spawn_detached([PY, "-c", code], log, cwd=tmp_path)
    try:
        _wait_for(log, "ready")
        assert os.getsid(pid) == pid  # its own session: signals reach its whole group
        assert psutil.Process(pid).ppid() != os.getpid()  # not our child, never our zombie
        assert str(tmp_path) in log.read_text()
        assert is_alive(pid, create_time(pid))
        assert not is_alive(pid, create_time(pid) - 10)  # same pid, another process
    finally:
        assert stop_groups([pid], grace_seconds=5) == []
    assert not is_alive(pid)


def test_stopping_a_group_reaches_its_children_and_kills_after_the_grace(
    tmp_path: Path,
) -> None:
    log = tmp_path / "b.log"
    stubborn = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('child', child.pid, flush=True); time.sleep(60)"
    )
    pid = spawn_detached([PY, "-c", stubborn], log)
    _wait_for(log, "child")
    child = int(log.read_text().split()[-1])

    seen: list[bool] = []

    def running(target: int) -> bool:
        seen.append(is_alive(target))
        return seen[-1]

    left = stop_groups([pid], grace_seconds=0.5, running=running)

    assert left == []
    # alive before and after the SIGTERM it ignores, until the SIGKILL after the grace
    assert seen[:2] == [True, True] and seen[-1] is False
    assert not is_alive(pid)
    # the group's other members got the signals too; init reaps them a moment later
    wait_until(lambda: not is_alive(child), what="the child's exit")


def test_a_command_that_cannot_start_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="could not be started"):
        spawn_detached([str(tmp_path / "no-such-program")], tmp_path / "c.log")


def test_a_signal_to_a_gone_group_is_harmless() -> None:
    from forgeml.core.processes import signal_group

    signal_group(2**22 + 12345, signal.SIGTERM)


def test_a_stepped_clock_does_not_make_a_running_process_read_as_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # psutil adds /proc/stat's boot time, whole seconds recomputed from the wall clock at
    # each read: a clock stepped across a second moved every process's start by one, and
    # the local executor took its running attempts for ended ones (CI, 2026-12-05)
    import psutil._pslinux as pslinux

    pid = os.getpid()
    created, wall = create_time(pid), psutil.Process(pid).create_time()
    booted = pslinux.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: booted + 1.0)

    assert is_alive(pid, created)
    assert not is_alive(pid, created - 0.5)
    # an attempt recorded before, with the wall-clock start: the step is forgiven too
    assert is_alive(pid, wall)
    assert not is_alive(pid, wall - 10)


def test_the_start_time_of_no_process_is_an_error() -> None:
    with pytest.raises(psutil.NoSuchProcess):
        create_time(2**22 + 12345)
    assert not is_alive(2**22 + 12345, 100.0)
