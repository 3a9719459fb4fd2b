"""A small convolutional network for images [B, C, H, W].

Two blocks of 3x3 convolution -> batch norm -> ReLU -> 2x2 max-pool, then adaptive
average pooling to a fixed `pool_size` grid, so one architecture serves 8x8 scikit-learn
digits, 28x28 MNIST and 32x32 CIFAR alike, then dropout and a linear head.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch import nn

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError
from forgeml.train.models._family import ModelFamily
from forgeml.train.models.mlp import PARAMS_SOURCE, head_size
from forgeml.train.task import TaskData

# two 2x2 max-pools halve each side twice; a side under 4 pixels would pool to nothing
_MIN_SIDE = 4


class CNNParams(BaseModel):
    """Parameters of the `cnn` model (`model.params` in a training config)."""

    model_config = ConfigDict(extra="forbid")

    channels: tuple[PositiveInt, PositiveInt] = Field(
        default=(32, 64), description="Output channels of the two convolution blocks."
    )
    pool_size: PositiveInt = Field(
        default=2, description="Side of the grid that adaptive pooling reduces each map to."
    )
    dropout: float = Field(default=0.1, ge=0, lt=1, description="Dropout before the head.")


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 convolution (no bias: batch norm adds one), batch norm, ReLU, 2x2 max-pool."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class SmallCNN(nn.Module):
    """Two convolution blocks, adaptive pooling and a linear head."""

    def __init__(
        self,
        in_channels: int,
        out_features: int,
        channels: tuple[int, int] = (32, 64),
        pool_size: int = 2,
        dropout: float = 0.1,
        squeeze: bool = False,
    ) -> None:
        """Build the layers.

        Args:
            in_channels: Channels C of the `images` input (1 grey, 3 RGB).
            out_features: Logits per image (classes, or 1 for regression).
            channels: Output channels of the two convolution blocks.
            pool_size: Side of the pooled grid fed to the head.
            dropout: Dropout probability before the head.
            squeeze: Return [B] instead of [B, 1] (regression).
        """
        super().__init__()
        self.features = nn.Sequential(
            conv_block(in_channels, channels[0]),
            conv_block(channels[0], channels[1]),
            nn.AdaptiveAvgPool2d(pool_size),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(channels[1] * pool_size * pool_size, out_features),
        )
        self.squeeze = squeeze

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Map images [B, C, H, W] to logits [B, out_features] (or [B] when squeezing).

        Float images are used as given; integer images (uint8 pixels, 4x smaller to keep
        in memory) are scaled to [0, 1].
        """
        if not images.is_floating_point():
            images = images.float() / 255.0
        logits: torch.Tensor = self.head(self.features(images))
        return logits.squeeze(-1) if self.squeeze else logits


def build(task: TaskData, **params: Any) -> SmallCNN:
    """Build the `cnn` zoo model for an image task.

    Args:
        task: Classification or regression task whose `input_shape` is (C, H, W).
        **params: `CNNParams` fields.

    Returns:
        The untrained model.

    Raises:
        ConfigError: Bad params, inputs that are not images, or images under 4x4 pixels.
    """
    config = parse_model(CNNParams, params, PARAMS_SOURCE)
    if len(task.input_shape) != 3:
        raise ConfigError(
            f"Model 'cnn' needs images shaped (channels, height, width) but the inputs have "
            f"shape {task.input_shape}; use 'mlp' for flat features."
        )
    in_channels, height, width = task.input_shape
    if min(height, width) < _MIN_SIDE:
        raise ConfigError(
            f"Model 'cnn' needs images of at least {_MIN_SIDE}x{_MIN_SIDE} pixels but they are "
            f"{height}x{width}; resize them in the dataset first."
        )
    out_features, squeeze = head_size(task, "cnn")
    return SmallCNN(
        in_channels,
        out_features,
        config.channels,
        config.pool_size,
        config.dropout,
        squeeze=squeeze,
    )


# Images [N, C, H, W]; no request encoder yet, so it is served over no row protocol.
FAMILY = ModelFamily(name="cnn", builder=build, modality="image", inputs=("images",))
