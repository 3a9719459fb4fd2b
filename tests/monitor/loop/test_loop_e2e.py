"""The closed loop end to end with a real `forgeml server`: an alert fires, the champion
is retrained on the newest data, gated, run as a canary under live traffic and promoted;
the server is killed with SIGKILL while the retraining runs and again during the canary,
and no step is lost or repeated."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from forgeml.core.store import JobRecord, PipelineRunRecord, PipelineStepRunRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import parse_message, receive
from forgeml.monitor.loop import apply_policy, loop_timeline
from forgeml.pipelines.triggers import list_firings
from forgeml.serve import deployments
from forgeml.tracking import get_model_version
from tests._wait import wait_until
from tests.monitor.loop.conftest import DEPLOYMENT, POLICY, champion_home
from tests.serve.test_deployments import adult_records, kill_servers


def _server(home: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORGEML_DB_URL", "FORGEML_ARTIFACTS_URL", "MLFLOW_TRACKING_URI")
    }
    env |= {"FORGEML_HOME": str(home), "FORGEML_USER": "tester"}
    forgeml = str(Path(sys.executable).with_name("forgeml"))
    with log.open("ab") as sink:
        return subprocess.Popen(
            [forgeml, "server", "--interval", "0.2"], env=env, stdout=sink, stderr=subprocess.STDOUT
        )


def _step_state(workspace: Workspace, name: str) -> str | None:
    with workspace.store.session() as session:
        return session.scalar(
            select(PipelineStepRunRecord.state)
            .join(PipelineRunRecord, PipelineRunRecord.id == PipelineStepRunRecord.run_id)
            .where(PipelineRunRecord.name == "policy-adult", PipelineStepRunRecord.name == name)
        )


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


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_alert_to_promoted_challenger_survives_kill_9_of_the_server(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = tmp_path / "home"
    workspace = champion_home(home, tmp_path_factory)
    log = tmp_path / "server.log"
    server = None
    traffic = None
    try:
        deployments.deploy(workspace, DEPLOYMENT, "adult-mlp@production", ready_timeout=120)
        (tmp_path / "policy.yaml").write_text(POLICY)
        apply_policy(workspace, tmp_path / "policy.yaml")
        traffic = Traffic(workspace)
        server = _server(home, log)
        alert = {
            "status": "firing",
            "labels": {"alertname": "ForgemlDriftDetected", "model": DEPLOYMENT},
            "annotations": {"summary": "age and hours-per-week drifted"},
            "startsAt": "2026-12-03T12:00:00Z",
        }
        receive(
            workspace,
            parse_message(
                {"version": "4", "status": "firing", "receiver": "forgeml", "alerts": [alert]}
            ),
        )

        for stage in ("retrain", "canary"):  # SIGKILL the server while each stage runs
            wait_until(lambda s=stage: _step_state(workspace, s) == "RUNNING", 240, stage, 0.1)
            server.kill()
            server.wait(30)
            server = _server(home, log)
        wait_until(
            lambda: _step_state(workspace, "canary") in ("SUCCEEDED", "FAILED"),
            240,
            "the canary's end",
            0.2,
        )
    finally:
        if traffic is not None:
            traffic.close()
        if server is not None:
            server.terminate()
            server.wait(30)
        kill_servers(DEPLOYMENT)

    assert _step_state(workspace, "canary") == "SUCCEEDED", log.read_text()[-3000:]
    assert get_model_version(workspace, "adult-mlp@production").ref == "adult-mlp@v2"
    found = deployments.get_deployment(workspace, DEPLOYMENT)
    assert found.spec.model == "adult-mlp@v2" and found.spec.canary is None
    assert len(list_firings(workspace, "policy-adult")) == 1
    with workspace.store.session() as session:
        names = list(
            session.scalars(select(JobRecord.name).where(JobRecord.name.startswith("policy-adult")))
        )
        runs = session.scalars(
            select(PipelineRunRecord).where(PipelineRunRecord.name == "policy-adult")
        ).all()
    assert sorted(n for n in names if "@" not in n) == [
        "policy-adult.canary",
        "policy-adult.gate",
        "policy-adult.retrain",
    ]
    assert len([n for n in names if "@" in n]) == 1 and len(runs) == 1
    whats = [event.what for event in loop_timeline(workspace, "adult")]
    assert whats[0] == "alert ForgemlDriftDetected fired"
    for done in ("retrain succeeded", "gate succeeded", "canary succeeded"):
        assert done in whats
    assert traffic.answered > 0
