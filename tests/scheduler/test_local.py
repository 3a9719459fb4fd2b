from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from forgeml.scheduler.executors import create_executor
from forgeml.scheduler.executors.base import AttemptHandle, AttemptStatus, LaunchRequest
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.model import Resources
from tests._wait import Gate
from tests.scheduler.conftest import wait_for

PY = sys.executable


def request(tmp_path: Path, code: str, **fields: object) -> LaunchRequest:
    values: dict[str, object] = {
        "job_id": "j1",
        "attempt": 1,
        "command": [PY, "-c", code],
        "env": {"FORGEML_JOB_ID": "j1"},
        "workers": 1,
        "resources": Resources(1, 0, 1.0),
        "nodes": ("local",),
        "log_path": tmp_path / "logs" / "1.log",
    }
    values.update(fields)
    return LaunchRequest(**values)  # type: ignore[arg-type]


def finish(executor: LocalExecutor, handle: AttemptHandle, timeout: float = 20) -> AttemptStatus:
    seen: list[AttemptStatus] = []

    def ended() -> bool:
        seen.append(executor.poll(handle))
        return not seen[-1].running

    wait_for(ended, timeout)
    return seen[-1]


def test_exit_code_log_and_env_come_back(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    code = "import os,sys; print('job', os.environ['FORGEML_JOB_ID']); sys.exit(3)"
    handle = executor.launch(request(tmp_path, code))
    status = finish(executor, handle)
    assert status.exit_code == 3
    assert "job j1" in (tmp_path / "logs" / "1.log").read_text()
    assert status.usage.wall_seconds > 0


def test_worker_is_pinned_to_its_cpus_and_sees_no_gpu(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0], gpus=0)
    code = (
        "import os; print(sorted(os.sched_getaffinity(0)),"
        " repr(os.environ['CUDA_VISIBLE_DEVICES']))"
    )
    handle = executor.launch(request(tmp_path, code))
    assert finish(executor, handle).exit_code == 0
    assert "[0] ''" in (tmp_path / "logs" / "1.log").read_text()


def test_gang_workers_get_torchrun_environment(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0, 1])
    code = (
        # one write per line: two ranks share the log, and print's pieces interleave
        "import os,sys; e = os.environ; sys.stdout.write(f\"rank {e['RANK']} {e['WORLD_SIZE']}"
        " {e['MASTER_ADDR']} {e['MASTER_PORT'].isdigit()}\\n\")"
    )
    handle = executor.launch(request(tmp_path, code, workers=2, nodes=("local", "local")))
    assert finish(executor, handle).exit_code == 0
    log = (tmp_path / "logs" / "1.log").read_text()
    assert "rank 0 2 127.0.0.1 True" in log and "rank 1 2 127.0.0.1 True" in log


def test_one_failing_worker_stops_the_gang(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0, 1])
    code = "import os,sys,time; sys.exit(5) if os.environ['RANK']=='1' else time.sleep(60)"
    handle = executor.launch(request(tmp_path, code, workers=2, nodes=("local", "local")))
    # rank 0 sleeps past `finish`'s timeout: only a stopped gang ends in time
    assert finish(executor, handle).exit_code == 5


def test_memory_limit_kills_the_tree(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    code = "import time; x = bytearray(400_000_000); time.sleep(60)"
    handle = executor.launch(request(tmp_path, code, resources=Resources(1, 0, 0.1)))
    status = finish(executor, handle)
    assert status.exit_code is not None and status.exit_code != 0
    assert status.reason == "exceeded its memory limit of 0.1 GB"


def test_timeout_terminates(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    handle = executor.launch(request(tmp_path, "import time; time.sleep(60)", timeout_seconds=0.5))
    status = finish(executor, handle)
    assert status.reason == "timed out after 0.5 s"


def test_terminate_forwards_sigterm_to_the_job(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    code = (
        "import signal,sys,time\n"
        "def stop(*a):\n    print('checkpoint', flush=True)\n    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    handle = executor.launch(request(tmp_path, code))
    log = tmp_path / "logs" / "1.log"
    wait_for(lambda: "ready" in log.read_text())
    executor.terminate(handle, grace_seconds=10)
    assert finish(executor, handle).exit_code == 143
    assert "checkpoint" in log.read_text()


def test_terminate_kills_after_the_grace(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    code = (
        "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    handle = executor.launch(request(tmp_path, code))
    wait_for(lambda: "ready" in (tmp_path / "logs" / "1.log").read_text())
    executor.terminate(handle, grace_seconds=0.3)
    assert finish(executor, handle).exit_code == -signal.SIGKILL


def test_a_new_executor_adopts_a_live_attempt_and_reads_its_exit(
    tmp_path: Path, gate: Gate
) -> None:
    first = LocalExecutor(cpus=[0])
    handle = first.launch(request(tmp_path, f"import sys\n{gate.wait_code}\nsys.exit(7)"))
    restarted = LocalExecutor(cpus=[0])  # the control plane came back without its memory
    assert restarted.adopt(handle)
    assert restarted.poll(handle).running
    gate.release()
    assert finish(restarted, handle).exit_code == 7
    pid = int(handle.external_id.split(":")[0])
    assert psutil.Process(pid).ppid() != os.getpid()  # detached: not the control plane's child


def test_an_attempt_that_vanished_is_not_adopted(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    handle = executor.launch(request(tmp_path, "import time; time.sleep(60)"))
    pid = int(handle.external_id.split(":")[0])
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not LocalExecutor(cpus=[0]).adopt(handle))
    assert not LocalExecutor(cpus=[0]).adopt(handle)
    status = LocalExecutor(cpus=[0]).poll(handle)
    assert not status.running and status.exit_code == -signal.SIGKILL


def test_missing_program_exits_127(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0])
    handle = executor.launch(request(tmp_path, "", command=["/nonexistent/program"]))
    assert finish(executor, handle).exit_code == 127
    assert "cannot start the job command" in (tmp_path / "logs" / "1.log").read_text()
    exit_file = tmp_path / "logs" / "1.exit"
    assert json.loads(exit_file.read_text())["exit_code"] == 127


def test_registry_builds_by_name() -> None:
    from forgeml.core.errors import UsageError

    assert create_executor("local").name == "local"
    with pytest.raises(UsageError, match="Unknown executor 'nope'"):
        create_executor("nope")
