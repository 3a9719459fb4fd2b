from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from forgeml.train.config import OptimizerConfig, ScheduleConfig
from forgeml.train.schedule import build_optimizer, build_scheduler, lr_multiplier


@pytest.mark.parametrize(
    ("name", "step", "expected"),
    [
        ("constant", 0, 0.25),  # warm-up: (step + 1) / 4
        ("constant", 3, 1.0),
        ("constant", 13, 1.0),
        ("linear", 4, 1.0),  # warm-up over; progress (4 - 4) / 10 = 0
        ("linear", 9, 0.5),  # progress 5 / 10
        ("linear", 13, 0.1),
        ("cosine", 1, 0.5),
        ("cosine", 4, 1.0),
        ("cosine", 9, 0.5),  # (1 + cos(pi / 2)) / 2
        ("cosine", 11, (1 + math.cos(math.pi * 0.7)) / 2),
    ],
)
def test_lr_multiplier_at_known_steps(name: str, step: int, expected: float) -> None:
    assert lr_multiplier(step, name, warmup_steps=4, total_steps=14) == pytest.approx(expected)


def test_no_warm_up_starts_at_the_peak() -> None:
    assert lr_multiplier(0, "cosine", warmup_steps=0, total_steps=10) == 1.0


def test_scheduler_sets_the_lr_of_each_optimiser_step() -> None:
    model = nn.Linear(2, 1)
    optimizer = build_optimizer(model, OptimizerConfig(name="sgd", lr=0.1))
    scheduler = build_scheduler(optimizer, ScheduleConfig(name="linear", warmup_steps=2), 6)
    used = []
    for _ in range(6):
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert used == pytest.approx([0.05, 0.1, 0.1, 0.075, 0.05, 0.025])


def test_weight_decay_skips_biases_and_norms_and_frozen_parameters() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    model[2].weight.requires_grad_(False)
    optimizer = build_optimizer(model, OptimizerConfig(weight_decay=0.1))
    assert isinstance(optimizer, torch.optim.AdamW)
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert [tuple(p.shape) for p in decayed["params"]] == [(4, 3)]
    assert [tuple(p.shape) for p in plain["params"]] == [(4,), (4,), (4,), (2,)]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("adamw", torch.optim.AdamW), ("adam", torch.optim.Adam), ("sgd", torch.optim.SGD)],
)
def test_optimizer_by_name(name: str, kind: type[torch.optim.Optimizer]) -> None:
    optimizer = build_optimizer(nn.Linear(2, 2), OptimizerConfig(name=name, lr=0.3, momentum=0.5))
    assert type(optimizer) is kind
    assert optimizer.param_groups[0]["lr"] == 0.3
    assert len(optimizer.param_groups) == 1  # no weight decay: one group
    if name == "sgd":
        assert optimizer.param_groups[0]["momentum"] == 0.5


def test_adam_on_cpu_is_fused_and_steps_as_the_plain_kernels_do() -> None:
    torch.manual_seed(0)
    fused_model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    plain_model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    plain_model.load_state_dict(fused_model.state_dict())
    fused = build_optimizer(fused_model, OptimizerConfig(name="adamw", lr=0.01, weight_decay=0.1))
    plain = torch.optim.AdamW(
        [
            {"params": [p for p in plain_model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in plain_model.parameters() if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=0.01,
    )
    assert fused.defaults["fused"] is True and not plain.defaults["fused"]
    inputs, targets = torch.randn(32, 6), torch.randint(0, 3, (32,))
    for _ in range(5):
        for model, optimizer in ((fused_model, fused), (plain_model, plain)):
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    for ours, reference in zip(fused_model.parameters(), plain_model.parameters(), strict=True):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
