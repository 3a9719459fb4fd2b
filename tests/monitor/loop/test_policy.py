"""Monitoring policies: validated against what exists, compiled into a pipeline and an
alert trigger; bad ones are one sentence and record nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select

from forgeml.core.errors import ConfigError, ForgemlError, NotFoundError
from forgeml.core.store import AuditEvent, PipelineTriggerRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.loop import apply_policy, list_policies, loop_timeline, remove_policy
from forgeml.pipelines import load_pipeline
from forgeml.serve import deployments
from tests.monitor.loop.conftest import DEPLOYMENT, POLICY
from tests.serve.test_deployments import kill_servers


def _counts(workspace: Workspace) -> dict[str, int]:
    with workspace.store.session() as session:
        return {
            table.__tablename__: session.scalar(select(func.count()).select_from(table)) or 0
            for table in (AuditEvent, PipelineTriggerRecord)
        }


@pytest.fixture(scope="module")
def deployed(champion: Workspace) -> Workspace:
    """The champion's workspace with DEPLOYMENT recorded (its replica is stopped again)."""
    deployments.deploy(champion, DEPLOYMENT, "adult-mlp@production", ready_timeout=120)
    kill_servers(DEPLOYMENT)
    return champion


@pytest.mark.slow
def test_applying_a_policy_writes_its_pipeline_and_alert_trigger(
    deployed: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "prepare.yaml").write_text(
        "name: prep\nsteps:\n  - {name: fresh, kind: command, argv: [echo, hi]}\n"
    )
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.replace("  data: adult\n", "  data: adult\n  prepare: prepare.yaml\n"))

    trigger = apply_policy(deployed, path)
    again = apply_policy(deployed, path)  # applied twice: replaced, not doubled

    assert trigger.name == "policy-adult" and again.name == "policy-adult"
    assert trigger.kind == "alert" and trigger.subject == "ForgemlDriftDetected{model=adult-loop}"
    pipeline = load_pipeline(trigger.file)
    assert pipeline.order == ["fresh", "retrain", "gate", "canary"]
    steps = yaml.safe_load(Path(trigger.file).read_text())["steps"]
    retrain, gate, canary = steps[1:]
    assert retrain["reproduce"] == "adult-mlp@production" and retrain["data"] == "adult"
    assert gate["challenger"] == "${steps.retrain.model}" and gate["slices"] == {"sex": 0.5}
    assert canary["model"] == "${steps.gate.challenger}" and canary["alias"] == "production"
    assert canary["weight"] == 50 and canary["deployment"] == DEPLOYMENT
    assert [p.name for p in list_policies(deployed)] == ["policy-adult"]
    assert loop_timeline(deployed, "adult") == []
    remove_policy(deployed, "adult")
    assert list_policies(deployed) == []


@pytest.mark.parametrize(
    ("change", "error", "expected"),
    [
        (("deployment: adult-loop", "deployment: nosuch"), NotFoundError, "nosuch"),
        (("model: adult-mlp@production", "model: adult-mlp@nobody"), NotFoundError, "nobody"),
        (("metric: accuracy", "metric: bleu"), ConfigError, "gate.metric 'bleu' is not a metric"),
        (("{sex: 0.5}", "{planet: 0.5}"), ConfigError, "gate.slices names planet"),
        (("on_alerts:", "on_alert:"), ConfigError, "on_alert"),
        (("model: adult-mlp@production", "model: adult-mlp"), ConfigError, "model"),
        (("weight: 50", "weight: 500"), ConfigError, "canary.weight"),
        (("[ForgemlDriftDetected]", "['Drift Detected']"), ConfigError, "does not name alert"),
    ],
)
@pytest.mark.slow
def test_a_bad_policy_is_one_sentence_and_changes_nothing(
    deployed: Workspace,
    tmp_path: Path,
    change: tuple[str, str],
    error: type[ForgemlError],
    expected: str,
) -> None:
    path = tmp_path / "policy.yaml"
    assert change[0] in POLICY
    path.write_text(POLICY.replace(*change))
    before = _counts(deployed)

    with pytest.raises(error, match=expected) as raised:
        apply_policy(deployed, path)

    assert "\n" not in str(raised.value)
    assert _counts(deployed) == before
    assert not list(tmp_path.glob(".*.yaml"))
