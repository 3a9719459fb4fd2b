"""Fairness mitigation: group thresholds over a trained binary classifier, as a new version.

`mitigate` fits fairlearn's `ThresholdOptimizer` (Hardt et al. 2016; prefit, on the
original model's positive-class probabilities over its training or validation split) for
one sensitive column under demographic parity or equalized odds, and registers the
original bundle plus the learnt rules (`fairness_thresholds.json`, never a pickle) as a
new version whose parent is the original. The model server applies the rules
(`forgeml.serve.thresholds`). The new version is scored on the validation and test splits
on the decisions its server gives each row (`optimize.load_model`, as `models compare`
and the release gate score it), and records those metrics, named as training names them,
so the promotion gate reads it as any other. The whole of it is one tracked run of the
`mitigate` experiment.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig
    from forgeml.train.task import SplitData, TaskData

Constraint = Literal["demographic_parity", "equalized_odds"]
Objective = Literal["accuracy_score", "balanced_accuracy_score"]
CONSTRAINTS = ("demographic_parity", "equalized_odds")
OBJECTIVES = ("accuracy_score", "balanced_accuracy_score")
FIT_SPLITS = ("train", "validation")
EXPERIMENT = "mitigate"  # every mitigation run, whatever model it made
REPORT_ARTIFACT = "fairness.json"


@dataclass(frozen=True)
class MitigateRequest:
    """What to equalise, across which column, fitted on which split."""

    sensitive: str
    constraint: str = "demographic_parity"
    objective: str = "accuracy_score"
    fit_split: str = "validation"

    def check(self) -> None:
        """Raises UsageError for a request that cannot be carried out."""
        if self.constraint not in CONSTRAINTS:
            raise UsageError(
                f"Unknown constraint '{self.constraint}': use {' or '.join(CONSTRAINTS)}."
            )
        if self.objective not in OBJECTIVES:
            raise UsageError(
                f"Unknown objective '{self.objective}': use {' or '.join(OBJECTIVES)}."
            )
        if self.fit_split not in FIT_SPLITS:
            raise UsageError(f"--fit-split must be train or validation, not '{self.fit_split}'.")


@dataclass
class MitigateResult:
    """The new version, its run, and the before/after report (fairness.json)."""

    model: ModelVersionRecord
    run_id: str
    report: dict[str, Any]


def mitigate(workspace: Workspace, ref: str, request: MitigateRequest) -> MitigateResult:
    """Fit group thresholds for `ref` as `request` says and register the result.

    Raises:
        UsageError: a bad request, a model that is not a trained binary tabular
            classifier, or a sensitive column that is not one of its input fields.
        MissingColumnError: the model's data has no such column.
        NotFoundError: no such model version.
    """
    from forgeml.tracking import download_bundle, get_model_version, register_model, start_run
    from forgeml.tracking.lifecycle import tracked_run
    from forgeml.train.thresholds import from_interpolation

    request.check()
    record = get_model_version(workspace, ref)
    # its run and version belong to the model's project, whichever project asks
    workspace = workspace.in_project(record.project)
    with tempfile.TemporaryDirectory(prefix="forgeml-mitigate-") as scratch:
        source = download_bundle(workspace, record, Path(scratch) / "source")
        task = _task_data(workspace, record, source, request.sensitive)
        fit_rows = task.train if request.fit_split == "train" else task.eval
        if fit_rows is None or len(fit_rows) == 0:
            raise UsageError(f"The data of {record.ref} has no {request.fit_split} split.")
        scores = _positive_scores(source, task)
        fitted = _fit(fit_rows, scores[request.fit_split], request)
        thresholds = from_interpolation(
            request.sensitive,
            request.constraint,
            request.objective,
            fitted.interpolated_thresholder_.interpolation_dict,
        )
        bundle = Path(scratch) / "bundle"
        shutil.copytree(source, bundle)
        thresholds.save(bundle)
        report, metrics = _report(task, scores, bundle, record.ref, request)
        params = {"mitigate": vars(request), "source": record.ref}
        handle = start_run(
            workspace,
            params,
            record.name,
            record.dataset_version,
            lease_seconds=workspace.settings.run_lease_seconds,
            experiment=EXPERIMENT,
        )
        with tracked_run(handle) as run:
            handle.client.log_dict(handle.run_id, report, REPORT_ARTIFACT)
            model = register_model(
                workspace, handle, record.name, bundle, parent=record.ref, metrics=metrics
            )
            run.finish(metrics)
    return MitigateResult(model, handle.run_id, report)


def mitigation_summary(result: MitigateResult) -> dict[str, Any]:
    """What `models mitigate --json` prints (and the API answers)."""
    return {
        "model": result.model.ref,
        "parent": result.model.parent,
        "run_id": result.run_id,
        "metrics": result.model.metrics,
        "report": result.report,
    }


def _task_data(
    workspace: Workspace, record: ModelVersionRecord, bundle: Path, column: str
) -> TaskData:
    """The model's splits as its training encoded them, with `column`'s groups."""
    import json

    from forgeml.core.artifacts import file_digest
    from forgeml.train.data import load_task_data

    config = _training_config(record)
    description = json.loads((bundle / "model.json").read_text())
    if description.get("task") != "classification" or description.get("num_classes") != 2:
        raise UsageError(
            f"Model {record.ref} is not a binary classifier ({description.get('task')}, "
            f"{description.get('num_classes')} classes); fairness thresholds need a positive "
            "label."
        )
    spec_file = bundle / "feature_spec.json"
    inputs: list[str] = []
    fields: dict[str, Any] = {"slices": [column]}
    if config.data.feature_spec is not None and spec_file.is_file():
        from forgeml.data.features import FeatureSpec

        inputs = FeatureSpec.from_dict(json.loads(spec_file.read_text())).input_columns
        # the very spec this model was trained with, not the name's newest version
        name = config.data.feature_spec.partition("@")[0]
        fields["feature_spec"] = f"{name}@{file_digest(spec_file)}"
    task = load_task_data(
        workspace, config.model_copy(update={"data": config.data.model_copy(update=fields)})
    )
    if column not in inputs:
        raise UsageError(
            f"Column '{column}' is not one of the input fields of {record.ref}, so a served "
            f"row would not say its group; choose one of {', '.join(inputs) or 'none'}."
        )
    return task


def _training_config(record: ModelVersionRecord) -> TrainConfig:
    from pydantic import ValidationError

    from forgeml.train.config import TrainConfig

    try:
        return TrainConfig.model_validate(record.run.config)
    except ValidationError:
        raise UsageError(
            f"Model {record.ref} was not trained by `forgeml train`, so there is no data "
            "to fit fairness thresholds on; mitigate a trained version."
        ) from None


def _positive_scores(bundle: Path, task: TaskData) -> dict[str, np.ndarray]:
    """The model's class-1 probability on each split it has, in row order."""
    import torch

    from forgeml.train.recipe import load_bundle_model

    model = load_bundle_model(bundle)
    found = {}
    for name, split in (("train", task.train), ("validation", task.eval), ("test", task.test)):
        if split is None or len(split) == 0:
            continue
        with torch.inference_mode():
            logits = model(**split.inputs).double()
        found[name] = torch.softmax(logits, dim=1)[:, 1].numpy()
    return found


def _scores_estimator() -> Any:
    """A prefit scikit-learn classifier whose predict_proba is the first column of X: the
    model's positive-class probabilities, computed beforehand (ThresholdOptimizer reads only
    its predict_proba)."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Scores(ClassifierMixin, BaseEstimator):
        def __sklearn_is_fitted__(self) -> bool:
            return True  # the scores come from the trained model

        def fit(self, x: Any, y: Any = None) -> Scores:
            return self

        def predict_proba(self, x: Any) -> np.ndarray:
            scores = np.asarray(x, dtype=np.float64)[:, 0]
            return np.stack([1 - scores, scores], axis=1)

        def predict(self, x: Any) -> np.ndarray:
            return (self.predict_proba(x)[:, 1] > 0.5).astype(int)

    return Scores()


def _fit(split: SplitData, scores: np.ndarray, request: MitigateRequest) -> Any:
    from fairlearn.postprocessing import ThresholdOptimizer

    optimizer = ThresholdOptimizer(
        estimator=_scores_estimator(),
        constraints=request.constraint,
        objective=request.objective,
        prefit=True,
        predict_method="predict_proba",
    )
    groups = np.asarray(split.slices[request.sensitive], dtype=object)
    optimizer.fit(scores[:, None], split.targets.numpy(), sensitive_features=groups)
    return optimizer


def _report(
    task: TaskData, scores: dict[str, np.ndarray], bundle: Path, ref: str, request: MitigateRequest
) -> tuple[dict[str, Any], dict[str, float]]:
    """Before/after fairness on validation and test, and the new version's metrics: those
    of `bundle`'s thresholded decisions, scored as `forgeml models compare` and the release
    gate score it (`optimize.load_model`), which are the decisions its server gives."""
    from forgeml.optimize import load_model
    from forgeml.train.evaluate import fairness_groups, scalar_metrics
    from forgeml.train.fairness import fairness_report

    mitigated = load_model(bundle, device="cpu")
    report: dict[str, Any] = {"source": ref, **vars(request), "before": {}, "after": {}}
    metrics: dict[str, float] = {}
    for name, prefix, split in (("validation", "", task.eval), ("test", "test_", task.test)):
        if split is None or len(split) == 0:
            continue
        targets = split.targets.numpy()
        predicted = (scores[name] > 0.5).astype(int)
        found = fairness_report(
            targets, predicted, {request.sensitive: split.slices[request.sensitive]}
        )
        accuracy = float(np.mean(predicted == targets))
        report["before"][name] = {"accuracy": accuracy, **found.table()}
        results = mitigated.evaluate(task, split)
        after, _ = scalar_metrics(results)
        report["after"][name] = {"accuracy": after["accuracy"], **(fairness_groups(results) or {})}
        metrics.update({prefix + key: value for key, value in after.items()})
    return report, metrics
