"""Magnitude pruning (global L1, unstructured) of Linear weights, with recovery fine-tuning.

The smallest-magnitude weights across all Linear layers together are zeroed (Han et al.
2015, "Learning both Weights and Connections"); embeddings and LayerNorms are left
alone, as is a Linear layer tied to an embedding (a GPT's output head). While the masks
are in place a fine-tune updates only the surviving weights; `make_permanent` then bakes
the zeros into the weights. Dense storage does not shrink, so sizes are also reported
compressed (deflate), the form a sparse checkpoint would take.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from forgeml.core.errors import OptimizationError

if TYPE_CHECKING:
    from forgeml.train.config import TrainConfig
    from forgeml.train.logger import MetricLogger
    from forgeml.train.task import TaskData

Weights = list[tuple[nn.Module, str]]


def prunable_weights(module: nn.Module) -> Weights:
    """(layer, "weight") of every Linear layer whose weight is not shared with an embedding."""
    embedded = {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding)}
    found: Weights = [
        (layer, "weight")
        for layer in module.modules()
        if isinstance(layer, nn.Linear) and id(layer.weight) not in embedded
    ]
    if not found:
        raise OptimizationError("The model has no Linear layers to prune.")
    return found


def apply_masks(weights: Weights, sparsity: float) -> None:
    """Mask the `sparsity` fraction of smallest |w| over all `weights` together."""
    from torch.nn.utils import prune

    prune.global_unstructured(weights, pruning_method=prune.L1Unstructured, amount=sparsity)


def make_permanent(weights: Weights) -> None:
    """Fold the masks into the weights (plain parameters again, zeros kept)."""
    from torch.nn.utils import prune

    for layer, name in weights:
        prune.remove(layer, name)


def sparsity_of(weights: Weights) -> float:
    """Fraction of zero entries over `weights`."""
    zeros = sum(int((getattr(layer, name) == 0).sum()) for layer, name in weights)
    total = sum(getattr(layer, name).numel() for layer, name in weights)
    return zeros / total


def deflate_size(path: Path) -> int:
    """Bytes of `path` deflate-compressed (zlib level 6, as zip uses)."""
    return len(zlib.compress(path.read_bytes(), 6))


def finetune(
    module: nn.Module,
    task: TaskData,
    config: TrainConfig,
    steps: int,
    run_dir: Path,
    logger: MetricLogger,
) -> dict[str, float]:
    """Recovery fine-tuning: `steps` optimiser steps of the model's own training recipe.

    Runs `forgeml.train.loop.fit` with the model's training config (optimiser, batch size,
    data), a constant learning rate, no early stopping and no distillation or LoRA.

    Returns:
        fit's final metrics (evaluation and test splits).
    """
    from forgeml.train.config import CheckpointConfig, ScheduleConfig
    from forgeml.train.loop import fit

    recovery = config.model_copy(
        update={
            "epochs": None,
            "max_steps": steps,
            "schedule": ScheduleConfig(),
            "early_stopping": None,
            "checkpoint": CheckpointConfig(keep=1),
            "lora": None,
            "distill": None,
            "workers": 1,
        }
    )
    torch.manual_seed(config.seed)
    result = fit(module, task, recovery, run_dir=run_dir, logger=logger)
    module.eval()
    return dict(result.final_metrics)
