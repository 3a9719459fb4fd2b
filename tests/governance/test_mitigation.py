from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import InvalidDataError, MissingColumnError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.governance.fairness import MitigateRequest, MitigateResult, mitigate
from forgeml.tracking import get_model_version
from forgeml.train.thresholds import THRESHOLDS_FILE, load_thresholds
from tests.serve.conftest import adult_records
from tests.train.conftest import copy_home, trained_adult_template

SOURCE = "adult-mlp@v1"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the trained Adult workspace (adult-mlp@v1: a binary MLP on Adult)."""
    return copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("mitigate") / "home"
    )


@pytest.fixture(scope="module")
def workspace(home: Path) -> Iterator[Workspace]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        opened = Workspace(Settings(home=home, user="tester"))
        yield opened
        opened.close()


@pytest.fixture(scope="module")
def mitigated(workspace: Workspace) -> MitigateResult:
    """adult-mlp@v1 with demographic-parity thresholds across sex, fitted on validation."""
    return mitigate(workspace, SOURCE, MitigateRequest("sex", "demographic_parity"))


def test_mitigation_registers_a_child_version_whose_dp_diff_drops(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    source = get_model_version(workspace, SOURCE)
    model = mitigated.model
    assert model.name == "adult-mlp" and model.parent == SOURCE
    before = source.metrics["test_fairness/sex/dp_diff"]
    after = model.metrics["test_fairness/sex/dp_diff"]
    assert before > 0.05  # the unmitigated model favours one group
    assert after < before / 2
    # the report's "before" is the source model's own recorded test figure
    report = mitigated.report
    assert report["before"]["test"]["sex"]["dp_diff"] == pytest.approx(before)
    assert report["after"]["test"]["sex"]["dp_diff"] == pytest.approx(after)
    assert model.metrics["test_accuracy"] > 0.7
    run_config = get_model_version(workspace, model.ref).run.config
    assert run_config["mitigate"]["constraint"] == "demographic_parity"


def test_the_saved_thresholds_reproduce_fairlearns_fitted_optimizer(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from fairlearn.postprocessing import ThresholdOptimizer

    from forgeml.governance.fairness import _positive_scores, _scores_estimator, _task_data
    from forgeml.tracking import download_bundle

    bundle = download_bundle(
        workspace, mitigated.model, workspace.settings.home / "mitigated-bundle"
    )
    assert (bundle / THRESHOLDS_FILE).is_file()
    assert not list(bundle.glob("*.pkl")) and not list(bundle.glob("*.pickle"))
    thresholds = load_thresholds(bundle)
    assert thresholds is not None and set(thresholds.groups) == {"Female", "Male"}
    task = _task_data(workspace, get_model_version(workspace, SOURCE), bundle, "sex")
    scores = _positive_scores(bundle, task)
    assert task.eval is not None and task.test is not None
    optimizer = ThresholdOptimizer(
        estimator=_scores_estimator(),
        constraints="demographic_parity",
        prefit=True,
        predict_method="predict_proba",
    )
    optimizer.fit(
        scores["validation"][:, None],
        task.eval.targets.numpy(),
        sensitive_features=task.eval.slices["sex"],
    )
    groups = task.test.slices["sex"]
    expected = optimizer._pmf_predict(scores["test"][:, None], sensitive_features=groups)[:, 1]
    found = thresholds.positive_probability(scores["test"], groups)
    np.testing.assert_allclose(found, expected, atol=1e-12)


def test_the_mitigated_version_serves_through_the_model_servers_loader(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from forgeml.serve.model import load_model
    from forgeml.tracking import download_bundle

    rows = adult_records(64)
    original = load_model(workspace, get_model_version(workspace, SOURCE), "torch", 1)
    served = load_model(workspace, mitigated.model, "torch", 1)
    answers = served.run_rows(rows, {"probabilities", "label"})
    plain = original.run_rows(rows, {"probabilities"})["probabilities"][:, 1]
    thresholds = load_thresholds(
        download_bundle(workspace, mitigated.model, workspace.settings.home / "serve-check")
    )
    assert thresholds is not None
    expected = thresholds.positive_probability(plain, [row["sex"] for row in rows])
    np.testing.assert_allclose(answers["probabilities"][:, 1], expected, atol=1e-6)
    assert set(answers["label"]) <= {"<=50K", ">50K"}
    certain = (expected == 0) | (expected == 1)
    assert certain.any()
    names = np.where(expected[certain] == 1, ">50K", "<=50K")
    assert list(answers["label"][certain]) == list(names)
    again = served.run_rows(rows, {"label"})["label"]
    assert list(again) == list(answers["label"])  # a row's draw is a function of the row
    unknown = dict(rows[0], sex="Unknown")
    with pytest.raises(InvalidDataError, match="a group the fairness thresholds were not"):
        served.row_encoder().check([unknown])


def test_equalized_odds_on_race_fitted_on_the_train_split(workspace: Workspace) -> None:
    result = mitigate(
        workspace,
        SOURCE,
        MitigateRequest("race", "equalized_odds", "balanced_accuracy_score", "train"),
    )
    source = get_model_version(workspace, SOURCE)
    assert result.model.parent == SOURCE
    assert set(result.report["after"]["test"]["race"]["groups"]) == set(
        result.report["before"]["test"]["race"]["groups"]
    )
    assert "test_fairness/race/eo_diff" in result.model.metrics
    assert result.report["before"]["test"]["race"]["eo_diff"] == pytest.approx(
        source.metrics["test_fairness/race/eo_diff"]
    )


@pytest.mark.parametrize(
    ("request_", "error", "sentence"),
    [
        (MitigateRequest("nosuch"), MissingColumnError, "names column 'nosuch'"),
        (MitigateRequest("Y"), UsageError, "Column 'Y' is not one of the input fields"),
        (MitigateRequest("sex", "parity"), UsageError, "Unknown constraint 'parity'"),
        (MitigateRequest("sex", objective="f1"), UsageError, "Unknown objective 'f1'"),
        (MitigateRequest("sex", fit_split="test"), UsageError, "--fit-split must be train"),
    ],
)
def test_a_bad_request_is_one_sentence(
    workspace: Workspace, request_: MitigateRequest, error: type[Exception], sentence: str
) -> None:
    with pytest.raises(error, match=sentence) as raised:
        mitigate(workspace, SOURCE, request_)
    assert str(raised.value).count(". ") == 0 or str(raised.value).endswith(".")


def test_a_non_binary_target_is_refused(workspace: Workspace, tmp_path: Path) -> None:
    from forgeml.tracking import download_bundle, finish_run, register_model, start_run

    source = get_model_version(workspace, SOURCE)
    bundle = download_bundle(workspace, source, tmp_path / "three")
    description = json.loads((bundle / "model.json").read_text())
    description.update(num_classes=3, class_names=["a", "b", "c"])
    (bundle / "model.json").write_text(json.dumps(description))
    handle = start_run(workspace, source.run.config, "adult-three", None)
    register_model(workspace, handle, "adult-three", bundle, metrics={})
    finish_run(handle, "FINISHED", {})
    with pytest.raises(UsageError, match=r"is not a binary classifier \(classification, 3"):
        mitigate(workspace, "adult-three@v1", MitigateRequest("sex"))


def test_models_mitigate_on_the_command_line(
    home: Path, cli: Any, monkeypatch: pytest.MonkeyPatch, mitigated: MitigateResult
) -> None:
    monkeypatch.setenv("FORGEML_HOME", str(home))
    done = cli("models", "mitigate", SOURCE, "--sensitive", "sex", "--json")
    assert done.code == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["parent"] == SOURCE
    assert (
        payload["metrics"]["test_fairness/sex/dp_diff"]
        < (payload["report"]["before"]["test"]["sex"]["dp_diff"])
    )
    shown = cli("models", "mitigate", SOURCE, "--sensitive", "sex")
    assert shown.code == 0 and "fairness across sex" in shown.stdout
    version = cli("models", "show", payload["model"])
    assert version.code == 0 and "fairness" in version.stdout
    dp = payload["metrics"]["test_fairness/sex/dp_diff"]
    assert f"{dp:.4f}" in version.stdout
    unknown = cli("models", "mitigate", SOURCE, "--sensitive", "nosuch")
    assert unknown.code == 1
    assert unknown.stderr.count("\n") == 1 and "names column 'nosuch'" in unknown.stderr
    bad = cli("models", "mitigate", SOURCE, "--sensitive", "sex", "--constraint", "parity")
    assert bad.code == 2 and "Unknown constraint 'parity'" in bad.stderr


def test_the_api_mitigates_as_the_command_does(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from forgeml.core.errors import MissingColumnError
    from tests.api.conftest import api_client

    api = api_client(workspace)
    url = f"/api/v1/models/{SOURCE}/mitigate"
    done = api.post(url, json={"sensitive": "sex", "constraint": "equalized_odds"})
    assert done.status_code == 200, done.text
    assert done.json()["parent"] == SOURCE
    assert "test_fairness/sex/eo_diff" in done.json()["metrics"]
    bad = api.post(url, json={"sensitive": "sex", "constraint": "parity"})
    assert bad.status_code == 422 and bad.json()["error"].startswith("body.constraint:")
    unknown = api.post(url, json={"sensitive": "nosuch"})
    assert unknown.status_code == MissingColumnError.http_status
    assert "names column 'nosuch'" in unknown.json()["error"]


def _served_decisions(
    workspace: Workspace, ref: str, split_name: str
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The model server's labels (as class ids) for the raw rows of `split_name` of the
    data `ref` was trained on, sent as a client sends them (its input fields), with the
    true class ids and each row's sex."""
    from forgeml.data.features import FeatureSpec
    from forgeml.optimize._inputs import split_of, training_config
    from forgeml.serve.model import load_model
    from forgeml.tracking import download_bundle
    from forgeml.train.data import load_task_data

    record = get_model_version(workspace, ref)
    task = load_task_data(workspace, training_config(workspace, record))
    split = split_of(task, split_name, ref)
    assert split.rows is not None
    bundle = download_bundle(
        workspace, record, workspace.settings.home / f"rows-{record.version}-{split_name}"
    )
    spec = FeatureSpec.from_dict(json.loads((bundle / "feature_spec.json").read_text()))
    rows = split.rows.select(spec.input_columns).to_dicts()
    served = load_model(workspace, record, "torch", 1)
    labels = np.concatenate(
        [
            served.run_rows(rows[at : at + 2048], {"label"})["label"]
            for at in range(0, len(rows), 2048)
        ]
    )
    predicted = np.array([task.class_names.index(str(label)) for label in labels])
    return predicted, split.targets.numpy(), [str(row["sex"]) for row in rows]


@pytest.mark.parametrize("split", ["validation", "test"])
def test_score_on_split_of_a_mitigated_version_scores_the_servers_decisions(
    workspace: Workspace, mitigated: MitigateResult, split: str
) -> None:
    from forgeml.optimize import score_on_split
    from forgeml.train.fairness import fairness_report

    ref = mitigated.model.ref
    found = score_on_split(workspace, ref, split=split, slices=["sex"])
    original = score_on_split(workspace, SOURCE, split=split, slices=["sex"])
    predicted, targets, groups = _served_decisions(workspace, ref, split)
    served = fairness_report(targets, predicted, {"sex": groups}).metrics
    assert found["accuracy"] == float(np.mean(predicted == targets))
    for measure in ("dp_diff", "eo_diff"):
        assert found[f"fairness/sex/{measure}"] == served[f"fairness/sex/{measure}"]
    assert found["fairness/sex/dp_diff"] < original["fairness/sex/dp_diff"] / 2
    assert "loss" not in found  # thresholded probabilities are 0 or 1 for many rows
    # what the version records (and the promotion gate and model card read) is this scoring
    prefix = "" if split == "validation" else "test_"
    recorded = get_model_version(workspace, ref).metrics
    for name in ("accuracy", "fairness/sex/dp_diff", "fairness/sex/eo_diff", "accuracy/sex=Male"):
        assert recorded[prefix + name] == pytest.approx(found[name], abs=1e-12)


def test_the_promotion_fairness_gate_judges_the_mitigated_decisions(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from forgeml.optimize import score_on_split
    from forgeml.tracking import FairnessBounds, fairness_check

    ref = mitigated.model.ref
    scored = score_on_split(workspace, ref, split="validation", slices=["sex"])
    original = get_model_version(workspace, SOURCE).metrics["fairness/sex/dp_diff"]
    bound = (scored["fairness/sex/dp_diff"] + original) / 2
    bounds = FairnessBounds(max_dp_diff=bound)
    verdict = fairness_check(ref, get_model_version(workspace, ref).metrics, bounds)
    assert verdict.passed
    assert verdict.values["sex"]["dp_diff"] == pytest.approx(scored["fairness/sex/dp_diff"])
    assert not fairness_check(SOURCE, get_model_version(workspace, SOURCE).metrics, bounds).passed


def test_models_compare_scores_a_mitigated_version_on_its_decisions(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from forgeml.optimize import profile_models, score_on_split

    rows = profile_models(workspace, [SOURCE, mitigated.model.ref], split="test", repeats=1)
    assert [row.metric for row in rows] == ["accuracy", "accuracy"]
    predicted, targets, _ = _served_decisions(workspace, mitigated.model.ref, "test")
    assert rows[1].value == float(np.mean(predicted == targets))
    assert rows[0].value == score_on_split(workspace, SOURCE, split="test")["accuracy"]
    assert rows[1].value != rows[0].value


def test_an_optimised_mitigated_version_stays_mitigated(
    workspace: Workspace, mitigated: MitigateResult
) -> None:
    from forgeml.optimize import OptimizeRequest, optimize_model, score_on_split
    from forgeml.serve.model import load_model
    from forgeml.tracking import download_bundle

    request = OptimizeRequest("onnx", latency_repeats=1, device="cpu")
    child = optimize_model(workspace, mitigated.model.ref, request).model
    assert child.parent == mitigated.model.ref
    home = workspace.settings.home
    parent_bundle = download_bundle(workspace, mitigated.model, home / "optimized-parent")
    bundle = download_bundle(workspace, child, home / "optimized-child")
    assert (bundle / "model.onnx").is_file()
    assert (bundle / THRESHOLDS_FILE).read_text() == (parent_bundle / THRESHOLDS_FILE).read_text()
    # scored on its thresholded decisions, as its parent (ONNX agrees with PyTorch to 1e-4)
    scored = score_on_split(workspace, child.ref, split="test", slices=["sex"])
    parent = score_on_split(workspace, mitigated.model.ref, split="test", slices=["sex"])
    assert child.metrics["test_accuracy"] == pytest.approx(scored["accuracy"], abs=1e-12)
    assert scored["accuracy"] == pytest.approx(parent["accuracy"], abs=1e-3)
    assert scored["fairness/sex/dp_diff"] == pytest.approx(parent["fairness/sex/dp_diff"], abs=1e-2)
    # and served thresholded
    rows = adult_records(64)
    served = load_model(workspace, child, "onnx", 1).run_rows(rows, {"probabilities"})
    original = load_model(workspace, get_model_version(workspace, SOURCE), "torch", 1)
    plain = original.run_rows(rows, {"probabilities"})["probabilities"][:, 1]
    thresholds = load_thresholds(bundle)
    assert thresholds is not None
    expected = thresholds.positive_probability(plain, [row["sex"] for row in rows])
    np.testing.assert_allclose(served["probabilities"][:, 1], expected, atol=1e-6)
