"""DeepSpeed's engine in `fit`: its arguments, its start, and its checkpoints in forgeml's format.

`fit` (loop.py) calls `start_engine` for `strategy: deepspeed` after building forgeml's own
optimiser and LR schedule; DeepSpeed wraps them in ZeRO (stages 1-3, optimiser state and
parameters optionally offloaded to the CPU) and from then on owns backward, clipping and
the optimiser step (`engine.backward`, `engine.step`). The optimiser and schedule are
forgeml's, not DeepSpeed's JSON ones, so both strategies follow the same LR curve and no
fused op has to be compiled on the GPU machine.

A checkpoint is forgeml's (`checkpoint.py`: `step-N/` with `model.safetensors`,
`rng.safetensors`, `state.json`, renamed into place atomically) plus DeepSpeed's shards in
`step-N/zero/`, from which resume restores the optimiser state. Every rank writes its own
shards into the same staging folder; rank 0 then rebuilds the full fp32 weights from them
(`deepspeed.convert_zero_checkpoint`), so resume, optimisation and serving read one
`model.safetensors` whatever strategy trained the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from forgeml.train.checkpoint import (
    Checkpoint,
    CheckpointError,
    TrainState,
    commit_checkpoint,
    staging_folder,
    write_resume_files,
)
from forgeml.train.config import DeepSpeedConfig, TrainConfig
from forgeml.train.deepspeed import convert_zero_checkpoint, deepspeed_json
from forgeml.train.step import DistContext

ZERO_TAG = "zero"  # DeepSpeed's checkpoint tag: its shards go to step-N/zero/


@dataclass(frozen=True)
class EngineArguments:
    """What `deepspeed.initialize` is given, beside the model, optimiser and schedule."""

    config: dict[str, Any]  # DeepSpeed's JSON config
    optimizer_device: str  # where the optimiser's state lives: "cpu" under offload
    autocast: bool  # False: DeepSpeed casts the model itself (bf16/fp16 sections)


def engine_arguments(config: TrainConfig, world_size: int, device_type: str) -> EngineArguments:
    """The arguments of `deepspeed.initialize` for `config` on `world_size` ranks.

    Args:
        config: A validated training config with `strategy: deepspeed`.
        world_size: The job's ranks (one GPU each).
        device_type: The ranks' device type ("cuda").

    Returns:
        DeepSpeed's config without an optimiser section (forgeml passes its own optimiser,
        which ZeRO partitions), where that optimiser keeps its state, and whether the loop
        autocasts (never: DeepSpeed's precision section casts the model).

    Raises:
        ConfigError: `batch_size` does not split into `grad_accum` micro-batches per rank.
    """
    ds = deepspeed_json(config, world_size)
    del ds["optimizer"]  # a client optimiser and a config one may not both be given
    # ZeRO refuses a client optimiser it has not tested (anything but its own Adam) unless
    # told; with offload it also wants its compiled CPU Adam, a C++ build the GPU machine
    # may not be able to make: torch's AdamW steps the offloaded fp32 partitions instead
    ds["zero_allow_untested_optimizer"] = True
    ds["zero_force_ds_cpu_optimizer"] = False
    section = config.deepspeed or DeepSpeedConfig()
    offloaded = section.offload_optimizer == "cpu"
    return EngineArguments(ds, "cpu" if offloaded else device_type, autocast=False)


def start_engine(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    arguments: EngineArguments,
) -> nn.Module:
    """Wrap `model`, its optimiser and LR schedule in a DeepSpeed engine (a collective).

    Under torchrun the process group is the job's (`init_distributed`); one process alone
    gets a group of one held in this process (DeepSpeed would otherwise look for MPI).

    Returns:
        The engine: call it as the model, then `engine.backward(loss)` and `engine.step()`.
    """
    import deepspeed

    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            "nccl", store=torch.distributed.HashStore(), rank=0, world_size=1
        )
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, lr_scheduler=scheduler, config=arguments.config
    )
    return cast(nn.Module, engine)


def save_zero_checkpoint(
    run_dir: Path, engine: Any, state: TrainState, keep: int, dist: DistContext
) -> Path | None:
    """Write a checkpoint of `engine` in forgeml's format, with its ZeRO shards; every rank
    calls it (each writes its shards), rank 0 converts, commits and returns the folder.

    Raises:
        CheckpointError: The shards cannot be written or converted (the last checkpoint
            is kept).
    """
    staging = staging_folder(run_dir, state.step, clear=dist.is_main)
    _barrier(dist)  # rank 0 cleared the folder before any rank writes into it
    try:
        engine.save_checkpoint(str(staging), tag=ZERO_TAG, save_latest=False)
    except (OSError, RuntimeError) as error:
        raise CheckpointError(f"DeepSpeed cannot write its checkpoint shards: {error}") from None
    _barrier(dist)  # every rank's shards are on disk
    if not dist.is_main:
        return None
    with allow_deepspeed_globals(staging / ZERO_TAG):
        convert_zero_checkpoint(staging / ZERO_TAG, staging)
    write_resume_files(staging, state)
    return commit_checkpoint(run_dir, staging, state, keep)


def restore_zero_checkpoint(checkpoint: Checkpoint, engine: Any) -> None:
    """Load weights, ZeRO optimiser state and LR schedule from `checkpoint` into `engine`.

    Raises:
        CheckpointError: The checkpoint has no DeepSpeed shards (another strategy wrote
            it) or they do not fit the engine.
    """
    if not (checkpoint.path / ZERO_TAG).is_dir():
        raise CheckpointError(
            f"Checkpoint {checkpoint.path} has no DeepSpeed shards (another strategy wrote "
            "it); resume with the strategy that wrote it, or start a new run."
        )
    loaded, _ = engine.load_checkpoint(
        str(checkpoint.path), tag=ZERO_TAG, load_optimizer_states=True,
        load_lr_scheduler_states=True,
    )  # fmt: skip
    if loaded is None:
        raise CheckpointError(f"DeepSpeed cannot load the shards of {checkpoint.path}.")
    checkpoint.restore_rng()


class allow_deepspeed_globals:  # noqa: N801 (a context manager, used like a function)
    """Let `torch.load(weights_only=True)` rebuild the few DeepSpeed classes its own shards
    hold (its loss scaler, the ZeRO stage enum): classes from the `deepspeed` package only,
    found in the files themselves; never functions, never anything else."""

    def __init__(self, folder: Path) -> None:
        self._classes = _deepspeed_classes(sorted(folder.glob("*.pt")))
        self._context: Any = None

    def __enter__(self) -> None:
        self._context = torch.serialization.safe_globals(self._classes)
        self._context.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(*exc)


def _deepspeed_classes(
    files: list[Path],
) -> list[Callable[..., Any] | tuple[Callable[..., Any], str]]:
    import importlib

    names = {
        name
        for path in files
        for name in torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    }
    classes: list[Callable[..., Any] | tuple[Callable[..., Any], str]] = []
    for name in sorted(names):
        module, _, attribute = name.rpartition(".")
        if not module.startswith("deepspeed."):
            continue  # anything else stays refused by weights_only
        found = getattr(importlib.import_module(module), attribute, None)
        if isinstance(found, type):
            classes.append(found)
    return classes


def _barrier(dist: DistContext) -> None:
    if dist.world_size > 1 or torch.distributed.is_initialized():
        torch.distributed.barrier()
