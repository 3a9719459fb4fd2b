"""One training run, top to bottom: data -> model -> (LoRA, distributed) -> fit -> bundle.

The tracking layer wraps this with a run record, a heartbeat and the model registry;
this module knows nothing about them (it receives a MetricLogger).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from forgeml.train.checkpoint import CheckpointError
from forgeml.train.config import TrainConfig
from forgeml.train.data import load_task_data
from forgeml.train.logger import MetricLogger
from forgeml.train.loop import FitResult, fit, own_objective_error
from forgeml.train.models import build_model, family_of, family_record, get_family
from forgeml.train.step import DistContext

if TYPE_CHECKING:
    from torch import nn

    from forgeml.core.workspace import Workspace
    from forgeml.train.task import TaskData

BUNDLE_FORMAT = 1


@dataclass
class TrainOutcome:
    """What a finished run hands to the registry."""

    result: FitResult
    bundle_dir: Path
    meta: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The JSON outcome a worker hands back to the run (metrics, steps, preempted)."""
        metrics: dict[str, Any] = dict(self.result.final_metrics)
        if self.result.confusion_matrices:
            metrics["confusion_matrix"] = self.result.confusion_matrices
        return {
            "metrics": metrics,
            "fairness": self.result.fairness,
            "steps": self.result.steps,
            "preempted": self.result.preempted,
            "stopped_early": self.result.stopped_early,
            "data": self.meta,
        }


def prepare_model(config: TrainConfig, task: TaskData) -> nn.Module:
    """Build the configured model, LoRA-wrapped when the config asks for it."""
    model = build_model(config.model.name, task, config.model.params)
    if config.lora is not None:
        from forgeml.train.lora import apply_lora

        model = apply_lora(model, config.lora)
    return model


def check_workers(config: TrainConfig) -> None:
    """Refuse, before any worker starts, a run the model family or this machine cannot do.

    Raises:
        ConfigError: the family trains with its own objective and `workers` is above 1;
            `strategy: deepspeed` without CUDA or without the deepspeed package.
    """
    if config.strategy == "deepspeed":
        from forgeml.train.deepspeed import check_deepspeed_runtime

        check_deepspeed_runtime()
    if config.workers > 1 and get_family(config.model.name).objective is not None:
        raise own_objective_error(config.model.name)


def run(
    workspace: Workspace,
    config: TrainConfig,
    run_dir: Path,
    *,
    logger: MetricLogger,
    resume: bool = False,
    dist: DistContext | None = None,
    teacher: nn.Module | None = None,
    progress: Callable[[int, int, dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainOutcome:
    """Train `config` in this process (one rank of a distributed job, or alone)."""
    torch.manual_seed(config.seed)
    task = load_task_data(workspace, config)
    model = prepare_model(config, task)
    trained = model
    if config.strategy == "deepspeed" and dist is None:
        from forgeml.train.distributed import init_distributed

        dist = init_distributed()  # one process alone: on the first GPU
    # DeepSpeed drives its own engine even on one GPU; never train it silently without
    if config.strategy == "deepspeed" or (dist is not None and dist.world_size > 1):
        from forgeml.train.distributed import wrap_model

        trained = wrap_model(model, dist or DistContext(), config.strategy)
    result = fit(
        trained,
        task,
        config,
        run_dir=run_dir,
        logger=logger,
        resume=resume,
        teacher=teacher,
        dist=dist,
        progress=progress,
        should_stop=should_stop,
        objective=get_family(config.model.name).training_objective(config.model.params),
    )
    bundle_dir = run_dir / "bundle"
    if dist is None or dist.is_main:
        if config.strategy == "deepspeed":
            # the engine cast the model (bf16) or sharded it (ZeRO-3): the fp32 weights are
            # the final checkpoint's, rebuilt from ZeRO's shards
            model = _final_weights(config, task, run_dir)
        save_bundle(model, config, task, bundle_dir)
        spec_digest = task.meta.get("feature_spec_digest")
        if spec_digest:  # serving applies the very spec training applied
            (bundle_dir / "feature_spec.json").write_bytes(
                workspace.artifacts.get_bytes(spec_digest)
            )
    return TrainOutcome(result, bundle_dir, task.meta)


def _final_weights(config: TrainConfig, task: TaskData, run_dir: Path) -> nn.Module:
    from safetensors.torch import load_model

    from forgeml.train.checkpoint import load_latest

    final = load_latest(run_dir)
    if final is None:  # fit always checkpoints its last step
        raise CheckpointError(f"Run folder {run_dir} has no final checkpoint to bundle.")
    model = prepare_model(config, task)
    load_model(model, str(final.path / "model.safetensors"), strict=True)
    return model


def save_bundle(model: nn.Module, config: TrainConfig, task: TaskData, bundle_dir: Path) -> None:
    """Write the servable model: weights (safetensors), architecture and task description."""
    from safetensors.torch import save_model

    bundle_dir.mkdir(parents=True, exist_ok=True)
    description: dict[str, Any] = {
        "format_version": BUNDLE_FORMAT,
        "model": config.model.model_dump(mode="json"),
        "family": family_record(get_family(config.model.name)),
        "tokenizer": task.tokenizer,
        "task": task.task,
        "class_names": task.class_names,
        "num_classes": task.num_classes,
        "input_shape": list(task.input_shape),
        "vocab_size": task.vocab_size,
        "data": task.meta,
        "lora": config.lora.model_dump(mode="json") if config.lora else None,
        "base_model": _base_model(model),
    }
    if config.lora is not None:
        from forgeml.train.lora import merge_adapter, save_adapter

        description["adapter_bytes"] = save_adapter(model, bundle_dir / "adapter")
        if config.lora.merge:
            save_model(merge_adapter(model), str(bundle_dir / "model.safetensors"))
    else:
        # save_model handles tied weights (e.g. a GPT's embedding and output head)
        save_model(model, str(bundle_dir / "model.safetensors"))
    (bundle_dir / "model.json").write_text(json.dumps(description, indent=2, sort_keys=True))


def _base_model(model: nn.Module) -> dict[str, str] | str | None:
    """Where a fine-tuned model's pretrained weights came from: a package, not a path."""
    from forgeml.train.base_model import record_base

    base = getattr(model, "base_model", None)
    return record_base(base) if isinstance(base, str) and base else None


def load_bundle_model(bundle_dir: Path) -> nn.Module:
    """Rebuild a saved model from its bundle (architecture from model.json, safetensors weights).

    LoRA bundles without merged weights are rebuilt from the base and their adapter. A base
    recorded as an installed package is loaded from that package here, once checked.
    """
    from safetensors.torch import load_model

    from forgeml.train.base_model import resolve_base
    from forgeml.train.task import SplitData, TaskData

    description = json.loads((bundle_dir / "model.json").read_text())
    empty = SplitData({}, torch.empty(0))
    task = TaskData(
        task=description["task"],
        train=empty,
        num_classes=description["num_classes"],
        class_names=description["class_names"],
        input_shape=tuple(description["input_shape"]),
        vocab_size=description["vocab_size"],
        tokenizer=description.get("tokenizer"),
    )
    params = dict(description["model"]["params"])
    base = resolve_base(description.get("base_model"))
    if base is not None:  # the training machine's path to it may not exist here
        params["pretrained"] = base
    model = family_of(description).build(task, params)
    weights = bundle_dir / "model.safetensors"
    if weights.exists():
        load_model(model, str(weights))
    else:
        from forgeml.train.lora import load_adapter

        model = load_adapter(model, bundle_dir / "adapter")
    model.eval()
    return model
