"""The release kinds: gate on the same rows, promote, and a canary judged on live measures."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.errors import CanaryRolledBackError, GateRejectedError
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.pipelines.canary import Measures, judge, parse_measures
from forgeml.pipelines.release import run_canary, run_gate, run_promote
from forgeml.pipelines.steps import CanaryBounds, CanaryStep, GateStep, PromoteStep
from forgeml.serve import deployments
from forgeml.tracking import get_model_version, promote
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.pipelines.conftest import write_pipeline
from tests.serve.test_deployments import adult_records, kill_servers
from tests.train.conftest import ADULT_CONFIG, copy_home, trained_adult_template

Cli = Callable[..., CliResult]


def _measures(requests: float, errors: float = 0.0, latency_s: float = 0.01) -> Measures:
    """`requests` answered in `latency_s` each, as a histogram with Prometheus' buckets."""
    bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, math.inf]
    return Measures(requests, errors, {b: requests if latency_s <= b else 0.0 for b in bounds})


@pytest.mark.parametrize(
    ("canary", "final", "bounds", "action", "reason"),
    [
        (_measures(5), False, CanaryBounds(), None, "waiting for traffic"),
        (_measures(5), True, CanaryBounds(), "rollback", "fewer than the 20"),
        (_measures(100, 2), False, CanaryBounds(), "rollback", "error rate 2.0% is above 1.0%"),
        (_measures(100, 1), False, CanaryBounds(), None, "within bounds so far"),
        (_measures(100, 1), True, CanaryBounds(), "promote", "100 requests within bounds"),
        (_measures(100, latency_s=0.2), False, CanaryBounds(max_p99_ms=100), "rollback", "p99"),
        (_measures(100, latency_s=0.2), True, CanaryBounds(max_p99_ratio=2.0), "rollback", "x the"),
        (_measures(100, latency_s=0.01), True, CanaryBounds(max_p99_ratio=2.0), "promote", ""),
    ],
)
def test_judge(
    canary: Measures, final: bool, bounds: CanaryBounds, action: str | None, reason: str
) -> None:
    verdict = judge(bounds, _measures(100, latency_s=0.01), canary, 20, final)

    assert verdict.action == action
    assert reason in verdict.reason


def test_measures_read_from_prometheus_text_match_histogram_quantile() -> None:
    registry = CollectorRegistry()
    requests = Counter("forgeml_requests", "", ["model", "protocol"], registry=registry)
    errors = Counter(
        "forgeml_request_errors", "", ["model", "protocol", "status"], registry=registry
    )
    latency = Histogram("forgeml_request_latency_seconds", "", ["model"], registry=registry)
    for index in range(100):
        requests.labels("m", "v2").inc()
        latency.labels("m").observe(0.02 if index < 98 else 0.4)
    errors.labels("m", "v2", "503").inc(3)
    errors.labels("m", "v2", "400").inc(5)  # a client's error is not the model's

    measures = parse_measures(generate_latest(registry).decode())

    assert (measures.requests, measures.errors) == (100, 3)
    # 99th of 100 observations falls in (0.25, 0.5]: 0.25 + 0.25 * (99 - 98) / (100 - 98)
    assert measures.p99_ms() == pytest.approx(375.0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("release") / "home"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            yield workspace
        finally:
            kill_servers(CANARY)
            workspace.close()


def _gate(**fields: object) -> GateStep:
    return GateStep.model_validate({"name": "gate", "kind": "gate"} | fields)


@pytest.mark.slow
def test_the_gate_scores_both_models_on_the_same_rows(trained: Workspace) -> None:
    good, poor = "adult-mlp@v1", "adult-mlp@v2"  # 30 steps at lr 0.01; 5 steps at lr 1e-5

    passed = run_gate(trained, _gate(challenger=good, champion=poor, slices={"sex": 1.0}))
    with pytest.raises(GateRejectedError, match=r"adult-mlp@v2 accuracy .* does not beat"):
        run_gate(trained, _gate(challenger=poor, champion=good))
    with pytest.raises(GateRejectedError, match=r"by 0\.5"):
        run_gate(trained, _gate(challenger=good, champion=poor, margin=0.5))
    first = run_gate(trained, _gate(challenger=good, champion="adult-mlp@nobody"))

    assert passed["challenger"] == good and passed["champion"] == poor
    assert passed["challenger_value"] > passed["champion_value"]
    # both on the test split of the data v1 was trained on: v1's own recorded test metric
    recorded = get_model_version(trained, good).run.metrics["test_accuracy"]
    assert passed["challenger_value"] == pytest.approx(recorded, abs=1e-6)
    assert first["champion"] == "" and first["champion_value"] is None


@pytest.mark.slow
def test_the_gate_refuses_a_widening_slice_gap(trained: Workspace) -> None:
    from forgeml.optimize import score_on_split

    def scored(ref: str) -> dict[str, float]:
        return score_on_split(trained, ref, None, "test", ["sex"])

    def gap(ref: str) -> float:
        return abs(scored(ref)["accuracy/sex=Male"] - scored(ref)["accuracy/sex=Female"])

    wider, narrower = sorted(["adult-mlp@v1", "adult-mlp@v2"], key=gap, reverse=True)
    widening = gap(wider) - gap(narrower)
    # the overall comparison lets the wider one through; only its slice gap can stop it
    mode = "max" if scored(wider)["accuracy"] >= scored(narrower)["accuracy"] else "min"

    with pytest.raises(GateRejectedError, match="gap across sex widens"):
        run_gate(
            trained,
            _gate(challenger=wider, champion=narrower, mode=mode, slices={"sex": widening / 2}),
        )
    assert run_gate(
        trained, _gate(challenger=wider, champion=narrower, mode=mode, slices={"sex": widening * 2})
    )["passed"]


@pytest.mark.slow
def test_a_promotion_after_a_gate_audits_the_gates_metric_mode_and_verdict(
    trained: Workspace,
) -> None:
    good, poor = "adult-mlp@v1", "adult-mlp@v2"
    gate = _gate(challenger=good, champion=poor, metric="loss", mode="min", margin=0.001)
    verdict = run_gate(trained, gate)["verdict"]
    step = {"name": "promote", "kind": "promote", "model": good, "alias": "gated"}

    run_promote(trained, PromoteStep.model_validate(step | {"gate": verdict}))

    with trained.store.session() as session:
        latest = select(AuditEvent).where(AuditEvent.action == "model.promote")
        event = session.scalars(latest.order_by(AuditEvent.seq.desc())).first()
        assert event is not None
        target, payload = event.object_ref, event.payload
    assert target == good and payload["alias"] == "gated"
    assert (payload["metric"], payload["mode"]) == ("loss", "min")
    audited = payload["gate"]["verdict"]
    assert audited["gate"] == "gate" and audited["margin"] == 0.001
    assert audited["champion"] == poor
    assert audited["challenger_value"] < audited["champion_value"]


CANARY = "canary-adult"


def _traffic(deployment: str, workspace: Workspace, clock: list[float]) -> Callable[[float], None]:
    """A `sleep` for the canary job: instead of waiting, 10 requests to every replica."""

    def sleep(seconds: float) -> None:
        found = deployments.get_deployment(workspace, deployment)
        for replica in found.replicas:
            for _ in range(10):
                response = httpx.post(
                    f"{replica.url}/v1/models/{deployment}:predict",
                    json={"instances": adult_records(2)},
                    timeout=10,
                )
                assert response.status_code == 200, response.text
        clock[0] += seconds

    return sleep


def _canary(**fields: object) -> CanaryStep:
    base = {"name": "canary", "kind": "canary", "deployment": CANARY, "model": "adult-mlp@v2"}
    return CanaryStep.model_validate(base | {"seconds": 4, "poll_seconds": 1} | fields)


def _actions(workspace: Workspace) -> list[str]:
    with workspace.store.session() as session:
        events = session.scalars(select(AuditEvent).order_by(AuditEvent.seq))
        return [e.action for e in events if e.action.startswith(("deployment.canary", "model."))]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_canary_that_breaks_a_bound_is_rolled_back_and_a_clean_one_promoted(
    trained: Workspace,
) -> None:
    promote(trained, "adult-mlp", 1, "production", "accuracy", force=True)
    deployments.deploy(trained, CANARY, "adult-mlp@production", ready_timeout=120)
    clock = [0.0]
    sleep = _traffic(CANARY, trained, clock)
    before = len(_actions(trained))

    with pytest.raises(CanaryRolledBackError, match=r"rolled back: the canary's p99 .* above"):
        run_canary(trained, _canary(bounds={"max_p99_ms": 0.001}), lambda: clock[0], sleep)
    rolled = deployments.get_deployment(trained, CANARY)
    kept = get_model_version(trained, "adult-mlp@production").ref
    outputs = run_canary(trained, _canary(), lambda: clock[0], sleep)
    promoted = deployments.get_deployment(trained, CANARY)

    assert rolled.spec.canary is None and rolled.spec.model == "adult-mlp@v1"
    assert [r.role for r in rolled.replicas] == ["primary"] and kept == "adult-mlp@v1"
    assert outputs["decision"] == "promoted" and outputs["model"] == "adult-mlp@v2"
    assert outputs["measures"]["canary"]["requests"] >= 20
    assert get_model_version(trained, "adult-mlp@production").ref == "adult-mlp@v2"
    assert promoted.spec.canary is None and promoted.spec.model == "adult-mlp@v2"
    assert _actions(trained)[before:] == [
        "deployment.canary.start",
        "deployment.canary.rollback",
        "deployment.canary.start",
        "model.promote",
        "deployment.canary.promote",
    ]


# train, gate against @production, promote: the first run promotes (no champion yet), a
# worse second run is stopped by the gate and production stays where it was
PIPELINE = f"""
name: release
params:
  lr: 0.01
  steps: 30
steps:
  - name: train
    kind: train
    config: {ADULT_CONFIG}
    overrides: [epochs=null, "max_steps=${{params.steps}}", "optimizer.lr=${{params.lr}}",
                schedule.warmup_steps=0, early_stopping=null]
  - name: gate
    kind: gate
    challenger: ${{steps.train.model}}
    champion: adult-mlp@production
  - name: promote
    kind: promote
    model: ${{steps.gate.challenger}}
"""


@pytest.mark.slow
def test_a_pipeline_promotes_only_what_passes_its_gate(adult_cli: Cli, tmp_path: Path) -> None:
    cli = adult_cli
    path = write_pipeline(tmp_path, PIPELINE)

    first = json_out(cli("pipelines", "run", str(path), "--json"))
    second = cli(
        "pipelines",
        "run",
        str(path),
        "--set",
        "params.lr=1e-6",
        "--set",
        "params.steps=3",
        "--json",
    )
    shown = json_out(cli("models", "show", "adult-mlp@production", "--json"))
    events = json_out(cli("audit", "log", "--json"))

    assert [s["state"] for s in first["steps"]] == ["SUCCEEDED"] * 3
    [promoted] = [e["payload"] for e in events if e["action"] == "model.promote"]
    # the promote step took the gate's verdict from `model: ${steps.gate.challenger}`
    assert promoted["metric"] == "accuracy" and promoted["gate"]["verdict"]["gate"] == "gate"
    assert second.code == 1
    states = {
        s["name"]: s["state"]
        for s in json_out(cli("pipelines", "show", "release", "--json"))["steps"]
    }
    assert states == {"train": "SUCCEEDED", "gate": "FAILED", "promote": "SKIPPED"}
    assert shown["version"] == int(first["steps"][0]["outputs"]["model"].rsplit("@v", 1)[1])


@pytest.mark.parametrize(
    ("accuracy", "action", "reason"),
    [
        (((100, 0.85), (100, 0.80)), "rollback", "5.0% under the primary's 85.0%"),
        (((100, 0.85), (100, 0.83)), "promote", "within bounds"),
        (((100, 0.85), (10, 0.10)), "promote", "within bounds"),  # too few labels to judge
        (None, "promote", "within bounds"),
    ],
)
def test_judge_compares_accuracy_on_feedback(
    accuracy: tuple[tuple[int, float], tuple[int, float]] | None, action: str, reason: str
) -> None:
    bounds = CanaryBounds(max_accuracy_drop=0.03, min_feedback=20)

    verdict = judge(bounds, _measures(100), _measures(100), 20, True, accuracy)

    assert verdict.action == action
    assert reason in verdict.reason


def test_feedback_accuracy_is_per_version_since_the_canary_began(workspace: Workspace) -> None:
    from datetime import UTC, datetime

    from forgeml.pipelines.canary import feedback_accuracy
    from forgeml.serve.feedback import FeedbackRow, record_feedback

    began = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

    def row(n: int, ref: str, answer: str, label: str, at: float) -> FeedbackRow:
        return FeedbackRow(f"r{n}", 0, "adult", ref, at, {}, {"label": answer}, label)

    after, before = began.timestamp() + 5, began.timestamp() - 5
    rows = [row(i, "adult-mlp@v1", ">50K", ">50K", after) for i in range(3)]
    rows += [row(3, "adult-mlp@v1", ">50K", "<=50K", after)]
    rows += [row(4, "adult-mlp@v2", "<=50K", "<=50K", after)]
    rows += [row(5, "adult-mlp@v2", "<=50K", ">50K", before)]  # before the canary: not counted
    record_feedback(workspace, rows, "test")

    found = feedback_accuracy(workspace, "adult", began)

    assert found == {"adult-mlp@v1": (4, 0.75), "adult-mlp@v2": (1, 1.0)}
