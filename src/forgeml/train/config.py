"""The training config: one pydantic model for `forgeml train|finetune|tune CONFIG.yaml`.

Every key can be overridden from the command line with `--set path.to.key=value`
(the value is parsed as YAML, so `--set optimizer.lr=1e-3` is a float).
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from forgeml.core.configfile import load_yaml, parse_model
from forgeml.core.errors import UsageError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(_Strict):
    """Which dataset version feeds the model, and how."""

    dataset: str = Field(description="Dataset reference with splits (NAME, NAME@vN, ...).")
    target: str | None = Field(
        default=None, description="Label column; null for language modelling."
    )
    feature_spec: str | None = Field(
        default=None,
        description="FeatureSpec reference applied to raw rows (the same one serving applies); "
        "null for image, text and language-model data.",
    )
    text_column: str | None = Field(
        default=None, description="Text column for text classifiers and language models."
    )
    image_column: str = Field(default="image", description="Binary column of encoded images.")
    train_split: str | None = Field(
        default="train",
        description="Split to train on; null: every row of a dataset added without splits.",
    )
    eval_split: str | None = Field(default="validation", description="Split to evaluate on.")
    test_split: str | None = Field(default="test", description="Split for the final metrics.")
    eval_dataset: str | None = Field(
        default=None,
        description="Evaluate on this other dataset (all rows) instead of eval_split.",
    )
    eval_rename: dict[str, str] = Field(
        default_factory=dict,
        description="Rename eval_dataset columns to the training names, {old: new}.",
    )
    slices: list[str] = Field(
        default_factory=list, description="Raw columns to report metrics per value of."
    )
    max_rows: int | None = Field(
        default=None, ge=1, description="Use at most this many training rows (quick runs)."
    )


class ModelConfig(_Strict):
    """The model: a zoo name or a user entry point, and its parameters."""

    name: str = Field(
        description="A model family: mlp, cnn, text_classifier, rnn, tiny_gpt, rotate, transe, "
        "one registered "
        "with register_family, or 'package.module:FAMILY' (or ':function', a tabular builder)."
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the model builder."
    )


class OptimizerConfig(_Strict):
    name: Literal["adamw", "adam", "sgd"] = Field(default="adamw", description="Optimiser.")
    lr: float = Field(default=1e-3, gt=0, description="Peak learning rate.")
    weight_decay: float = Field(default=0.0, ge=0, description="Decoupled weight decay.")
    momentum: float = Field(default=0.9, ge=0, lt=1, description="SGD momentum.")


class ScheduleConfig(_Strict):
    name: Literal["constant", "linear", "cosine"] = Field(
        default="constant", description="Learning-rate schedule after warm-up."
    )
    warmup_steps: int = Field(default=0, ge=0, description="Linear warm-up steps.")


class CheckpointConfig(_Strict):
    every_steps: int | None = Field(
        default=None, ge=1, description="Write a checkpoint every N optimiser steps."
    )
    every_minutes: float | None = Field(
        default=None, gt=0, description="Write a checkpoint every N minutes."
    )
    keep: int = Field(default=2, ge=1, description="Checkpoints kept on disk.")


class EarlyStoppingConfig(_Strict):
    metric: str = Field(description="Evaluation metric to watch, e.g. 'loss' or 'accuracy'.")
    mode: Literal["min", "max"] = Field(default="min", description="Whether lower is better.")
    patience: int = Field(default=3, ge=1, description="Evaluations without improvement.")


class LoraConfig(_Strict):
    """LoRA through PEFT (Hu et al. 2021)."""

    r: int = Field(default=8, ge=1, description="Rank of the update matrices.")
    alpha: int = Field(default=16, ge=1, description="Scaling numerator (alpha / r).")
    dropout: float = Field(default=0.1, ge=0, lt=1, description="Dropout on the LoRA path.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["query", "value"], description="Module names to adapt."
    )
    merge: bool = Field(
        default=False, description="Also save the adapter merged into the base for serving."
    )


class DistillConfig(_Strict):
    """Knowledge distillation (Hinton et al. 2015) from a registered teacher."""

    teacher: str = Field(description="Registered model version, e.g. 'adult-mlp@v1'.")
    temperature: float = Field(default=2.0, gt=0, description="Softmax temperature.")
    alpha: float = Field(default=0.5, ge=0, le=1, description="Weight of the soft (teacher) loss.")


class DeepSpeedConfig(_Strict):
    """DeepSpeed ZeRO (Rajbhandari et al. 2020) for `strategy: deepspeed` (GPU only).

    `forgeml.train.deepspeed.deepspeed_json` turns it, with the run's batch size, precision
    and clipping, into DeepSpeed's own JSON config.
    """

    zero_stage: Literal[1, 2, 3] = Field(
        default=2,
        description="ZeRO stage: 1 shards optimiser state, 2 also gradients, 3 also parameters.",
    )
    offload_optimizer: Literal["none", "cpu"] = Field(
        default="none", description="Keep optimiser state (and its step) in CPU memory."
    )
    offload_param: Literal["none", "cpu"] = Field(
        default="none", description="Keep parameters in CPU memory (zero_stage 3 only)."
    )
    precision: Literal["bf16", "fp16", "fp32"] | None = Field(
        default=None,
        description="DeepSpeed's mixed precision; null follows the run's `precision`.",
    )
    overlap_comm: bool = Field(
        default=True, description="Overlap gradient reduction with the backward pass."
    )
    contiguous_gradients: bool = Field(
        default=True, description="Copy gradients into one buffer as they are produced."
    )
    reduce_bucket_size: int = Field(
        default=500_000_000, ge=1, description="Elements reduced at a time."
    )

    @model_validator(mode="after")
    def _offload_param_needs_stage_3(self) -> DeepSpeedConfig:
        if self.offload_param != "none" and self.zero_stage != 3:
            raise ValueError(
                "`offload_param` needs `zero_stage: 3` (only ZeRO-3 shards parameters)"
            )
        return self


class TrainConfig(_Strict):
    """A training run, from a dataset version to a registered model version."""

    name: str = Field(description="Run and registered-model name.")
    data: DataConfig
    model: ModelConfig
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    epochs: int | None = Field(default=None, ge=1, description="Passes over the train split.")
    max_steps: int | None = Field(default=None, ge=1, description="Optimiser steps in all.")
    batch_size: int = Field(default=64, ge=1, description="Global batch size per step.")
    precision: Literal["fp32", "bf16"] = Field(default="fp32", description="Autocast dtype.")
    grad_accum: int = Field(default=1, ge=1, description="Micro-batches per optimiser step.")
    clip_grad_norm: float | None = Field(default=None, gt=0, description="Max gradient norm.")
    seed: int = Field(default=0, ge=0, description="Seed of data order and initialisation.")
    metrics: list[str] = Field(
        default_factory=list, description="Extra evaluation metrics (defaults fit the task)."
    )
    eval_every_steps: int | None = Field(
        default=None, ge=1, description="Evaluate every N steps (default: each epoch)."
    )
    log_every_steps: int = Field(
        default=10,
        ge=1,
        description="Send training metrics to tracking every N steps, as means over the N.",
    )
    early_stopping: EarlyStoppingConfig | None = None
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    workers: int = Field(default=1, ge=1, description="Processes (DDP through torchrun).")
    strategy: Literal["ddp", "fsdp", "deepspeed"] = Field(
        default="ddp",
        description="Distributed strategy when workers > 1 (fsdp, deepspeed: GPU only).",
    )
    deepspeed: DeepSpeedConfig | None = Field(
        default=None, description="DeepSpeed ZeRO settings (strategy: deepspeed)."
    )
    lora: LoraConfig | None = Field(default=None, description="LoRA fine-tuning (finetune).")
    distill: DistillConfig | None = Field(default=None, description="Distillation mode.")
    register_model: bool = Field(
        default=True, description="Register the final model version in the model registry."
    )

    @model_validator(mode="after")
    def _one_length(self) -> TrainConfig:
        if (self.epochs is None) == (self.max_steps is None):
            raise ValueError("give exactly one of `epochs` and `max_steps`")
        if self.batch_size % self.grad_accum:
            raise ValueError("`batch_size` must be a multiple of `grad_accum`")
        if self.deepspeed is not None and self.strategy != "deepspeed":
            raise ValueError("a `deepspeed` section needs `strategy: deepspeed`")
        return self


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `path.to.key=value` overrides (values parsed as YAML) to a config mapping."""
    for item in overrides:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            raise UsageError(f"--set '{item}' is not of the form key.path=value.")
        node = data
        keys = path.split(".")
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise UsageError(f"--set '{item}': '{key}' is not a section of the config.")
            node = child
        node[keys[-1]] = yaml.safe_load(raw)
    return data


def load_config(path: str, overrides: list[str] | None = None) -> TrainConfig:
    """Read, override and validate a training config file."""
    data = load_yaml(path) or {}
    if not isinstance(data, dict):
        return parse_model(TrainConfig, data, path)
    return parse_model(TrainConfig, apply_overrides(data, overrides or []), path)
