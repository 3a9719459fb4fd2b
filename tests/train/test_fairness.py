from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fairlearn.metrics import (
    MetricFrame,
    demographic_parity_difference,
    demographic_parity_ratio,
    equalized_odds_difference,
    equalized_odds_ratio,
    selection_rate,
    true_positive_rate,
)

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.train.evaluate import FAIRNESS_GROUPS, evaluate
from forgeml.train.fairness import FAIRNESS_ARTIFACT, MEASURES, fairness_report
from forgeml.train.models.mlp import TabularMLP
from forgeml.train.task import SplitData
from tests.train.conftest import copy_home, trained_adult_template

SLICES = ("sex", "race")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A copy of the trained Adult workspace (adult-mlp@v1 names slices sex and race)."""
    home = copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("fair") / "home"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        yield workspace
        workspace.close()


def _validation_predictions(workspace: Workspace) -> tuple[np.ndarray, np.ndarray, SplitData]:
    """adult-mlp@v1's labels and predictions on its validation split, computed here."""
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.config import TrainConfig
    from forgeml.train.data import load_task_data
    from forgeml.train.recipe import load_bundle_model

    record = get_model_version(workspace, "adult-mlp@v1")
    config = TrainConfig.model_validate(record.run.config)
    task = load_task_data(workspace, config)
    assert task.eval is not None
    bundle = download_bundle(workspace, record, workspace.settings.home / "check-bundle")
    model = load_bundle_model(bundle)
    with torch.inference_mode():
        predicted = model(**task.eval.inputs).argmax(dim=1).numpy()
    return task.eval.targets.numpy(), predicted, task.eval


def test_a_run_naming_slices_records_fairlearns_metrics(trained: Workspace) -> None:
    from forgeml.tracking import get_model_version

    record = get_model_version(trained, "adult-mlp@v1")
    y_true, y_pred, split = _validation_predictions(trained)
    for column in SLICES:
        groups = split.slices[column]
        expected = {
            "dp_diff": demographic_parity_difference(y_true, y_pred, sensitive_features=groups),
            "dp_ratio": demographic_parity_ratio(y_true, y_pred, sensitive_features=groups),
            "eo_diff": equalized_odds_difference(y_true, y_pred, sensitive_features=groups),
            "eo_ratio": equalized_odds_ratio(y_true, y_pred, sensitive_features=groups),
        }
        for measure, value in expected.items():
            stored = record.metrics[f"fairness/{column}/{measure}"]
            assert stored == pytest.approx(value, abs=1e-9), (column, measure)
            assert f"test_fairness/{column}/{measure}" in record.metrics
    # the run's final metrics are the model version's
    assert record.run.metrics["fairness/sex/dp_diff"] == record.metrics["fairness/sex/dp_diff"]


def test_the_run_keeps_the_per_group_table_as_fairness_json(trained: Workspace) -> None:
    from forgeml.tracking import get_model_version, open_client

    record = get_model_version(trained, "adult-mlp@v1")
    local = open_client(trained).download_artifacts(
        record.run_id, FAIRNESS_ARTIFACT, str(trained.settings.home / "fair-artifact")
    )
    table = json.loads(Path(local).read_text())
    y_true, y_pred, split = _validation_predictions(trained)
    frame = MetricFrame(
        metrics={"tpr": true_positive_rate, "selection_rate": selection_rate},
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=split.slices["sex"],
    )
    sex = table["validation"]["sex"]
    assert set(sex["groups"]) == {"Female", "Male"}
    for group in ("Female", "Male"):
        assert sex["groups"][group]["tpr"] == pytest.approx(frame.by_group.loc[group, "tpr"])
        assert sex["groups"][group]["selection_rate"] == pytest.approx(
            frame.by_group.loc[group, "selection_rate"]
        )
        assert sex["groups"][group]["count"] == split.slices["sex"].count(group)
    assert set(table) == {"validation", "test"}
    assert set(table["test"]) == set(SLICES)
    assert sex["dp_diff"] == pytest.approx(record.metrics["fairness/sex/dp_diff"])


def test_runs_show_prints_the_fairness_table(
    trained: Workspace, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.tracking import get_model_version

    monkeypatch.setenv("FORGEML_HOME", str(trained.settings.home))
    record = get_model_version(trained, "adult-mlp@v1")
    done = cli("runs", "show", record.run_id)
    assert done.code == 0, done.stderr
    assert "fairness" in done.stdout
    dp = record.metrics["fairness/race/dp_diff"]
    assert f"{dp:.4f}" in done.stdout
    shown = cli("runs", "show", record.run_id, "--json")
    assert json.loads(shown.stdout)["metrics"]["fairness/sex/eo_diff"] == pytest.approx(
        record.metrics["fairness/sex/eo_diff"]
    )


FAIRLEARN_SUMMARIES = {
    "dp_diff": demographic_parity_difference,
    "dp_ratio": demographic_parity_ratio,
    "eo_diff": equalized_odds_difference,
    "eo_ratio": equalized_odds_ratio,
}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fairness_report_matches_fairlearn_on_every_measure(seed: int) -> None:
    rng = np.random.default_rng(seed)
    groups = rng.choice(["a", "b", "c", "d"], 500, p=[0.5, 0.3, 0.15, 0.05]).tolist()
    y_true = rng.integers(0, 2, 500)
    y_pred = (rng.random(500) < np.where(np.array(groups) == "a", 0.7, 0.3)).astype(int)
    report = fairness_report(y_true, y_pred, {"g": groups, "h": groups[::-1]})
    assert set(report.metrics) == {f"fairness/{c}/{m}" for c in "gh" for m in MEASURES}
    for measure, function in FAIRLEARN_SUMMARIES.items():
        for column, values in (("g", groups), ("h", groups[::-1])):
            expected = function(y_true, y_pred, sensitive_features=values)
            assert report.metrics[f"fairness/{column}/{measure}"] == pytest.approx(expected)
    a = np.array(groups) == "a"
    assert report.groups["g"]["a"]["accuracy"] == pytest.approx(np.mean(y_true[a] == y_pred[a]))
    assert report.groups["g"]["a"]["fpr"] == pytest.approx(np.mean(y_pred[a & (y_true == 0)] == 1))


def test_multiclass_targets_get_no_fairness_metrics_and_say_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    torch.manual_seed(0)
    model = TabularMLP(4, 3, hidden=())
    split = SplitData(
        {"features": torch.randn(30, 4)},
        torch.randint(0, 3, (30,)),
        slices={"g": ["x", "y", "z"] * 10},
    )
    with caplog.at_level(logging.INFO, logger="forgeml.train.evaluate"):
        metrics = evaluate(model, split, "classification", 8, ["a", "b", "c"])
    assert "accuracy/g=x" in metrics
    assert not [name for name in metrics if name.startswith("fairness/")]
    assert FAIRNESS_GROUPS not in metrics
    assert "need a binary target" in caplog.text


def test_a_binary_split_without_slices_has_no_fairness_metrics() -> None:
    torch.manual_seed(0)
    split = SplitData({"features": torch.randn(20, 4)}, torch.randint(0, 2, (20,)))
    metrics = evaluate(TabularMLP(4, 2, hidden=()), split, "classification", 8, ["n", "y"])
    assert not [name for name in metrics if "fairness" in name]
    assert not math.isnan(float(metrics["accuracy"]))  # type: ignore[arg-type]
