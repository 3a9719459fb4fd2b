"""DeepSpeed ZeRO for `strategy: deepspeed`: its JSON config, the GPU check, its checkpoints.

DeepSpeed is the optional `deepspeed` extra and is imported only inside the functions that
need it. Three plain pieces live here:

- `deepspeed_json` translates a validated `TrainConfig` into DeepSpeed's JSON config, in one
  place, so the YAML the user writes is forgeml's and never DeepSpeed's own.
- `check_deepspeed_runtime` stops a run before any worker starts on a machine without CUDA
  or without the package (ZeRO's collectives and fused optimisers are GPU code).
- `zero_to_state_dict` rebuilds full fp32 weights from a ZeRO checkpoint's model and
  optimiser states, following DeepSpeed's `utils/zero_to_fp32.py` (stages 1-2: each rank
  holds a slice of one flat fp32 buffer per parameter group; stage 3: each parameter is
  split on its own into `ceil(numel / world_size)` elements per rank, the last padded);
  `convert_zero_checkpoint` writes them as forgeml's `model.safetensors`, so resume,
  optimisation and serving do not care which strategy trained a model.
"""

from __future__ import annotations

import importlib.util
import math
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from forgeml.core.errors import ConfigError
from forgeml.train.checkpoint import CheckpointError
from forgeml.train.config import DeepSpeedConfig, TrainConfig

# DeepSpeed prints a progress line every N steps; forgeml logs its own metrics
_NEVER_PRINT = 2**31 - 1
_OPTIMIZERS = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD"}


def deepspeed_json(config: TrainConfig, world_size: int) -> dict[str, Any]:
    """DeepSpeed's JSON config for `config` run on `world_size` GPUs.

    Args:
        config: A validated training config with `strategy: deepspeed`.
        world_size: The number of ranks (GPUs) of the job.

    Returns:
        The mapping `deepspeed.initialize(config=...)` takes.

    Raises:
        ConfigError: `batch_size` does not split into `grad_accum` micro-batches per rank.
    """
    section = config.deepspeed or DeepSpeedConfig()
    per_step = config.grad_accum * world_size
    if config.batch_size % per_step:
        raise ConfigError(
            f"batch_size {config.batch_size} must be a multiple of grad_accum x workers "
            f"({config.grad_accum} x {world_size}) for strategy deepspeed."
        )
    precision = section.precision or config.precision
    return {
        "train_batch_size": config.batch_size,
        "train_micro_batch_size_per_gpu": config.batch_size // per_step,
        "gradient_accumulation_steps": config.grad_accum,
        "gradient_clipping": config.clip_grad_norm or 0.0,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16"},
        "optimizer": _optimizer_json(config),
        "zero_optimization": _zero_json(section),
        "steps_per_print": _NEVER_PRINT,
        "wall_clock_breakdown": False,
    }


def _optimizer_json(config: TrainConfig) -> dict[str, Any]:
    options = config.optimizer
    params: dict[str, Any] = {"lr": options.lr, "weight_decay": options.weight_decay}
    if options.name == "sgd":
        params["momentum"] = options.momentum
    return {"type": _OPTIMIZERS[options.name], "params": params}


def _zero_json(section: DeepSpeedConfig) -> dict[str, Any]:
    zero: dict[str, Any] = {
        "stage": section.zero_stage,
        "overlap_comm": section.overlap_comm,
        "contiguous_gradients": section.contiguous_gradients,
        "reduce_bucket_size": section.reduce_bucket_size,
    }
    # pinned host memory makes the host-device copies of offloaded tensors asynchronous
    if section.offload_optimizer == "cpu":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if section.offload_param == "cpu":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return zero


def check_deepspeed_runtime(*, cuda: bool | None = None) -> None:
    """Refuse a DeepSpeed run this machine cannot do, before any worker starts.

    Args:
        cuda: Whether CUDA is usable; None asks torch.

    Raises:
        ConfigError: No CUDA device, or the `deepspeed` package is not installed.
    """
    if cuda is None:
        cuda = torch.cuda.is_available()
    if not cuda:
        raise ConfigError(
            "strategy deepspeed needs a CUDA GPU and this machine has none; "
            "use strategy ddp on CPU."
        )
    if importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            "strategy deepspeed needs the deepspeed package: pip install 'forgeml[deepspeed]'."
        )


def zero_to_state_dict(
    model_states: Mapping[str, Any], optim_states: Sequence[Mapping[str, Any]]
) -> dict[str, torch.Tensor]:
    """Full fp32 weights from a ZeRO checkpoint's states (DeepSpeed's zero_to_fp32 logic).

    Args:
        model_states: `mp_rank_00_model_states.pt`: `param_shapes` (one ordered
            {name: shape} per parameter group), `buffer_names`, `module` (its buffers),
            optionally `shared_params` ([alias, name] pairs for tied weights).
        optim_states: Each rank's `zero_pp_rank_R_mp_rank_00_optim_states.pt`, rank order.

    Returns:
        {name: fp32 tensor} of every parameter and buffer, tied names included.

    Raises:
        CheckpointError: The states are not a ZeRO checkpoint of stage 1-3, or their sizes
            do not add up.
    """
    try:
        inner = [state["optimizer_state_dict"] for state in optim_states]
        stage = int(inner[0]["zero_stage"])
        shapes: list[Mapping[str, Any]] = list(model_states["param_shapes"])
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise CheckpointError(f"Not a DeepSpeed ZeRO checkpoint: missing {error}.") from None
    if stage in (1, 2):
        weights = _merge_flat_partitions(
            shapes, [s["single_partition_of_fp32_groups"] for s in inner]
        )
    elif stage == 3:
        weights = _merge_param_partitions(shapes, [s["fp32_flat_groups"] for s in inner])
    else:
        raise CheckpointError(f"ZeRO stage {stage} is not 1, 2 or 3.")
    module = model_states.get("module") or {}
    for name in model_states.get("buffer_names", []):
        weights[name] = module[name].float()
    for alias, name in model_states.get("shared_params", []):
        weights[alias] = weights[name]
    return weights


def _merge_flat_partitions(
    shapes: list[Mapping[str, Any]], partitions: list[list[torch.Tensor]]
) -> dict[str, torch.Tensor]:
    weights: dict[str, torch.Tensor] = {}
    for group, group_shapes in enumerate(shapes):
        # stage 1-2 pad each group's flat buffer for alignment: the tail past the last
        # parameter is padding, never a parameter's
        flat = torch.cat([rank_groups[group] for rank_groups in partitions])
        offset = 0
        for name, shape in group_shapes.items():
            numel = math.prod(shape)
            if offset + numel > flat.numel():
                raise CheckpointError(f"ZeRO checkpoint too short for parameter '{name}'.")
            weights[name] = flat[offset : offset + numel].view(tuple(shape)).clone()
            offset += numel
    return weights


def _merge_param_partitions(
    shapes: list[Mapping[str, Any]], partitions: list[list[torch.Tensor]]
) -> dict[str, torch.Tensor]:
    world_size = len(partitions)
    # stage 3 flattens every group into one buffer per rank, parameters in group order
    flats = [torch.cat([group.flatten() for group in rank_groups]) for rank_groups in partitions]
    weights: dict[str, torch.Tensor] = {}
    offset = 0
    for name, shape in ((n, s) for group in shapes for n, s in group.items()):
        numel = math.prod(shape)
        part = math.ceil(numel / world_size)
        if offset + part > flats[0].numel():
            raise CheckpointError(f"ZeRO checkpoint too short for parameter '{name}'.")
        full = torch.cat([flat[offset : offset + part] for flat in flats])
        weights[name] = full[:numel].view(tuple(shape)).clone()
        offset += part
    return weights


def convert_zero_checkpoint(tag_dir: Path, out_dir: Path) -> Path:
    """Write a DeepSpeed ZeRO checkpoint folder's weights as forgeml's `model.safetensors`.

    Args:
        tag_dir: One checkpoint of `engine.save_checkpoint` (e.g. `ckpt/global_step120`).
        out_dir: Where `model.safetensors` goes (created if missing).

    Returns:
        The path of the written `model.safetensors`.

    Raises:
        CheckpointError: The folder holds no readable ZeRO checkpoint.
    """
    rank_files = sorted(tag_dir.glob("*_optim_states.pt"), key=lambda path: _rank_of(path.name))
    if not rank_files:
        raise CheckpointError(f"{tag_dir} holds no DeepSpeed optimiser states.")
    # stages 1-2 keep one model-states file; stage 3 one per rank, rank 0's with the shapes
    model_states = tag_dir / "mp_rank_00_model_states.pt"
    if not model_states.exists():
        model_states = tag_dir / "zero_pp_rank_0_mp_rank_00_model_states.pt"
    weights = zero_to_state_dict(
        _load_plain(model_states), [_load_plain(path) for path in rank_files]
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "model.safetensors"
    # safetensors refuses tensors sharing memory: tied weights are stored once each
    save_file({name: tensor.contiguous().clone() for name, tensor in weights.items()}, target)
    return target


def _rank_of(file_name: str) -> int:
    # [bf16_]zero_pp_rank_<R>_mp_rank_00_optim_states.pt
    _, found, rest = file_name.partition("zero_pp_rank_")
    digits = rest.split("_", 1)[0] if found else ""
    return int(digits) if digits.isdigit() else 0


def _load_plain(path: Path) -> dict[str, Any]:
    # weights_only: a checkpoint is data, never code (DESIGN.md: no untrusted pickles)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, pickle.UnpicklingError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CheckpointError(f"Cannot read {path} as plain tensors: {first}") from None
    if not isinstance(loaded, dict):
        raise CheckpointError(f"{path} is not a DeepSpeed state mapping.")
    return loaded
