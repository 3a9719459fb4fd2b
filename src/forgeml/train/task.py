"""What the trainer consumes: tensors per split, plus what the model head must know.

Every model takes its inputs as keyword tensors (`model(**batch.inputs)`) and returns
logits: [B, num_classes] for classification, [B] or [B, 1] for regression,
[B, T, vocab] for language modelling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import polars as pl
    import torch

TaskKind = Literal["classification", "regression", "language_modeling"]


@dataclass
class SplitData:
    """One split as tensors. All tensors share the first dimension N (rows)."""

    inputs: dict[str, torch.Tensor]
    targets: torch.Tensor  # [N] class ids (long) | [N] floats | [N, T] next-token ids
    slices: dict[str, list[str]] = field(default_factory=dict)  # column -> value per row
    # a tabular split's raw rows as read, before the FeatureSpec: what a client would send
    # (a fairness-mitigated model's decisions draw on them, `forgeml.train.thresholds`)
    rows: pl.DataFrame | None = None

    def __len__(self) -> int:
        return int(self.targets.shape[0])


@dataclass
class TaskData:
    """The splits of one dataset version, ready for a model."""

    task: TaskKind
    train: SplitData
    eval: SplitData | None = None
    test: SplitData | None = None
    num_classes: int | None = None
    class_names: list[str] = field(default_factory=list)
    input_shape: tuple[int, ...] = ()  # (features,) | (C, H, W) | (T,)
    vocab_size: int | None = None
    # the inputs' vocabulary, kept in the bundle: a text tokenizer's state, a graph's names
    tokenizer: dict[str, Any] | None = None
    # provenance recorded with the run: dataset digest, feature spec ref, tokenizer, ...
    meta: dict[str, Any] = field(default_factory=dict)
