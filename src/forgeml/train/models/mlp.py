"""A multi-layer perceptron for tabular features (the output of a FeatureSpec).

`features` [B, F] -> Linear -> ReLU -> Dropout (per hidden layer) -> Linear -> logits
[B, num_classes], or [B] for regression. With `hidden: []` it is logistic (or linear)
regression, the baseline any tabular model must beat.

This module also holds `head_size`, which the other zoo builders share: how many logits a
task needs and whether the last dimension is squeezed away.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch import nn

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError
from forgeml.train.models._family import ModelFamily
from forgeml.train.task import TaskData

PARAMS_SOURCE = "model.params"


class MLPParams(BaseModel):
    """Parameters of the `mlp` model (`model.params` in a training config)."""

    model_config = ConfigDict(extra="forbid")

    hidden: tuple[PositiveInt, ...] = Field(
        default=(128, 64), description="Width of each hidden layer; [] for a linear model."
    )
    dropout: float = Field(default=0.1, ge=0, lt=1, description="Dropout after each hidden layer.")


def head_size(task: TaskData, model_name: str) -> tuple[int, bool]:
    """How many logits a classifier/regressor head emits for `task`.

    Args:
        task: The task the model is built for.
        model_name: Zoo name, for the error message.

    Returns:
        (out_features, squeeze): one logit per class, or a single output that the model
        squeezes to [B] for regression.

    Raises:
        ConfigError: The task is language modelling, or a classification task has
            fewer than two classes.
    """
    if task.task == "regression":
        return 1, True
    if task.task != "classification":
        raise ConfigError(
            f"Model '{model_name}' predicts a class or a number, not '{task.task}'; "
            "use 'tiny_gpt' for language modelling."
        )
    if task.num_classes is None or task.num_classes < 2:
        raise ConfigError(
            f"Model '{model_name}' needs at least 2 classes but the task has "
            f"{task.num_classes}; check data.target names a label column with two or more values."
        )
    return task.num_classes, False


class TabularMLP(nn.Module):
    """Feed-forward classifier/regressor over a flat feature vector."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden: tuple[int, ...] = (128, 64),
        dropout: float = 0.1,
        squeeze: bool = False,
    ) -> None:
        """Build the layers.

        Args:
            in_features: Width F of the `features` input.
            out_features: Logits per row (classes, or 1 for regression).
            hidden: Width of each hidden layer.
            dropout: Dropout probability after each hidden layer.
            squeeze: Return [B] instead of [B, 1] (regression).
        """
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)
        self.squeeze = squeeze

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Map float features [B, F] to logits [B, out_features] (or [B] when squeezing)."""
        logits: torch.Tensor = self.net(features)
        return logits.squeeze(-1) if self.squeeze else logits


def build(task: TaskData, **params: Any) -> TabularMLP:
    """Build the `mlp` zoo model for a tabular task.

    Args:
        task: Classification or regression task whose `input_shape` is (features,).
        **params: `MLPParams` fields.

    Returns:
        The untrained model.

    Raises:
        ConfigError: Bad params, or a task this model cannot serve.
    """
    config = parse_model(MLPParams, params, PARAMS_SOURCE)
    if len(task.input_shape) != 1:
        raise ConfigError(
            f"Model 'mlp' needs flat feature rows but the inputs have shape {task.input_shape}; "
            "use 'cnn' for images or 'text_classifier' for text."
        )
    out_features, squeeze = head_size(task, "mlp")
    return TabularMLP(
        task.input_shape[0], out_features, config.hidden, config.dropout, squeeze=squeeze
    )


# Tabular rows through the fitted FeatureSpec; served records go through the same spec.
FAMILY = ModelFamily(name="mlp", builder=build, modality="tabular", inputs=("features",))
