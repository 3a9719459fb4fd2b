"""Knowledge distillation loss (Hinton, Vinyals & Dean 2015, "Distilling the Knowledge
in a Neural Network").

The student learns from the hard labels and from the teacher's softened distribution:

    loss = (1 - alpha) * CE(student, y) + alpha * T^2 * KL(p_teacher^T || p_student^T)

where p^T = softmax(logits / T). The T^2 factor keeps the soft term's gradient scale
independent of the temperature (section 2 of the paper).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)
from torch import nn


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    alpha: float,
) -> torch.Tensor:
    """The combined hard-label and soft-teacher loss, averaged over rows.

    Args:
        student_logits: [B, C] (or [B, T, C] for language models) student logits.
        teacher_logits: Teacher logits of the same shape (no gradient flows into them).
        targets: [B] (or [B, T]) class ids.
        temperature: Softmax temperature T > 0 of the soft term.
        alpha: Weight of the soft term in [0, 1].

    Returns:
        A scalar loss tensor.
    """
    classes = student_logits.shape[-1]
    student = student_logits.reshape(-1, classes).float()
    teacher = teacher_logits.reshape(-1, classes).float().detach()
    hard = F.cross_entropy(student, targets.reshape(-1))
    soft = F.kl_div(
        F.log_softmax(student / temperature, dim=-1),
        F.log_softmax(teacher / temperature, dim=-1),
        reduction="batchmean",  # KL summed over classes, averaged over rows
        log_target=True,
    )
    return (1.0 - alpha) * hard + alpha * temperature**2 * soft


def predict_teacher(teacher: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The teacher's logits for a batch, without building a graph (it is never trained)."""
    with torch.no_grad():
        return teacher(**inputs)
