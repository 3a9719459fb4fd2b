from __future__ import annotations

import math
from itertools import product

import pytest
import torch
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.evaluate import (
    CONFUSION_MATRIX,
    average_ranks,
    binary_roc_auc,
    evaluate,
    macro_f1,
    roc_auc,
)
from forgeml.train.task import SplitData
from forgeml.train.thresholds import GroupRule, GroupThresholds, RowDecisions, ThresholdRule


class Lookup(nn.Module):
    """Returns a fixed output per row id: metrics can then be checked by hand."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table.clone(), requires_grad=False)

    def forward(self, row: torch.Tensor) -> torch.Tensor:
        return self.table[row]


def split_of(targets: torch.Tensor, slices: dict[str, list[str]] | None = None) -> SplitData:
    return SplitData({"row": torch.arange(len(targets))}, targets, slices or {})


def pairwise_auc(scores: list[float], labels: list[int]) -> float:
    """Reference AUC: the share of (positive, negative) pairs ranked right, ties half."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    negatives = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in product(positives, negatives))
    return wins / (len(positives) * len(negatives))


PROBABILITIES = [
    [0.7, 0.2, 0.1],
    [0.3, 0.6, 0.1],
    [0.1, 0.8, 0.1],
    [0.2, 0.5, 0.3],
    [0.5, 0.1, 0.4],
    [0.1, 0.2, 0.7],
]
TARGETS = [0, 0, 1, 1, 2, 2]  # predicted (argmax): 0, 1, 1, 1, 0, 2


def test_multiclass_metrics_match_hand_computed_values() -> None:
    model = Lookup(torch.tensor(PROBABILITIES).log())  # softmax(log p) = p
    metrics = evaluate(model, split_of(torch.tensor(TARGETS)), "classification", 4, ["a", "b", "c"])
    assert metrics[CONFUSION_MATRIX] == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    assert metrics["accuracy"] == pytest.approx(4 / 6)
    # F1 = 2tp / (2tp + fp + fn): class a 2/4, class b 4/5, class c 2/3
    assert metrics["f1_macro"] == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    expected_loss = -sum(math.log(PROBABILITIES[i][t]) for i, t in enumerate(TARGETS)) / 6
    assert metrics["loss"] == pytest.approx(expected_loss, rel=1e-6)
    one_vs_rest = [
        pairwise_auc([row[c] for row in PROBABILITIES], [int(t == c) for t in TARGETS])
        for c in range(3)
    ]
    assert metrics["roc_auc"] == pytest.approx(sum(one_vs_rest) / 3)


def test_binary_roc_auc_uses_the_class_one_probability() -> None:
    scores = [0.1, 0.4, 0.35, 0.8]  # the textbook example: AUC 0.75
    logits = torch.tensor([[0.0, math.log(p / (1 - p))] for p in scores])
    metrics = evaluate(
        Lookup(logits), split_of(torch.tensor([0, 0, 1, 1])), "classification", 3, []
    )
    assert metrics["roc_auc"] == pytest.approx(0.75)
    assert metrics[CONFUSION_MATRIX] == [[2, 0], [1, 1]]


def test_roc_auc_counts_ties_as_one_half_like_the_pairwise_definition() -> None:
    generator = torch.Generator().manual_seed(4)
    for _ in range(20):
        scores = torch.randint(0, 5, (30,), generator=generator).double() / 4  # many ties
        labels = torch.randint(0, 2, (30,), generator=generator)
        if labels.min() == labels.max():
            continue
        expected = pairwise_auc(scores.tolist(), labels.tolist())
        assert binary_roc_auc(scores, labels == 1) == pytest.approx(expected)


def test_roc_auc_is_left_out_when_only_one_class_is_present() -> None:
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    metrics = evaluate(Lookup(logits), split_of(torch.tensor([1, 1])), "classification", 2, [])
    assert "roc_auc" not in metrics
    assert math.isnan(roc_auc(torch.softmax(logits, 1), torch.tensor([1, 1])))


def test_average_ranks_share_ranks_between_ties() -> None:
    assert average_ranks(torch.tensor([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4, 1, 4, 2, 4]
    assert average_ranks(torch.tensor([5.0, 5.0])).tolist() == [1.5, 1.5]


def test_macro_f1_leaves_out_classes_absent_from_targets_and_predictions() -> None:
    matrix = torch.tensor([[2, 0, 0], [1, 1, 0], [0, 0, 0]])
    # class 0: 4 / (4 + 1 + 0); class 1: 2 / (2 + 0 + 1); class 2 never occurs
    assert macro_f1(matrix) == pytest.approx((4 / 5 + 2 / 3) / 2)


def test_regression_metrics_match_hand_computed_values() -> None:
    model = Lookup(torch.tensor([[1.0], [2.0], [3.0], [4.0]]))  # [B, 1] outputs
    metrics = evaluate(model, split_of(torch.tensor([1.0, 3.0, 2.0, 6.0])), "regression", 3, [])
    # errors 0, -1, 1, -2
    assert metrics == pytest.approx({"loss": 1.5, "rmse": math.sqrt(1.5), "mae": 1.0})


def test_language_model_loss_and_perplexity_skip_ignored_tokens() -> None:
    probabilities = torch.tensor(
        [[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]], [[0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3]]]
    )
    targets = torch.tensor([[0, 1], [2, -100]])
    metrics = evaluate(Lookup(probabilities.log()), split_of(targets), "language_modeling", 1, [])
    expected = -(math.log(0.5) + math.log(0.8) + math.log(0.6)) / 3
    assert metrics["loss"] == pytest.approx(expected, rel=1e-6)
    assert metrics["perplexity"] == pytest.approx(math.exp(expected), rel=1e-6)


def test_per_slice_metrics_are_keyed_metric_column_value() -> None:
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    targets = torch.tensor([0, 1, 0, 0, 1])  # row 2 is wrong; it is Female
    sex = ["Male", "Male", "Female", "Female", "Female"]
    metrics = evaluate(Lookup(logits), split_of(targets, {"sex": sex}), "classification", 2, [])
    assert metrics["accuracy"] == pytest.approx(0.8)
    assert metrics["accuracy/sex=Male"] == 1.0
    assert metrics["accuracy/sex=Female"] == pytest.approx(2 / 3)
    assert metrics["count/sex=Male"] == 2.0 and metrics["count/sex=Female"] == 3.0
    assert metrics["roc_auc/sex=Female"] == pytest.approx(pairwise_auc([1.0, 0.0, 1.0], [0, 0, 1]))
    assert "roc_auc/sex=Male" in metrics and "loss/sex=Male" in metrics


def test_evaluation_restores_the_training_mode_and_drops_no_rows() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.9))
    inputs = torch.randn(7, 3)

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return self.inner(features)

    wrapped = Wrapped().train()
    targets = torch.tensor([0, 1, 0, 1, 1, 0, 1])
    split = SplitData({"features": inputs}, targets)
    first = evaluate(wrapped, split, "classification", 3, ["a", "b"])
    second = evaluate(wrapped, split, "classification", 7, ["a", "b"])
    assert wrapped.training
    assert first == second  # dropout is off while evaluating; batching does not matter
    assert sum(map(sum, first[CONFUSION_MATRIX])) == 7  # type: ignore[arg-type]


def test_bf16_evaluation_is_close_to_fp32() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 3)

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return self.inner(features)

    split = SplitData({"features": torch.randn(32, 4)}, torch.randint(0, 3, (32,)))
    fp32 = evaluate(Wrapped(), split, "classification", 8, [])
    bf16 = evaluate(Wrapped(), split, "classification", 8, [], precision="bf16")
    assert bf16["loss"] == pytest.approx(fp32["loss"], abs=0.02)


def test_an_empty_split_has_no_metrics() -> None:
    empty = SplitData({"row": torch.zeros(0, dtype=torch.long)}, torch.zeros(0, dtype=torch.long))
    assert evaluate(Lookup(torch.zeros(1, 2)), empty, "classification", 4, []) == {}


def _decisions(groups: list[str], draws: list[float]) -> RowDecisions:
    """Group a: positive above 0.5; group b: positive above 0.2 (equal-opportunity style)."""
    rules = {
        "a": GroupRule(1.0, ThresholdRule(">", 0.5), 0.0, ThresholdRule(">", 0.5)),
        "b": GroupRule(0.5, ThresholdRule(">", 0.2), 0.5, ThresholdRule(">", 0.6)),
    }
    thresholds = GroupThresholds("g", "demographic_parity", "accuracy_score", rules)
    return RowDecisions(thresholds, groups, torch.tensor(draws, dtype=torch.float64).numpy())


def test_thresholded_decisions_replace_the_argmax_in_every_metric() -> None:
    # class-1 probabilities 0.27, 0.73, 0.27, 0.73, 0.5 (logit gaps of -1, 1, -1, 1, 0)
    logits = torch.tensor([[0.0, -1.0], [0.0, 1.0], [0.0, -1.0], [0.0, 1.0], [0.0, 0.0]])
    targets = torch.tensor([0, 1, 1, 1, 0])
    groups = ["a", "a", "b", "b", "b"]
    # group b: q = 0.5 for 0.27 (only rule0 holds), 1 for 0.73, 0.5 for 0.5; draws decide
    decisions = _decisions(groups, [0.9, 0.9, 0.4, 0.9, 0.6])
    split = split_of(targets, {"g": groups})
    found = evaluate(Lookup(logits), split, "classification", 2, ["n", "p"], decisions=decisions)
    # thresholded labels 0, 1, 1, 1, 0 (argmax gives 0, 1, 0, 1, 0)
    assert found["accuracy"] == 1.0
    assert found[CONFUSION_MATRIX] == [[2, 0], [0, 3]]
    assert found["accuracy/g=b"] == 1.0 and found["count/g=b"] == 3.0
    assert found["fairness/g/dp_diff"] == pytest.approx(2 / 3 - 1 / 2)
    assert "loss" not in found and "loss/g=a" not in found
    # ROC-AUC is of q = (0, 1, 0.5, 1, 0.5): positives 1, 0.5, 1 against negatives 0, 0.5
    assert found["roc_auc"] == pytest.approx(pairwise_auc([0, 1, 0.5, 1, 0.5], [0, 1, 1, 1, 0]))
    plain = evaluate(Lookup(logits), split, "classification", 2, ["n", "p"])
    assert plain["accuracy"] == 0.8 and "loss" in plain


def test_thresholds_on_a_multiclass_model_are_one_sentence() -> None:
    logits = torch.zeros(2, 3)
    split = split_of(torch.tensor([0, 1]), {"g": ["a", "b"]})
    with pytest.raises(ConfigError, match="the thresholds apply to a binary classifier only"):
        evaluate(
            Lookup(logits), split, "classification", 2, [], decisions=_decisions(["a", "b"], [0, 0])
        )
