"""The scoring paths of a knowledge-graph model as modules that export to ONNX.

Each takes long id tensors with a dynamic batch dimension, so one graph serves any batch:
- `TripleScores`: head, relation, tail [B] -> scores [B] (score a triple);
- `TailScores`: head, relation [B] -> scores [B, E] of every entity (rank tails).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from forgeml.train.models.kg._embedding import KGEmbedding

_EXPORT_FLOATS = 1 << 25  # 128 MB: one float32 [rows, entities, width] temporary of the graph


def export_rows(description: Mapping[str, Any]) -> int:
    """Rows one call of the exported `forward` should take: its [rows, entities, width]
    temporaries (several at once) stay near `_EXPORT_FLOATS` floats each.

    `description` is the bundle's model.json: the vocabulary (`tokenizer`) and `dim`; the
    width is bounded by RotatE's, 2 x dim (TransE's is dim).
    """
    entities = len((description.get("tokenizer") or {}).get("entities") or ()) or 1
    width = 2 * int(description["model"]["params"].get("dim", 200))
    return max(1, _EXPORT_FLOATS // (entities * width))


class TripleScores(nn.Module):
    """γ − d(h, t) of given triples."""

    def __init__(self, model: KGEmbedding) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, head: torch.Tensor, relation: torch.Tensor, tail: torch.Tensor
    ) -> torch.Tensor:
        return self.model.score(head, relation, tail)

    @staticmethod
    def example(rows: int = 2) -> dict[str, torch.Tensor]:
        """Inputs to trace the export with (2 rows or more, so the batch stays dynamic)."""
        return {name: torch.zeros(rows, dtype=torch.long) for name in ("head", "relation", "tail")}


class TailScores(nn.Module):
    """Every entity's score as the tail of (head, relation)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not isinstance(model, KGEmbedding):
            raise TypeError(f"TailScores wraps RotatE or TransE, not {type(model).__name__}.")
        self.model = model

    def forward(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        scores: torch.Tensor = self.model(head, relation)
        return scores

    @staticmethod
    def example(rows: int = 2) -> dict[str, torch.Tensor]:
        """Inputs to trace the export with (see `TripleScores.example`)."""
        return {name: torch.zeros(rows, dtype=torch.long) for name in ("head", "relation")}


class ServedTailScores(TailScores):
    """`TailScores` as a family serves it: the same scores, a block of entities at a time.

    `forward` broadcasts a [B, E, D] temporary (about 1.4 GB for 32 queries over 54,000
    WordNet entities at k = 100); `score_all` computes the same numbers in cache-sized
    blocks. Exporting traces `forward` (the blocked path's loop and `hypot` do not export),
    so the ONNX graph's temporary grows with its batch: serve it with a small batch.
    """

    def forward(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            return super().forward(head, relation)
        return self.model.score_all(head, relation, "tail")
