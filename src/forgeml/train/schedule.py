"""The optimiser and its learning-rate schedule, built from the config.

The schedule is a multiplier of the peak LR per optimiser step: linear warm-up, then
constant, linear decay or cosine decay (Loshchilov & Hutter 2017, without restarts).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from forgeml.train.config import OptimizerConfig, ScheduleConfig


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """Split the trainable parameters into a decayed and a non-decayed group.

    Matrices and embeddings (2 or more dimensions) decay; biases and norm scales do not,
    as in nanoGPT and most transformer recipes. Frozen parameters (LoRA's base) are left out.

    Args:
        model: The (unwrapped) model.
        weight_decay: Decoupled weight decay of the first group.

    Returns:
        Parameter groups for a `torch.optim.Optimizer`.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    if weight_decay == 0:
        return [{"params": trainable, "weight_decay": 0.0}]  # one group: fewer kernel launches
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    groups: list[dict[str, object]] = []
    if decay:
        groups.append({"params": decay, "weight_decay": weight_decay})
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


# devices where torch's fused Adam/AdamW kernels run (torch >= 2.4 on CPU)
_FUSED_ADAM_DEVICES = frozenset({"cpu", "cuda"})


def build_optimizer(
    model: nn.Module, config: OptimizerConfig, device_type: str = "cpu"
) -> torch.optim.Optimizer:
    """The configured optimiser over the trainable parameters of `model`.

    Args:
        model: The (unwrapped) model.
        config: Optimiser name, peak LR, weight decay and momentum.
        device_type: "cpu" and "cuda" select the fused Adam kernels: one kernel per
            parameter tensor instead of a dozen (on CPU, ~0.3 ms instead of ~1 ms of a
            180k-parameter MLP's step here).

    Returns:
        The optimiser, its LR at the peak value (the schedule scales it).
    """
    groups = parameter_groups(model, config.weight_decay)
    # the first optimiser a process builds imports torch._dynamo (torch wraps
    # Optimizer.add_param_group in torch._disable_dynamo, which imports it on first call):
    # 3-4 s of a training job's start on a near-idle 2-core machine, 10-15 s at a load
    # of 9, for every optimiser, fused, foreach or neither; no documented option avoids it
    fused = True if device_type in _FUSED_ADAM_DEVICES else None
    if config.name == "adamw":
        return torch.optim.AdamW(groups, lr=config.lr, fused=fused)
    if config.name == "adam":
        # Adam's weight decay is the coupled L2 penalty; AdamW is the decoupled one
        return torch.optim.Adam(groups, lr=config.lr, fused=fused)
    return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum)


def lr_multiplier(step: int, name: str, warmup_steps: int, total_steps: int) -> float:
    """The factor applied to the peak LR for optimiser step `step` (0-based).

    Warm-up rises linearly to 1 over `warmup_steps` steps ((step + 1) / warmup_steps, so
    the first step already learns). After it, `progress` runs from 0 at the end of the
    warm-up to 1 at `total_steps`; linear decays as 1 - progress, cosine as
    (1 + cos(pi * progress)) / 2, constant stays at 1.

    Args:
        step: Index of the optimiser step about to be taken.
        name: "constant", "linear" or "cosine".
        warmup_steps: Length of the linear warm-up.
        total_steps: Optimiser steps of the whole run.

    Returns:
        The multiplier, in (0, 1].
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if name == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if name == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: ScheduleConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-optimiser-step schedule (call `.step()` after each `optimizer.step()`).

    Args:
        optimizer: The optimiser whose LR is scheduled.
        config: Schedule name and warm-up length.
        total_steps: Optimiser steps of the whole run.

    Returns:
        A `LambdaLR`; its state_dict holds only plain values (the lambda is not saved).
    """

    def multiplier(step: int) -> float:
        return lr_multiplier(step, config.name, config.warmup_steps, total_steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
