from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import JobAttemptRecord, JobRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.executors.base import AttemptHandle
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.jobs import cancel, events_of, find_job
from forgeml.scheduler.model import JobState
from forgeml.scheduler.service import Scheduler
from tests._wait import Gate
from tests.scheduler.conftest import (
    job_spec,
    python_job,
    run_to_end,
    state_of,
    submit_local,
    wait_for,
)


def scheduler_for(workspace: Workspace, **options: float) -> Scheduler:
    from forgeml.scheduler.policy import PolicyOptions

    # preempt at once: the policy's default spares jobs younger than many minutes
    return Scheduler(
        workspace,
        LocalExecutor(cpus=[0, 1], gpus=0),
        policy_options=PolicyOptions(min_runtime_s=0),
        **options,  # type: ignore[arg-type]
    )


def attempts(workspace: Workspace, job_id: str) -> list[JobAttemptRecord]:
    with workspace.store.session() as session:
        query = select(JobAttemptRecord).where(JobAttemptRecord.job_id == job_id)
        return list(session.scalars(query.order_by(JobAttemptRecord.number)))


def _events(workspace: Workspace, job_id: str) -> list[tuple[str, str, str | None]]:
    with workspace.store.session() as session:
        return [
            (e.at.strftime("%H:%M:%S.%f"), e.to_state, e.reason) for e in events_of(session, job_id)
        ]


def transitions(workspace: Workspace, job_id: str) -> list[str]:
    with workspace.store.session() as session:
        return [e.to_state for e in events_of(session, job_id)]


def test_a_job_runs_to_success_with_every_transition_recorded(sched_workspace: Workspace) -> None:
    job_id = submit_local(
        sched_workspace, python_job("import os; print(os.environ['FORGEML_JOB_DIR'])")
    )
    assert run_to_end(scheduler_for(sched_workspace), job_id) == JobState.SUCCEEDED
    assert transitions(sched_workspace, job_id) == ["PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"]
    (attempt,) = attempts(sched_workspace, job_id)
    assert attempt.exit_code == 0 and attempt.ended_at is not None and attempt.nodes == ["local"]
    assert attempt.log_digest is not None
    log = sched_workspace.artifacts.get_bytes(attempt.log_digest).decode()
    assert log.strip().endswith(f"jobs/{job_id}")
    assert attempt.wall_seconds > 0 and attempt.cpu_seconds >= 0


def test_a_crashing_job_is_retried_with_backoff_then_failed_with_its_log_tail(
    sched_workspace: Workspace,
) -> None:
    code = "import sys; print('boom at step 3'); sys.exit(2)"
    job_id = submit_local(sched_workspace, python_job(code, max_retries=2, backoff_seconds=0.2))
    assert run_to_end(scheduler_for(sched_workspace), job_id) == JobState.FAILED
    tries = attempts(sched_workspace, job_id)
    assert [a.state for a in tries] == ["FAILED"] * 3
    gaps = [(b.started_at - a.ended_at).total_seconds() for a, b in itertools.pairwise(tries)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4  # exponential back-off
    job = find_job(sched_workspace, job_id)
    assert job.error is not None
    assert "attempt 3 exited with code 2" in job.error and "boom at step 3" in job.error
    assert transitions(sched_workspace, job_id).count("PENDING") == 3


def test_memory_hog_is_killed_and_reported(sched_workspace: Workspace) -> None:
    code = "import time; x = bytearray(400_000_000); time.sleep(60)"
    job_id = submit_local(
        sched_workspace, python_job(code, resources={"cpus": 1, "memory_gb": 0.1})
    )
    assert run_to_end(scheduler_for(sched_workspace), job_id) == JobState.FAILED
    assert "exceeded its memory limit of 0.1 GB" in (find_job(sched_workspace, job_id).error or "")


def test_timeout_fails_the_job(sched_workspace: Workspace) -> None:
    job_id = submit_local(
        sched_workspace, python_job("import time; time.sleep(60)", timeout_seconds=0.5)
    )
    assert run_to_end(scheduler_for(sched_workspace, grace_seconds=1), job_id) == JobState.FAILED
    assert "timed out after 0.5 s" in (find_job(sched_workspace, job_id).error or "")


def test_cancel_a_running_job(sched_workspace: Workspace) -> None:
    job_id = submit_local(sched_workspace, python_job("import time; time.sleep(60)"))
    scheduler = scheduler_for(sched_workspace, grace_seconds=1)
    wait_for(lambda: state_of(sched_workspace, job_id) == "RUNNING", step=scheduler.cycle)
    cancel(sched_workspace, job_id)
    assert run_to_end(scheduler, job_id) == JobState.CANCELLED
    assert attempts(sched_workspace, job_id)[0].state == "CANCELLED"


def test_gang_starts_all_workers_or_none(sched_workspace: Workspace, gate: Gate) -> None:
    scheduler = scheduler_for(sched_workspace)
    blocker = submit_local(sched_workspace, python_job(gate.wait_code))
    scheduler.cycle()
    gang = submit_local(
        sched_workspace,
        # one write per worker: both share the attempt's log, and print() unbuffered (as
        # under PYTHONUNBUFFERED) writes its pieces separately, so two can interleave mid-line
        python_job("import os; os.write(1, f\"rank {os.environ['RANK']}\\n\".encode())", workers=2),
    )
    scheduler.cycle()
    assert state_of(sched_workspace, gang) == "PENDING"  # one CPU free: not half a gang
    assert state_of(sched_workspace, blocker) == "RUNNING"
    gate.release()
    assert run_to_end(scheduler, gang) == JobState.SUCCEEDED
    (attempt,) = attempts(sched_workspace, gang)
    assert attempt.nodes == ["local", "local"]
    log = sched_workspace.artifacts.get_bytes(attempt.log_digest or "").decode()
    assert "rank 0" in log and "rank 1" in log
    (blocker_attempt,) = attempts(sched_workspace, blocker)
    assert blocker_attempt.ended_at is not None and attempt.started_at >= blocker_attempt.ended_at


_CHECKPOINTING = (
    "import os, signal, sys\n"
    "state = os.path.join(os.environ['FORGEML_JOB_DIR'], 'step')\n"
    "step = int(open(state).read()) if os.path.exists(state) else 0\n"
    "def checkpoint(*_):\n"
    "    open(state, 'w').write(str(step)); print('checkpoint', step, flush=True)\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, checkpoint)\n"
    "print('started at', step, flush=True)\n"
    "while step < 30:\n"
    "    step += 1\n"
    "    if step == 15 and os.environ['FORGEML_JOB_ATTEMPT'] == '1':\n"
    "        signal.pause()  # the first attempt works on until it is preempted\n"
    "print('done from', os.environ['FORGEML_JOB_ATTEMPT'], flush=True)\n"
)


def test_preemption_requeues_the_victim_which_resumes(sched_workspace: Workspace) -> None:
    scheduler = scheduler_for(sched_workspace, grace_seconds=10)
    low = submit_local(
        sched_workspace, python_job(_CHECKPOINTING, priority="low", resources={"cpus": 2})
    )
    log = sched_workspace.settings.home.resolve() / "logs" / "jobs" / low / "1.log"
    wait_for(lambda: log.exists() and "started" in log.read_text(), step=scheduler.cycle)
    high = submit_local(
        sched_workspace, python_job("print('high')", priority="high", resources={"cpus": 2})
    )
    assert run_to_end(scheduler, high) == JobState.SUCCEEDED
    assert run_to_end(scheduler, low) == JobState.SUCCEEDED
    states = transitions(sched_workspace, low)
    assert states == [
        "PENDING", "SCHEDULED", "RUNNING", "PREEMPTED", "PENDING", "SCHEDULED", "RUNNING",
        "SUCCEEDED",
    ]  # fmt: skip
    first, second = attempts(sched_workspace, low)
    assert (first.state, first.exit_code, second.state) == ("PREEMPTED", 143, "SUCCEEDED")
    assert (Path(sched_workspace.settings.home) / "jobs" / low / "step").exists()
    resumed = sched_workspace.artifacts.get_bytes(second.log_digest or "").decode()
    assert "started at 0" not in resumed and "done from 2" in resumed


def test_a_restarted_scheduler_adopts_a_running_attempt(
    sched_workspace: Workspace, gate: Gate
) -> None:
    job_id = submit_local(sched_workspace, python_job(gate.wait_code))
    first = scheduler_for(sched_workspace)
    wait_for(lambda: state_of(sched_workspace, job_id) == "RUNNING", step=first.cycle)
    second = scheduler_for(sched_workspace)  # the control plane restarted
    second.startup()
    assert state_of(sched_workspace, job_id) == "RUNNING"
    gate.release()
    assert run_to_end(second, job_id) == JobState.SUCCEEDED
    assert len(attempts(sched_workspace, job_id)) == 1


def test_a_lost_attempt_is_marked_and_requeued(sched_workspace: Workspace) -> None:
    job_id = submit_local(sched_workspace, python_job("import time; time.sleep(60)"))
    first = scheduler_for(sched_workspace)
    wait_for(lambda: state_of(sched_workspace, job_id) == "RUNNING", step=first.cycle)
    (attempt,) = attempts(sched_workspace, job_id)
    pid = int((attempt.external_id or "").split(":")[0])
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not LocalExecutor().adopt(AttemptHandle("local", attempt.external_id or "")))
    second = scheduler_for(sched_workspace)
    second.startup()
    lost, *_ = attempts(sched_workspace, job_id)
    assert lost.state == "LOST" and lost.reason == "the control plane lost the attempt"
    assert state_of(sched_workspace, job_id) in ("PENDING", "RUNNING")
    second.cycle()
    wait_for(lambda: len(attempts(sched_workspace, job_id)) == 2, step=second.cycle)
    cancel(sched_workspace, job_id)
    second.grace_seconds = 0.5
    assert run_to_end(second, job_id) == JobState.CANCELLED


def test_a_control_plane_killed_as_it_launches_adopts_the_attempt_instead_of_a_second(
    sched_workspace: Workspace, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    starts = tmp_path / "starts"
    code = f"open({str(starts)!r}, 'a').write('started\\n'); {gate.wait_code}"
    job_id = submit_local(sched_workspace, python_job(code))
    first = scheduler_for(sched_workspace)
    wait_for(starts.exists, step=first.cycle)
    # what a SIGKILL between `executor.launch` and the write of its handle leaves behind:
    # the attempt recorded without a handle, the job SCHEDULED, the launcher running
    with sched_workspace.store.session() as session:
        attempt = session.scalars(
            select(JobAttemptRecord).where(JobAttemptRecord.job_id == job_id)
        ).one()
        attempt.external_id = None
        job = session.get(JobRecord, job_id)
        assert job is not None
        job.state = JobState.SCHEDULED.value
    second = scheduler_for(sched_workspace)
    second.startup()
    assert state_of(sched_workspace, job_id) == "RUNNING"
    (adopted,) = attempts(sched_workspace, job_id)
    assert adopted.external_id and adopted.state == "RUNNING"
    for _ in range(3):
        second.cycle()
    gate.release()
    assert run_to_end(second, job_id) == JobState.SUCCEEDED
    assert len(attempts(sched_workspace, job_id)) == 1
    assert starts.read_text() == "started\n"  # the job ran once


def test_recover_finds_no_attempt_that_never_started(tmp_path: Path) -> None:
    executor = LocalExecutor(cpus=[0], gpus=0)
    log = tmp_path / "attempt-1.log"
    assert executor.recover(log, wait_seconds=0) is None  # no launch spec: never launched
    log.with_suffix(".launch.json").write_text("{}")
    assert executor.recover(log, wait_seconds=0.1) is None  # no launcher ever wrote its pid


# ---- preemption end to end with a real training job


@pytest.mark.slow
def test_a_preempted_training_job_checkpoints_requeues_and_resumes_to_completion(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.scheduler.contract import read_result
    from forgeml.tracking.jobs import TRAIN_MODULE
    from forgeml.train.config import load_config
    from tests.train.conftest import ADULT_CONFIG, copy_adult_home, quick

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)  # the job runs here: MLflow must not leave ./mlruns behind
    home = copy_adult_home(tmp_path_factory, tmp_path / "home")
    settings = Settings(home=home, user="tester", scheduler_cpus=2, scheduler_gpus=0)
    workspace = Workspace(settings)
    steps = 300
    args = quick(
        f"max_steps={steps}",
        "batch_size=64",
        "data.max_rows=4096",
        "checkpoint.every_steps=10",
        "eval_every_steps=100",
        "log_every_steps=1",  # every step reaches MLflow: slow enough to be preempted midway
        "early_stopping=null",
    )
    config = load_config(str(ADULT_CONFIG), args[1::2])
    spec = json.dumps({"config": config.model_dump(mode="json")})
    train = [sys.executable, "-m", TRAIN_MODULE, spec]
    low = submit_local(
        workspace,
        job_spec(train, kind="train", priority="low", resources={"cpus": 2, "memory_gb": 3}),
    )
    scheduler = scheduler_for(workspace, grace_seconds=60)
    runs = home / "runs"
    wait_for(lambda: any(runs.glob("*/**/step-*")), timeout=180, step=scheduler.cycle)
    high = submit_local(
        workspace,
        python_job("print('high done')", priority="high", resources={"cpus": 2}),
    )
    assert run_to_end(scheduler, high, timeout=180) == JobState.SUCCEEDED
    assert run_to_end(scheduler, low, timeout=300) == JobState.SUCCEEDED

    tries = attempts(workspace, low)
    assert len(tries) == 2, (_events(workspace, low), _events(workspace, high))
    first, second = tries
    assert (first.state, first.exit_code) == ("PREEMPTED", 143)
    assert second.state == "SUCCEEDED"
    assert "PREEMPTED" in transitions(workspace, low)
    folder = home.resolve() / "jobs" / low
    stopped, finished = read_result(folder / "result-1.json"), read_result(folder / "result-2.json")
    assert stopped is not None and finished is not None
    assert (stopped.outcome, finished.outcome) == ("PREEMPTED", "SUCCEEDED")
    run_id = stopped.outputs["run_id"]
    summary = finished.outputs
    assert (summary["run_id"], summary["status"], summary["steps"]) == (run_id, "FINISHED", steps)
    assert summary["model"] == "adult-mlp@v1"
    (run,) = [p.name for p in runs.iterdir()]  # one run, resumed, not a second one
    assert run == run_id
    assert not (tmp_path / "mlruns").exists() and (home / "mlartifacts").is_dir()
    high_attempt = attempts(workspace, high)[0]
    assert first.ended_at is not None and high_attempt.started_at >= first.ended_at
    assert second.started_at >= (high_attempt.ended_at or second.started_at)
    workspace.close()
