"""One optimiser step, as plain functions: the batch plan, the micro-batches, the loss.

`fit` (loop.py) calls these in order each step: `micro_batch_rows` picks this rank's rows of
the global batch, `accumulate_gradients` runs forward and backward over the `grad_accum`
micro-steps (gradients all-reduced once, on the last), `clip_gradients`, then
`step_statistics` makes the step's one host-device sync. Under `strategy: deepspeed` the
model is DeepSpeed's engine: `engine.backward` replaces `loss.backward`, and the engine
clips in its own step. Data order is a pure function of (seed, epoch) (`epoch_order`),
which is what makes resume and the DDP equivalence exact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.config import DistillConfig, TrainConfig
from forgeml.train.distill import distillation_loss, predict_teacher
from forgeml.train.task import SplitData, TaskData, TaskKind

if TYPE_CHECKING:
    from forgeml.train.models import Objective


@dataclass(frozen=True)
class DistContext:
    """This process's place in a (possibly distributed) job.

    With `world_size > 1` the caller has initialised the process group and passes the
    model already wrapped (DDP, or FSDP2's `fully_shard`) and placed on `device`.
    """

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0


@dataclass(frozen=True)
class BatchPlan:
    """How the train split is cut into optimiser steps."""

    steps_per_epoch: int
    total_steps: int
    micro_batch: int  # rows per rank per micro-step


def plan_batches(config: TrainConfig, train_rows: int, world_size: int) -> BatchPlan:
    """Steps per epoch, total steps and the per-rank micro-batch size.

    Raises:
        ConfigError: The batch does not split evenly, or exceeds the train split.
    """
    per_micro_step = config.batch_size // config.grad_accum
    if per_micro_step % world_size:
        raise ConfigError(
            f"batch_size {config.batch_size} / grad_accum {config.grad_accum} = "
            f"{per_micro_step} rows per micro-step cannot be split evenly over {world_size} "
            "workers; make batch_size a multiple of grad_accum * workers."
        )
    steps_per_epoch = train_rows // config.batch_size
    if steps_per_epoch == 0:
        raise ConfigError(
            f"batch_size {config.batch_size} is larger than the {train_rows} training rows; "
            "lower batch_size."
        )
    total = (
        config.max_steps if config.max_steps is not None else steps_per_epoch * (config.epochs or 1)
    )
    return BatchPlan(steps_per_epoch, total, per_micro_step // world_size)


def epoch_order(rows: int, seed: int, epoch: int) -> torch.Tensor:
    """The order in which epoch `epoch` visits the train rows (same on every rank)."""
    return torch.randperm(rows, generator=torch.Generator().manual_seed(seed + epoch))


def micro_batch_rows(
    order: torch.Tensor,
    batch_index: int,
    micro_step: int,
    plan: BatchPlan,
    dist: DistContext,
    grad_accum: int,
) -> torch.Tensor:
    """Row ids of this rank's share of one micro-step of global batch `batch_index`."""
    per_micro_step = plan.micro_batch * dist.world_size
    start = batch_index * per_micro_step * grad_accum + micro_step * per_micro_step
    start += dist.rank * plan.micro_batch
    return order[start : start + plan.micro_batch]


def accumulate_gradients(
    model: nn.Module,
    data: TaskData,
    order: torch.Tensor,
    batch_index: int,
    plan: BatchPlan,
    dist: DistContext,
    config: TrainConfig,
    teacher: nn.Module | None,
    objective: Objective | None = None,
) -> torch.Tensor:
    """Forward and backward over the `grad_accum` micro-steps of one global batch.

    The loss is the task's (`compute_loss`), or the model family's own `objective`'s.

    Returns:
        The detached mean loss of this rank's rows (no device sync here).
    """
    accum = config.grad_accum
    # a DeepSpeed engine casts the model itself (its bf16/fp16 section)
    precision = "fp32" if is_engine(model) else config.precision
    losses: list[torch.Tensor] = []
    for micro_step in range(config.grad_accum):
        rows = micro_batch_rows(order, batch_index, micro_step, plan, dist, config.grad_accum)
        inputs, targets = _gather(data.train, rows, dist.device)
        last = micro_step == config.grad_accum - 1
        # gradients are all-reduced once per optimiser step, not per micro-step
        with _gradient_sync(model, last), _autocast(dist.device, precision):
            if objective is None:
                logits = model(**inputs)
                teacher_logits = None if teacher is None else predict_teacher(teacher, inputs)
            else:
                own_loss = objective.loss(model, inputs, targets)
        if objective is None:
            loss = compute_loss(data.task, logits, targets, teacher_logits, config.distill)
        else:
            loss = own_loss.float()
        _backward(model, loss, accum, last)
        losses.append(loss.detach())
    return losses[0] if accum == 1 else torch.stack(losses).mean()


def _backward(model: nn.Module, loss: torch.Tensor, accum: int, last: bool) -> None:
    if not is_engine(model):
        (loss / accum if accum > 1 else loss).backward()
        return
    model.backward(loss)  # type: ignore[operator]  # DeepSpeed divides by grad_accum itself
    if not last:
        # counts the micro-step: the engine reduces gradients and steps at the last one only
        model.step()  # type: ignore[operator]


def is_engine(model: nn.Module) -> bool:
    """Whether `model` is a DeepSpeed engine, which owns backward and the optimiser step."""
    return type(model).__module__.startswith("deepspeed.")


def compute_loss(
    task: TaskKind,
    logits: torch.Tensor,
    targets: torch.Tensor,
    teacher_logits: torch.Tensor | None = None,
    distill: DistillConfig | None = None,
) -> torch.Tensor:
    """The training loss of one micro-batch, a mean over its rows (tokens for LMs).

    Classification and language modelling: cross-entropy (-100 targets are ignored);
    regression: mean squared error; with a teacher: the distillation loss.
    """
    logits = logits.float()  # losses in fp32 even under bf16 autocast
    if teacher_logits is not None and distill is not None:
        return distillation_loss(
            logits, teacher_logits, targets, distill.temperature, distill.alpha
        )
    if task == "regression":
        return F.mse_loss(logits.reshape(targets.shape), targets.float())
    if logits.dim() > 2:  # [B, T, vocab] -> [B*T, vocab] (views cost autograd nodes: only here)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return F.cross_entropy(logits, targets)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's module inside a DDP wrapper (FSDP2 shards in place, no wrapper)."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.module
    return model


def _gather(
    split: SplitData, rows: torch.Tensor, device: torch.device
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    inputs = {
        name: tensor[rows].to(device, non_blocking=True) for name, tensor in split.inputs.items()
    }
    return inputs, split.targets[rows].to(device, non_blocking=True)


def _gradient_sync(model: nn.Module, enabled: bool) -> contextlib.AbstractContextManager[None]:
    if enabled:
        return contextlib.nullcontext()
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        return _fsdp_no_sync(model)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _fsdp_no_sync(model: nn.Module) -> Iterator[None]:
    model.set_requires_gradient_sync(False)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)  # type: ignore[operator]


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[None]:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def clip_gradients(parameters: list[nn.Parameter], max_norm: float | None) -> torch.Tensor | None:
    """Clip the total gradient norm to `max_norm` (no-op when None); the norm before it."""
    if max_norm is None:
        return None
    return nn.utils.clip_grad_norm_(parameters, max_norm)


def step_statistics(
    loss: torch.Tensor,
    grad_norm: torch.Tensor | None,
    should_stop: Callable[[], bool] | None,
    dist: DistContext,
) -> tuple[float, float | None, bool]:
    """Loss, gradient norm and the stop request of this step, in one device sync.

    With several ranks one all-reduce averages the loss over ranks (the loss of the global
    batch) and shares the stop request, so all ranks stop at the same step.
    """
    stop = should_stop is not None and should_stop()
    if dist.world_size == 1 and grad_norm is None:
        return loss.item(), None, stop
    if grad_norm is not None and hasattr(grad_norm, "full_tensor"):
        grad_norm = grad_norm.full_tensor()  # FSDP2: a replicated DTensor
    norm = torch.zeros_like(loss) if grad_norm is None else grad_norm.to(loss.device)
    stats = torch.stack([loss, norm, torch.full_like(loss, float(stop))])
    if dist.world_size > 1:
        import torch.distributed as torch_dist

        torch_dist.all_reduce(stats)  # sum over ranks
        stats[:2] /= dist.world_size
    loss_value, norm_value, stops = stats.tolist()
    return loss_value, (norm_value if grad_norm is not None else None), stops > 0
