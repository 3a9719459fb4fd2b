from __future__ import annotations

import math

import pytest
import torch

from forgeml.train.distill import distillation_loss


def softmax(values: list[float], temperature: float = 1.0) -> list[float]:
    exps = [math.exp(v / temperature) for v in values]
    return [e / sum(exps) for e in exps]


def reference(
    student: list[list[float]],
    teacher: list[list[float]],
    targets: list[int],
    temperature: float,
    alpha: float,
) -> float:
    """Hinton et al. (2015) in plain Python: (1-a) CE + a T^2 KL(p_teacher || p_student)."""
    total = 0.0
    for s, t, y in zip(student, teacher, targets, strict=True):
        hard = -math.log(softmax(s)[y])
        p_t, p_s = softmax(t, temperature), softmax(s, temperature)
        soft = sum(pt * (math.log(pt) - math.log(ps)) for pt, ps in zip(p_t, p_s, strict=True))
        total += (1 - alpha) * hard + alpha * temperature**2 * soft
    return total / len(targets)


STUDENT = [[1.0, 2.0, 0.0], [0.5, -1.0, 2.5]]
TEACHER = [[0.5, 0.5, 3.0], [2.0, 0.0, 1.0]]
TARGETS = [1, 2]


@pytest.mark.parametrize(("temperature", "alpha"), [(2.0, 0.3), (1.0, 1.0), (4.0, 0.5)])
def test_matches_the_hand_computed_loss(temperature: float, alpha: float) -> None:
    loss = distillation_loss(
        torch.tensor(STUDENT), torch.tensor(TEACHER), torch.tensor(TARGETS), temperature, alpha
    )
    assert loss.item() == pytest.approx(reference(STUDENT, TEACHER, TARGETS, temperature, alpha))


def test_worked_example_value() -> None:
    # one row, T = 2, alpha = 0.5, computed by hand:
    # CE = -log softmax([1, 2, 0])[1] = 0.40760596
    # p_t = softmax([0.5, 0.5, 3] / 2) = [0.18213798, 0.18213798, 0.63572403]
    # p_s = softmax([1, 2, 0] / 2)     = [0.30719589, 0.50648039, 0.18632372]
    # KL = sum p_t log(p_t / p_s) = 0.49872701; loss = 0.5 * 0.40760596 + 0.5 * 4 * 0.49872701
    loss = distillation_loss(
        torch.tensor([[1.0, 2.0, 0.0]]),
        torch.tensor([[0.5, 0.5, 3.0]]),
        torch.tensor([1]),
        2.0,
        0.5,
    )
    assert loss.item() == pytest.approx(0.5 * 0.40760596 + 2.0 * 0.49872701, rel=1e-5)


def test_alpha_zero_is_plain_cross_entropy_and_a_perfect_copy_has_no_soft_loss() -> None:
    student, teacher = torch.tensor(STUDENT), torch.tensor(TEACHER)
    targets = torch.tensor(TARGETS)
    plain = torch.nn.functional.cross_entropy(student, targets)
    assert distillation_loss(student, teacher, targets, 3.0, 0.0).item() == pytest.approx(
        plain.item()
    )
    assert distillation_loss(student, student, targets, 3.0, 1.0).item() == pytest.approx(
        0.0, abs=1e-7
    )


def test_gradients_reach_the_student_only() -> None:
    student = torch.tensor(STUDENT, requires_grad=True)
    teacher = torch.tensor(TEACHER, requires_grad=True)
    distillation_loss(student, teacher, torch.tensor(TARGETS), 2.0, 0.5).backward()
    assert student.grad is not None and student.grad.abs().sum() > 0
    assert teacher.grad is None


def test_language_model_logits_average_over_tokens() -> None:
    student = torch.tensor([STUDENT])  # [B=1, T=2, V=3]
    teacher = torch.tensor([TEACHER])
    loss = distillation_loss(student, teacher, torch.tensor([TARGETS]), 2.0, 0.3)
    assert loss.item() == pytest.approx(reference(STUDENT, TEACHER, TARGETS, 2.0, 0.3))
