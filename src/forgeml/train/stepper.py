"""What `fit` steps: the model with its optimiser and LR schedule, or DeepSpeed's engine of them.

With `strategy: ddp` or `fsdp` the loop clips the gradients and steps the optimiser and
schedule itself; with `strategy: deepspeed` the same optimiser and schedule go into
DeepSpeed's engine (zero.py), which clips and steps them (ZeRO partitions the optimiser
state, the gradients and, at stage 3, the parameters). `Stepper` hides only that fork: the
loop in loop.py reads the same for every strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from forgeml.train.checkpoint import Checkpoint, TrainState, save_checkpoint
from forgeml.train.config import TrainConfig
from forgeml.train.schedule import build_optimizer, build_scheduler
from forgeml.train.step import BatchPlan, DistContext, clip_gradients, unwrap_model
from forgeml.train.zero import (
    engine_arguments,
    restore_zero_checkpoint,
    save_zero_checkpoint,
    start_engine,
)


@dataclass
class Stepper:
    """The trained model and what steps it."""

    model: nn.Module  # what runs forward and backward: the (DDP/FSDP) model or the engine
    raw_model: nn.Module  # the user's module (checkpoints, evaluation)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    engine: nn.Module | None = None  # DeepSpeed's engine under `strategy: deepspeed`

    @property
    def scored(self) -> nn.Module:
        """What evaluation runs: ZeRO-3 gathers its sharded parameters in the engine."""
        return self.raw_model if self.engine is None else self.engine

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def clip(self, max_norm: float | None) -> torch.Tensor | None:
        """Clip the gradients; the norm before (None: not clipped here, or not asked)."""
        if self.engine is not None:
            return None  # DeepSpeed clips inside its own step (`gradient_clipping`)
        trainable = [p for p in self.raw_model.parameters() if p.requires_grad]
        return clip_gradients(trainable, max_norm)

    def step(self) -> None:
        """The optimiser step, the schedule's step, and zeroed gradients."""
        if self.engine is not None:
            self.engine.step()  # type: ignore[operator]
            return
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def restore(self, checkpoint: Checkpoint) -> None:
        """Load a checkpoint of this run into the model, optimiser and schedule."""
        if self.engine is None:
            checkpoint.restore(self.raw_model, self.optimizer, self.scheduler)
        else:
            restore_zero_checkpoint(checkpoint, self.engine)

    def save(self, run_dir: Path, state: TrainState, keep: int, dist: DistContext) -> None:
        """Write a checkpoint; every rank calls it (FSDP gathers, ZeRO writes shards)."""
        if self.engine is not None:
            save_zero_checkpoint(run_dir, self.engine, state, keep, dist)
            return
        save_checkpoint(
            run_dir,
            model=self.raw_model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            state=state,
            keep=keep,
            write=dist.is_main,
        )


def start_stepper(
    model: nn.Module, config: TrainConfig, dist: DistContext, plan: BatchPlan
) -> Stepper:
    """The optimiser and schedule `config` names for `model`; DeepSpeed's engine around them
    under `strategy: deepspeed` (a collective: every rank calls it)."""
    raw_model = unwrap_model(model)
    zero = None
    if config.strategy == "deepspeed":
        zero = engine_arguments(config, dist.world_size, dist.device.type)
    device_type = zero.optimizer_device if zero else dist.device.type
    optimizer = build_optimizer(raw_model, config.optimizer, device_type)
    scheduler = build_scheduler(optimizer, config.schedule, plan.total_steps)
    if zero is None:
        return Stepper(model, raw_model, optimizer, scheduler)
    engine = start_engine(raw_model, optimizer, scheduler, zero)
    return Stepper(engine, raw_model, optimizer, scheduler, engine)
