from __future__ import annotations

import pytest
import torch

from forgeml.core.errors import OptimizationError, UsageError
from forgeml.optimize._inputs import batch_rows, held_out, split_of
from forgeml.train.task import SplitData, TaskData


def _split(rows: int) -> SplitData:
    return SplitData({"features": torch.arange(rows * 2.0).reshape(rows, 2)}, torch.zeros(rows))


def _task(eval_rows: int = 0, test_rows: int = 0) -> TaskData:
    return TaskData(
        task="classification",
        train=_split(4),
        eval=_split(eval_rows) if eval_rows else None,
        test=_split(test_rows) if test_rows else None,
    )


def test_split_of_names_validation_for_the_evaluation_split() -> None:
    task = _task(eval_rows=3, test_rows=2)
    assert split_of(task, "validation", "m@v1") is task.eval
    assert split_of(task, "test", "m@v1") is task.test


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ("dev", "Unknown split 'dev'"),
        ("test", "has no test split; choose one of train, validation"),
    ],
)
def test_split_of_refuses_unknown_or_missing_splits(split: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        split_of(_task(eval_rows=3), split, "m@v1")


@pytest.mark.parametrize(
    ("task", "expected"),
    [(_task(eval_rows=3, test_rows=2), "test"), (_task(eval_rows=3), "validation")],
)
def test_held_out_prefers_the_test_split(task: TaskData, expected: str) -> None:
    assert held_out(task, "m@v1")[0] == expected


def test_held_out_needs_a_test_or_validation_split() -> None:
    with pytest.raises(OptimizationError, match="no test or validation split"):
        held_out(_task(), "m@v1")


def test_batch_rows_wraps_around_the_split() -> None:
    rows = batch_rows(_split(3), 2, 3)["features"]
    assert rows[:, 0].tolist() == [4.0, 0.0, 2.0]
