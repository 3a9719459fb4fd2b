"""The closed loop end to end with a real `forgeml server`: an alert fires, the champion
is retrained on the newest data, gated, run as a canary under live traffic and promoted.

The server is killed with SIGKILL at every stage, each at an exact state of the store
(see `_kill.py` for how a process is pinned there), and started again:
  1. the alert is recorded and the trigger has not fired yet (the server was frozen);
  2. the trigger fired and its run job runs, but the pipeline run is not opened yet;
  3. while the retraining job runs;
  4. while the gate's job runs, the pipeline runner frozen: its job ends while no server
     watches it;
  5. the gate's job recorded SUCCEEDED, the step not yet, the canary not yet submitted;
  6. during the canary (its replica up, its job frozen while the server is down);
  7. at promotion: the alias moved and audited, the canary's job not ended;
  8. the canary's job recorded SUCCEEDED, the step and the run not yet.
Afterwards exactly one firing, one pipeline run, one attempt of every job, one audit event
of each kind, the alias on the challenger, the deployment serving it, no canary left.

Two windows are too short to hit from outside (milliseconds), so they are tested from the
state a SIGKILL there leaves: the firing recorded and its job not yet submitted
(tests/pipelines/test_triggers.py), and an attempt launched whose handle is not yet
recorded (tests/scheduler/test_service.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from forgeml.core.store import (
    AlertRecord,
    AuditEvent,
    JobAttemptRecord,
    JobRecord,
    PipelineRunRecord,
    PipelineStepRunRecord,
)
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import parse_message, receive
from forgeml.monitor.loop import apply_policy, loop_timeline
from forgeml.pipelines.triggers import list_firings
from forgeml.serve import deployments
from forgeml.tracking import get_model_version
from tests._wait import wait_until
from tests.monitor.loop._kill import Freezer, Server, job, worker_pid
from tests.monitor.loop.conftest import DEPLOYMENT, POLICY, champion_home
from tests.serve.test_deployments import adult_records, kill_servers, server_pids

RUN = "policy-adult"
RUNNER = "forgeml.pipelines.run_job"
RELEASE = "forgeml.pipelines.release"
ALERT = {
    "status": "firing",
    "labels": {"alertname": "ForgemlDriftDetected", "model": DEPLOYMENT},
    "annotations": {"summary": "age and hours-per-week drifted"},
    "startsAt": "2026-12-03T12:00:00Z",
}


def _step_state(workspace: Workspace, name: str) -> str | None:
    with workspace.store.session() as session:
        return session.scalar(
            select(PipelineStepRunRecord.state)
            .join(PipelineRunRecord, PipelineRunRecord.id == PipelineStepRunRecord.run_id)
            .where(PipelineRunRecord.name == RUN, PipelineStepRunRecord.name == name)
        )


def _job_state(workspace: Workspace, name: str) -> str | None:
    found = job(workspace, name)
    return found.state if found is not None else None


def _runs(workspace: Workspace) -> int:
    with workspace.store.session() as session:
        query = select(func.count()).where(PipelineRunRecord.name == RUN)
        return session.scalar(query.select_from(PipelineRunRecord)) or 0


def _promotions(workspace: Workspace, ref: str) -> int:
    with workspace.store.session() as session:
        query = select(func.count()).where(
            AuditEvent.action == "model.promote", AuditEvent.object_ref == ref
        )
        return session.scalar(query.select_from(AuditEvent)) or 0


class Traffic:
    """Requests to every replica of the deployment, in a thread, until stopped."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.stop = threading.Event()
        self.answered = 0
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def _send(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self.stop.is_set():
                for replica in deployments.get_deployment(self.workspace, DEPLOYMENT).replicas:
                    try:
                        response = client.post(
                            f"{replica.url}/v1/models/{DEPLOYMENT}:predict",
                            json={"instances": adult_records(2)},
                        )
                    except httpx.HTTPError:  # a replica of a revision being replaced
                        continue
                    self.answered += response.status_code == 200
                self.stop.wait(0.05)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def _walk_the_loop(workspace: Workspace, server: Server, freezer: Freezer) -> None:
    """Drive the loop from the alert to the run's end, killing the server at each stage."""
    # 1. the alert is recorded while the server is frozen: it dies before it fires
    freezer.freeze(server.pid, "the server")
    receive(
        workspace,
        parse_message(
            {"version": "4", "status": "firing", "receiver": "forgeml", "alerts": [ALERT]}
        ),
    )
    assert list_firings(workspace, RUN) == []
    server.restart()

    # 2. fired and its run job started, the pipeline run not yet opened
    wait_until(
        lambda: _job_state(workspace, RUN) == "RUNNING" and _runs(workspace) == 0,
        120,
        "the run job running before its pipeline run opens",
        0.02,
    )
    server.restart()

    # 3. while the retraining runs
    wait_until(lambda: _job_state(workspace, f"{RUN}.retrain") == "RUNNING", 240, "retrain", 0.05)
    server.restart()

    # 4. while the gate runs, its runner frozen: the gate's job ends with no server watching
    wait_until(lambda: _job_state(workspace, f"{RUN}.gate") == "RUNNING", 240, "gate", 0.02)
    runner = worker_pid(workspace, RUN, RUNNER)
    freezer.freeze(runner, "the pipeline runner")
    server.restart()
    # 5. its job recorded SUCCEEDED; the step is not (the runner is frozen), nor the canary
    wait_until(lambda: _job_state(workspace, f"{RUN}.gate") == "SUCCEEDED", 120, "gate's end", 0.05)
    assert _step_state(workspace, "gate") == "RUNNING" and job(workspace, f"{RUN}.canary") is None
    server.restart()
    freezer.thaw(runner)

    # 6. during the canary: its replica is up; the canary job waits while the server restarts
    wait_until(
        lambda: (
            _job_state(workspace, f"{RUN}.canary") == "RUNNING"
            and deployments.get_deployment(workspace, DEPLOYMENT).spec.canary is not None
        ),
        240,
        "the canary's replica",
        0.05,
    )
    canary = worker_pid(workspace, f"{RUN}.canary", RELEASE)
    freezer.freeze(runner, "the pipeline runner")
    freezer.freeze(canary, "the canary job")
    server.restart()
    freezer.thaw(canary)

    # 7. at promotion: the alias moved (audited), the canary job still at work
    challenger = "adult-mlp@v2"
    wait_until(lambda: _promotions(workspace, challenger) == 1, 120, "the promotion", 0.02)
    freezer.freeze(canary, "the canary job")
    assert _job_state(workspace, f"{RUN}.canary") == "RUNNING"
    server.restart()
    freezer.thaw(canary)

    # 8. the canary's job recorded SUCCEEDED, its step and the run not yet
    wait_until(
        lambda: _job_state(workspace, f"{RUN}.canary") == "SUCCEEDED", 120, "canary's end", 0.05
    )
    assert _step_state(workspace, "canary") == "RUNNING"
    server.kill()
    freezer.thaw(runner)
    server.start()
    wait_until(lambda: _job_state(workspace, RUN) == "SUCCEEDED", 120, "the run job's end", 0.05)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_alert_to_promoted_challenger_survives_kill_9_of_the_server_at_every_stage(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = tmp_path / "home"
    workspace = champion_home(home, tmp_path_factory)
    log = tmp_path / "server.log"
    server = Server(home, log)
    freezer = Freezer(home)
    traffic = None
    try:
        deployments.deploy(workspace, DEPLOYMENT, "adult-mlp@production", ready_timeout=120)
        (tmp_path / "policy.yaml").write_text(POLICY)
        apply_policy(workspace, tmp_path / "policy.yaml")
        traffic = Traffic(workspace)
        server.start()
        _walk_the_loop(workspace, server, freezer)
        found = deployments.get_deployment(workspace, DEPLOYMENT)
        # the old revision's and the canary's replicas are gone; only the new ones serve
        wait_until(
            lambda: sorted(server_pids(DEPLOYMENT)) == sorted(r.pid for r in found.replicas),
            60,
            "only the recorded replicas left",
            0.1,
        )
    finally:
        freezer.thaw_all()
        if traffic is not None:
            traffic.close()
        server.stop()
        kill_servers(DEPLOYMENT)

    assert server.kills == 8
    assert _step_state(workspace, "canary") == "SUCCEEDED", log.read_text()[-3000:]
    _assert_once_each(workspace)
    assert get_model_version(workspace, "adult-mlp@production").ref == "adult-mlp@v2"
    assert found.spec.model == "adult-mlp@v2" and found.spec.canary is None
    assert [(r.role, r.model_ref) for r in found.replicas] == [("primary", "adult-mlp@v2")] * len(
        found.replicas
    )
    whats = [event.what for event in loop_timeline(workspace, "adult")]
    assert whats[0] == "alert ForgemlDriftDetected fired"
    for done in ("retrain succeeded", "gate succeeded", "canary succeeded"):
        assert done in whats
    assert traffic.answered > 0


def _assert_once_each(workspace: Workspace) -> None:
    """One alert, one firing, one run, one attempt of each job, one audit event of each kind."""
    assert len(list_firings(workspace, RUN)) == 1
    with workspace.store.session() as session:
        assert (
            session.scalar(
                select(func.count())
                .where(AlertRecord.rule == "ForgemlDriftDetected")
                .select_from(AlertRecord)
            )
            == 1
        )
        jobs = session.execute(
            select(JobRecord.name, JobRecord.state, func.count(JobAttemptRecord.id))
            .join(JobAttemptRecord, JobAttemptRecord.job_id == JobRecord.id)
            .where(JobRecord.name.startswith(RUN))
            .group_by(JobRecord.id)
        ).all()
        runs = session.scalars(select(PipelineRunRecord).where(PipelineRunRecord.name == RUN)).all()
        actions = Counter(
            (event.action, event.object_ref)
            for event in session.scalars(
                select(AuditEvent).where(
                    AuditEvent.action.startswith("pipeline.")
                    | AuditEvent.action.startswith("deployment.canary.")
                    | AuditEvent.action.startswith("model.promote")
                )
            )
        )
        assert len(runs) == 1 and runs[0].state == "SUCCEEDED"
        assert [(s.name, s.state) for s in runs[0].steps] == [
            ("retrain", "SUCCEEDED"),
            ("gate", "SUCCEEDED"),
            ("canary", "SUCCEEDED"),
        ]
        run_id = runs[0].id
    steps = sorted((name, state, attempts) for name, state, attempts in jobs if "@" not in name)
    assert steps == [
        (f"{RUN}.canary", "SUCCEEDED", 1),
        (f"{RUN}.gate", "SUCCEEDED", 1),
        (f"{RUN}.retrain", "SUCCEEDED", 1),
    ]
    assert [(state, attempts) for name, state, attempts in jobs if "@" in name] == [
        ("SUCCEEDED", 1)
    ]
    kinds = Counter(action for action, _ in actions.elements())
    assert kinds["pipeline.trigger.fire"] == 1
    assert actions[("pipeline.run.start", f"pipeline:{run_id}")] == 1
    assert actions[("pipeline.run.finish", f"pipeline:{run_id}")] == 1
    assert actions[("deployment.canary.start", DEPLOYMENT)] == 1
    assert actions[("deployment.canary.promote", DEPLOYMENT)] == 1
    assert kinds["deployment.canary.rollback"] == 0
    assert actions[("model.promote", "adult-mlp@v2")] == 1
