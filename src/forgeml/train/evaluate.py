"""Evaluation metrics as fit the task, overall and per slice of a raw column.

Classification: loss (cross-entropy), accuracy, macro F1, ROC-AUC (binary: of the class-1
probability; multiclass: macro one-vs-rest), confusion matrix. Regression: loss (MSE),
RMSE, MAE. Language modelling: loss (mean token cross-entropy) and perplexity.
Per-slice metrics are keyed "metric/column=value", e.g. "accuracy/sex=Male", plus
"count/column=value" (rows in the slice). A binary classifier's slice columns also get
fairlearn's group fairness measures (`forgeml.train.fairness`): `fairness/column/dp_diff`
and the like, and the per-group table under `FAIRNESS_GROUPS`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.task import SplitData, TaskKind

if TYPE_CHECKING:
    from forgeml.train.thresholds import RowDecisions

CONFUSION_MATRIX = "confusion_matrix"
FAIRNESS_GROUPS = "fairness_groups"
Metrics = dict[str, float | list[list[int]] | dict[str, Any]]

_log = logging.getLogger(__name__)


def evaluate(
    model: nn.Module,
    split: SplitData,
    task: TaskKind,
    batch_size: int,
    class_names: list[str],
    *,
    device: torch.device | None = None,
    precision: str = "fp32",
    decisions: RowDecisions | None = None,
) -> Metrics:
    """Metrics of `model` on `split`.

    Args:
        model: Returns logits from `model(**inputs)`; its train/eval mode is restored.
        split: The rows to score (all of them, in order).
        task: "classification", "regression" or "language_modeling".
        batch_size: Rows per forward pass.
        class_names: Class names (their count sizes the confusion matrix); may be empty.
        device: Where to run; default: the device of the model's parameters.
        precision: "bf16" runs the forward passes under bfloat16 autocast.
        decisions: A fairness-mitigated binary classifier's group thresholds over the
            split's rows (`forgeml.train.thresholds.split_decisions`): every metric is of
            the thresholded labels and probabilities [1 - q, q], as the model server
            answers, and there is no loss (q is 0 or 1 for many rows, so it is infinite).

    Returns:
        Float metrics, per-slice metrics, and for classification the confusion matrix
        (rows: true class, columns: predicted class) under `CONFUSION_MATRIX`; for binary
        classification with slices, fairness metrics and their table under `FAIRNESS_GROUPS`.
    """
    if len(split) == 0:
        return {}
    if device is None:
        device = next(model.parameters(), torch.empty(0)).device
    outputs = _predict(model, split, task, batch_size, device, precision)
    targets = split.targets
    if task != "classification":

        def score(rows: torch.Tensor) -> dict[str, float]:
            return _scalar_metrics(task, outputs[rows], targets[rows])

        scalars: Metrics = dict(_scalar_metrics(task, outputs, targets))
        return _with_slices(scalars, split, score)
    num_classes = len(class_names) or int(outputs.shape[1])
    answers = ClassAnswers.of_logits(outputs)
    if decisions is not None:
        answers = ClassAnswers.thresholded(outputs, decisions)

    def score_classes(rows: torch.Tensor) -> dict[str, float]:
        return answers.rows(rows).metrics(targets[rows], num_classes)

    metrics: Metrics = dict(answers.metrics(targets, num_classes))
    matrix = confusion_matrix(answers.predicted, targets, num_classes)
    metrics[CONFUSION_MATRIX] = matrix.tolist()
    metrics = _with_slices(metrics, split, score_classes)
    if split.slices:
        metrics.update(_fairness_metrics(answers.predicted, targets, num_classes, split.slices))
    return metrics


@dataclass(frozen=True)
class ClassAnswers:
    """A classifier's answers: logits (None once thresholded), probabilities and labels."""

    logits: torch.Tensor | None  # float32 [N, C]
    probabilities: torch.Tensor  # float64 [N, C]
    predicted: torch.Tensor  # class ids [N]

    @classmethod
    def of_logits(cls, logits: torch.Tensor) -> ClassAnswers:
        """The most probable class of each row."""
        logits = logits.float()
        return cls(logits, torch.softmax(logits.double(), dim=1), logits.argmax(dim=1))

    @classmethod
    def thresholded(cls, logits: torch.Tensor, decisions: RowDecisions) -> ClassAnswers:
        """The group thresholds' decisions over the class-1 probability, as served.

        Raises:
            ConfigError: the model is not a binary classifier.
        """
        if logits.shape[1] != 2:
            raise ConfigError(
                f"The model has fairness thresholds but {logits.shape[1]} classes; "
                "the thresholds apply to a binary classifier only."
            )
        # the server's probabilities are float32 (its decoder's softmax): score what it does
        scores = torch.softmax(logits.float(), dim=1)[:, 1].numpy().astype(np.float64)
        positive, chosen = decisions.decide(scores)
        probabilities = torch.from_numpy(np.stack([1 - positive, positive], axis=1))
        return cls(None, probabilities, torch.from_numpy(chosen).long())

    def rows(self, mask: torch.Tensor) -> ClassAnswers:
        logits = None if self.logits is None else self.logits[mask]
        return ClassAnswers(logits, self.probabilities[mask], self.predicted[mask])

    def metrics(self, targets: torch.Tensor, num_classes: int) -> dict[str, float]:
        """Loss (of logits only), accuracy, macro F1 and ROC-AUC (when both classes of a
        pair are present)."""
        matrix = confusion_matrix(self.predicted, targets, num_classes)
        found = (
            {} if self.logits is None else {"loss": F.cross_entropy(self.logits, targets).item()}
        )
        found.update(
            accuracy=(self.predicted == targets).double().mean().item(), f1_macro=macro_f1(matrix)
        )
        auc = roc_auc(self.probabilities, targets)
        if not math.isnan(auc):
            found["roc_auc"] = auc
        return found


def fairness_groups(results: Metrics) -> dict[str, Any] | None:
    """The per-group fairness table of `evaluate`'s result (None: it has none)."""
    table = results.get(FAIRNESS_GROUPS)
    return table if isinstance(table, dict) else None


def _fairness_metrics(
    predicted: torch.Tensor,
    targets: torch.Tensor,
    num_classes: int,
    slices: dict[str, list[str]],
) -> Metrics:
    if num_classes != 2:
        _log.info(
            "Fairness metrics left out: they need a binary target (one positive label), "
            "and this one has %d classes.",
            num_classes,
        )
        return {}
    from forgeml.train.fairness import fairness_report

    report = fairness_report(targets.numpy(), predicted.numpy(), slices)
    return {**report.metrics, FAIRNESS_GROUPS: report.table()}


def scalar_metrics(results: Metrics) -> tuple[dict[str, float], list[list[int]] | None]:
    """Split `evaluate`'s result into its float metrics and the confusion matrix (or None)."""
    matrix = results.get(CONFUSION_MATRIX)
    floats = {name: value for name, value in results.items() if isinstance(value, float)}
    return floats, matrix if isinstance(matrix, list) else None


def classification_metrics(
    logits: torch.Tensor, targets: torch.Tensor, num_classes: int
) -> dict[str, float]:
    """Loss, accuracy, macro F1 and ROC-AUC (when both classes of a pair are present)."""
    return ClassAnswers.of_logits(logits).metrics(targets, num_classes)


def confusion_matrix(
    predicted: torch.Tensor, targets: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """Counts [true class, predicted class] as a [C, C] int64 tensor."""
    flat = targets.long() * num_classes + predicted.long()
    return torch.bincount(flat, minlength=num_classes * num_classes).reshape(
        num_classes, num_classes
    )


def macro_f1(matrix: torch.Tensor) -> float:
    """Unweighted mean F1 over the classes that occur in the targets or the predictions.

    Classes absent from both are left out, as scikit-learn does by default.
    """
    true_positives = matrix.diag().double()
    support = matrix.sum(dim=1).double()
    predicted = matrix.sum(dim=0).double()
    present = (support + predicted) > 0
    if not bool(present.any()):
        return float("nan")
    f1 = 2 * true_positives[present] / (support[present] + predicted[present])
    return f1.mean().item()


def roc_auc(probabilities: torch.Tensor, targets: torch.Tensor) -> float:
    """Area under the ROC curve; NaN when it is undefined (one class only).

    Binary: of the class-1 probability. Multiclass: macro mean of one-vs-rest AUCs over
    the classes that have both positive and negative rows.
    """
    num_classes = probabilities.shape[1]
    if num_classes == 2:
        return binary_roc_auc(probabilities[:, 1], targets == 1)
    aucs = [binary_roc_auc(probabilities[:, c], targets == c) for c in range(num_classes)]
    defined = [auc for auc in aucs if not math.isnan(auc)]
    return sum(defined) / len(defined) if defined else float("nan")


def binary_roc_auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """ROC-AUC as the Mann-Whitney U statistic over average ranks (ties count one half).

    AUC = (R+ - P(P+1)/2) / (P * N), where R+ is the rank sum of the P positive rows
    among all rows and N the number of negative rows (Hanley & McNeil 1982).
    """
    n_positive = int(positive.sum())
    n_negative = int(positive.numel()) - n_positive
    if n_positive == 0 or n_negative == 0:
        return float("nan")
    ranks = average_ranks(scores)
    rank_sum = ranks[positive].sum().item()
    return (rank_sum - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks of `values`, tied values sharing the mean of their ranks (float64)."""
    count = values.numel()
    ordered, order = torch.sort(values.flatten(), stable=True)
    starts_group = torch.ones(count, dtype=torch.bool)
    starts_group[1:] = ordered[1:] != ordered[:-1]
    group = torch.cumsum(starts_group.long(), dim=0) - 1
    starts = torch.nonzero(starts_group).flatten()
    ends = torch.cat([starts[1:], torch.tensor([count])])
    # a group covering sorted positions start..end-1 holds ranks start+1..end
    group_rank = (starts + ends + 1).double() / 2
    ranks = torch.empty(count, dtype=torch.float64)
    ranks[order] = group_rank[group]
    return ranks


def regression_metrics(predictions: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Loss (MSE), RMSE and MAE."""
    errors = predictions.double() - targets.double()
    mse = errors.square().mean().item()
    return {"loss": mse, "rmse": math.sqrt(mse), "mae": errors.abs().mean().item()}


def language_model_metrics(token_losses: torch.Tensor) -> dict[str, float]:
    """Mean token cross-entropy and perplexity from per-row [loss sum, token count]."""
    total, tokens = token_losses.double().sum(dim=0).tolist()
    loss = total / tokens if tokens else float("nan")
    return {"loss": loss, "perplexity": math.exp(loss) if tokens else float("nan")}


def _scalar_metrics(
    task: TaskKind, outputs: torch.Tensor, targets: torch.Tensor
) -> dict[str, float]:
    if task == "regression":
        return regression_metrics(outputs, targets)
    return language_model_metrics(outputs)


def _with_slices(
    metrics: Metrics, split: SplitData, score: Callable[[torch.Tensor], dict[str, float]]
) -> Metrics:
    """`metrics` plus `score` of the rows of each value of each slice column, and its count."""
    for column, values in split.slices.items():
        labels = [str(value) for value in values]
        names = sorted(set(labels))
        code_of = {name: code for code, name in enumerate(names)}
        codes = torch.tensor([code_of[label] for label in labels])
        for code, value in enumerate(names):
            rows = codes == code
            part = score(rows)
            part["count"] = float(rows.sum())
            metrics.update({f"{name}/{column}={value}": found for name, found in part.items()})
    return metrics


def _predict(
    model: nn.Module,
    split: SplitData,
    task: TaskKind,
    batch_size: int,
    device: torch.device,
    precision: str,
) -> torch.Tensor:
    """Model outputs on CPU, in row order: logits [N, C], predictions [N], or for
    language modelling per-row [token loss sum, token count] (logits would not fit)."""
    was_training = model.training
    model.eval()
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()
    )
    parts: list[torch.Tensor] = []
    try:
        with torch.inference_mode(), autocast:
            for start in range(0, len(split), batch_size):
                inputs = {
                    name: tensor[start : start + batch_size].to(device, non_blocking=True)
                    for name, tensor in split.inputs.items()
                }
                logits = model(**inputs).float()
                targets = split.targets[start : start + batch_size].to(device)
                parts.append(_batch_output(task, logits, targets).cpu())
    finally:
        model.train(was_training)
    return torch.cat(parts) if parts else torch.empty(0)


def _batch_output(task: TaskKind, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if task == "classification":
        return logits
    if task == "regression":
        return logits.reshape(targets.shape)
    token_losses = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).reshape(targets.shape)
    counted = (targets != -100).to(token_losses.dtype)  # -100: cross_entropy's ignore_index
    return torch.stack([token_losses.sum(dim=1), counted.sum(dim=1)], dim=1)
