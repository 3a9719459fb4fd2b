"""A model family defined outside forgeml: a bag of words with a vocabulary fitted on train text.

Importing this module registers `word_bag`; a bundle trained with it records this module,
so a `forgeml serve` process imports it to find the family again. It declares a
tokenizer with state (the fitted vocabulary), a second served output (`pooled`, the mean
word vector) and a sequence axis for the ONNX export.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import torch
from torch import nn

from forgeml.train.models import OnnxExport, TokenizerSource, register_family
from forgeml.train.task import TaskData

_WORD = re.compile(r"[a-z']+")
PAD, UNKNOWN = 0, 1


class WordTokenizer:
    """Lower-cased words -> ids of the `size` most frequent train words (0 pad, 1 unknown)."""

    def __init__(self, source: TokenizerSource) -> None:
        if source.state:
            self.words: list[str] = list(source.state["words"])
        else:
            size = int(source.params.get("vocab", 2000))
            counts = Counter(w for text in source.texts for w in _WORD.findall(text.lower()))
            self.words = [word for word, _ in counts.most_common(size)]
        self.ids = {word: index + 2 for index, word in enumerate(self.words)}
        self.vocab_size: int | None = len(self.words) + 2

    def __call__(self, texts: list[str]) -> dict[str, torch.Tensor]:
        rows = [
            [self.ids.get(w, UNKNOWN) for w in _WORD.findall(t.lower())] or [UNKNOWN] for t in texts
        ]
        width = max((len(row) for row in rows), default=1)
        ids = torch.full((len(rows), width), PAD, dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = torch.tensor(row)
        return {"token_ids": ids, "mask": (ids != PAD).long()}

    def state(self) -> dict[str, Any]:
        return {"words": self.words}


class WordBag(nn.Module):
    """Mean of word vectors over the mask, then a linear head."""

    def __init__(self, vocab_size: int, dim: int, classes: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.head = nn.Linear(dim, classes)

    def pooled(self, token_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.unsqueeze(-1).to(torch.float32)
        summed = (self.embedding(token_ids) * weights).sum(dim=1)
        return summed / weights.sum(dim=1).clamp(min=1.0)

    def forward(self, token_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.pooled(token_ids, mask))
        return logits


class WordBagOutputs(nn.Module):
    """(logits, pooled): what a served word bag computes."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, token_ids: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        model: Any = self.model
        pooled = model.pooled(token_ids, mask)
        return model.head(pooled), pooled


def build(task: TaskData, dim: int = 16, vocab: int = 2000) -> WordBag:
    assert task.vocab_size is not None and task.num_classes is not None
    return WordBag(task.vocab_size, dim, task.num_classes)


_SEQUENCE = {1: "sequence"}
FAMILY = register_family(
    name="word_bag",
    builder=build,
    modality="text",
    inputs=("token_ids", "mask"),
    outputs=("logits", "pooled"),
    output_module=WordBagOutputs,
    tokenizer=WordTokenizer,
    onnx=OnnxExport(dynamic_axes={"token_ids": _SEQUENCE, "mask": _SEQUENCE}),
)
