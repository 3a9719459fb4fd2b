from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.errors import GateRejectedError, UsageError
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.tracking import (
    FairnessBounds,
    PromotionRejectedError,
    fairness_check,
    get_model_version,
    promote,
)
from tests.train.conftest import copy_home, trained_adult_template

MODEL = "adult-mlp@v1"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the trained Adult workspace: adult-mlp@v1 records fairness/sex and race."""
    return copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("gate") / "home"
    )


@pytest.fixture
def workspace(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    opened = Workspace(Settings(home=home, user="tester"))
    yield opened
    opened.close()


def _largest(workspace: Workspace, measure: str) -> float:
    """The candidate's largest `measure` over its sensitive columns (sex, race)."""
    metrics = get_model_version(workspace, MODEL).metrics
    return max(metrics[f"fairness/{column}/{measure}"] for column in ("sex", "race"))


def _promotions(workspace: Workspace) -> list[AuditEvent]:
    with workspace.store.session() as session:
        query = select(AuditEvent).where(AuditEvent.action.startswith("model.promote"))
        return list(session.scalars(query.order_by(AuditEvent.seq)))


def test_the_gate_passes_just_above_and_rejects_just_below_the_measured_value(
    workspace: Workspace,
) -> None:
    dp, eo = _largest(workspace, "dp_diff"), _largest(workspace, "eo_diff")
    assert 0 < dp < 1 and 0 < eo < 1
    with pytest.raises(PromotionRejectedError, match=r"its dp_diff across \w+ is"):
        promote(workspace, "adult-mlp", 1, "fair-dp", "accuracy",
                fairness=FairnessBounds(max_dp_diff=dp - 1e-6))  # fmt: skip
    with pytest.raises(PromotionRejectedError, match=r"its eo_diff across \w+ is"):
        promote(workspace, "adult-mlp", 1, "fair-eo", "accuracy",
                fairness=FairnessBounds(max_dp_diff=dp + 1e-6, max_eo_diff=eo - 1e-6))  # fmt: skip
    within = FairnessBounds(max_dp_diff=dp + 1e-6, max_eo_diff=eo + 1e-6)
    done = promote(workspace, "adult-mlp", 1, "fair-both", "accuracy", fairness=within)
    assert done.changed and done.fairness is not None and done.fairness["passed"]
    audited = _promotions(workspace)[-1]
    assert audited.object_ref == MODEL
    assert audited.payload["fairness"]["passed"] is True
    assert audited.payload["fairness"]["max_dp_diff"] == pytest.approx(dp + 1e-6)
    assert set(audited.payload["fairness"]["values"]) == {"race", "sex"}


def test_a_forced_promotion_past_the_bound_is_audited_with_the_failed_verdict(
    workspace: Workspace,
) -> None:
    bound = _largest(workspace, "dp_diff") / 2
    done = promote(workspace, "adult-mlp", 1, "forced-fair", "accuracy", force=True,
                   fairness=FairnessBounds(max_dp_diff=bound))  # fmt: skip
    assert done.forced
    event = _promotions(workspace)[-1]
    assert event.action == "model.promote.forced"
    assert event.payload["fairness"]["passed"] is False
    assert "breaks a fairness bound" in event.payload["overridden"]


def test_a_version_without_fairness_metrics_names_no_slices() -> None:
    verdict = fairness_check("plain@v1", {"accuracy": 0.8, "accuracy/sex=Male": 0.8},
                             FairnessBounds(max_dp_diff=0.5))  # fmt: skip
    assert not verdict.passed
    assert verdict.rejection is not None and "names no slices" in verdict.rejection


@pytest.mark.parametrize("bound", [-0.1, 1.5, float("nan")])
def test_a_bound_outside_zero_to_one_is_a_usage_error(bound: float) -> None:
    with pytest.raises(UsageError, match="must be a number between 0 and 1"):
        FairnessBounds(max_eo_diff=bound)


def test_models_promote_takes_the_bounds_and_exits_with_the_rejection_code(
    home: Path, cli: Any, monkeypatch: pytest.MonkeyPatch, workspace: Workspace
) -> None:
    monkeypatch.setenv("FORGEML_HOME", str(home))
    dp = _largest(workspace, "dp_diff")
    refused = cli("models", "promote", "adult-mlp", "1", "--alias", "cli-fair",
                  "--max-dp-diff", str(round(dp / 2, 6)))  # fmt: skip
    assert refused.code == PromotionRejectedError.exit_code
    assert refused.stderr.count("\n") == 1 and "breaks a fairness bound" in refused.stderr
    passed = cli("models", "promote", "adult-mlp", "1", "--alias", "cli-fair",
                 "--max-dp-diff", str(round(dp + 1e-4, 6)), "--json")  # fmt: skip
    assert passed.code == 0, passed.stderr
    assert json.loads(passed.stdout)["fairness"]["passed"] is True
    bad = cli("models", "promote", "adult-mlp", "1", "--max-eo-diff", "2")
    assert bad.code == 2
    assert "--max-eo-diff must be a number between 0 and 1, not 2.0." in bad.stderr


def test_the_api_promote_body_takes_the_bounds(home: Path, workspace: Workspace) -> None:
    from tests.api.conftest import api_client

    api = api_client(workspace)
    url = "/api/v1/models/adult-mlp/promote"
    dp = _largest(workspace, "dp_diff")
    refused = api.post(url, json={"version": 1, "alias": "api-fair", "max_dp_diff": dp / 2})
    assert refused.status_code == 409
    assert "breaks a fairness bound" in refused.json()["error"]
    out_of_range = api.post(url, json={"version": 1, "max_eo_diff": 1.5})
    assert out_of_range.status_code == 422
    assert out_of_range.json()["error"].startswith("body.max_eo_diff:")
    passed = api.post(url, json={"version": 1, "alias": "api-fair", "max_dp_diff": dp + 1e-4})
    assert passed.status_code == 200, passed.text
    assert passed.json()["fairness"]["passed"] is True


def _policy_gate(workspace: Workspace, **bounds: float) -> Any:
    """The gate step a monitoring policy with these gate bounds compiles into."""
    from forgeml.monitor.loop._policy import compile_policy, parse_policy
    from forgeml.pipelines.steps import GateStep

    policy = parse_policy(
        {
            "name": "fair",
            "deployment": "adult",
            "model": "adult-mlp@nobody",
            "retrain": {"data": "adult"},
            "gate": {"split": "validation", **bounds},
        },
        "policy.yaml",
    )
    compiled = compile_policy(policy, workspace.settings.home)
    (gate,) = [step for step in compiled["steps"] if step["name"] == "gate"]
    return GateStep.model_validate(gate | {"challenger": MODEL})


def test_the_policy_gate_uses_the_same_fairness_check(workspace: Workspace) -> None:
    from forgeml.pipelines.release import run_gate

    eo = _largest(workspace, "eo_diff")
    with pytest.raises(GateRejectedError, match=r"Gate 'gate': Model adult-mlp@v1 breaks"):
        run_gate(workspace, _policy_gate(workspace, max_eo_diff=eo - 1e-6))
    outputs = run_gate(workspace, _policy_gate(workspace, max_eo_diff=eo + 1e-6))
    assert outputs["passed"] and outputs["fairness"]["passed"]
    assert outputs["fairness"]["values"]["sex"]["eo_diff"] == pytest.approx(
        get_model_version(workspace, MODEL).metrics["fairness/sex/eo_diff"]
    )


def test_a_policy_gate_bound_outside_zero_to_one_names_the_key() -> None:
    from forgeml.core.errors import ConfigError
    from forgeml.monitor.loop._policy import parse_policy

    with pytest.raises(ConfigError, match=r"gate\.max_dp_diff"):
        parse_policy(
            {"name": "fair", "deployment": "adult", "model": "adult-mlp@production",
             "retrain": {"data": "adult"}, "gate": {"max_dp_diff": 3}},
            "policy.yaml",
        )  # fmt: skip
