"""A recurrent text classifier: embedding -> bidirectional LSTM or GRU -> pooling -> linear.

Trained from scratch; only the tokenizer is borrowed: the WordPiece vocabulary of a
Hugging Face model folder (all-MiniLM-L6-v2's 30,522 ids by default), through the same
`encode_texts` the pretrained `text_classifier` uses, so training, serving and ONNX see
the same `input_ids` / `attention_mask` inputs as for that model. The cells are
Hochreiter & Schmidhuber's LSTM (1997) or Cho et al.'s GRU (2014); max pooling over the
states of a BiLSTM is InferSent's sentence encoder (Conneau et al. 2017).

Padding never changes the answer. Texts are padded on the right, so the forward direction
reads every real token before any padding. The backward direction would read the padding
first, so it runs over each row's real tokens reversed in place (`reverse_within`, the
padding left at the end) and its states are put back in order afterwards. This is what
`pack_padded_sequence` achieves, written with gathers: packing's data-dependent batch
sizes cannot be traced by torch.export, and this keeps ONNX export (with a dynamic
sequence axis) on the same code path as training. Pooling reads real positions only.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch import nn

from forgeml.core.configfile import parse_model
from forgeml.train.models._family import ModelFamily, OnnxExport, TokenizerSource
from forgeml.train.models.mlp import PARAMS_SOURCE, head_size
from forgeml.train.models.text_classifier import (
    encode_texts,
    load_tokenizer,
    pretrained_path,
    trim_padding,
)
from forgeml.train.task import TaskData

Cell = Literal["lstm", "gru"]
Pooling = Literal["max", "mean", "last"]


class RNNParams(BaseModel):
    """Parameters of the `rnn` model (`model.params` in a training config)."""

    model_config = ConfigDict(extra="forbid")

    cell: Cell = Field(default="lstm", description="Recurrent cell: lstm or gru.")
    tokenizer: str | None = Field(
        default=None,
        description="Hugging Face model folder whose tokenizer (vocabulary only) is used; "
        "null for the bundled all-MiniLM-L6-v2's WordPiece.",
    )
    max_length: int = Field(
        default=64, ge=2, le=8192, description="Tokens kept per text (longer texts are cut)."
    )
    embedding_dim: PositiveInt = Field(default=128, description="Size of the token embeddings.")
    hidden_size: PositiveInt = Field(default=128, description="Hidden size per direction.")
    num_layers: PositiveInt = Field(default=1, le=8, description="Stacked recurrent layers.")
    bidirectional: bool = Field(default=True, description="Also read each text right to left.")
    pooling: Pooling = Field(
        default="max",
        description="Sentence vector: max or mean over the states of real tokens, or the "
        "last state of each direction.",
    )
    dropout: float = Field(
        default=0.3,
        ge=0,
        lt=1,
        description="Dropout on embeddings, between layers and before the head.",
    )


def tokenize(texts: list[str], params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Turn texts into the inputs of `RNNClassifier.forward`.

    Args:
        texts: One string per row.
        params: The model's `model.params` (reads `tokenizer` and `max_length`).

    Returns:
        `input_ids` and `attention_mask`, long tensors [N, T], padded on the right.

    Raises:
        ConfigError: Bad params or a tokenizer that cannot be loaded.
        InvalidDataError: A text is missing (null) or not a string.
    """
    config = parse_model(RNNParams, params, PARAMS_SOURCE)
    return encode_texts(texts, pretrained_path(config.tokenizer), config.max_length)


def reverse_within(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first `lengths[b]` steps of each row of x [B, T, C]; the rest stay put.

    Its own inverse: applying it twice gives x back.
    """
    batch, time = x.shape[0], x.shape[1]
    steps = torch.arange(time, device=x.device).unsqueeze(0).expand(batch, time)
    ends = lengths.unsqueeze(1)
    order = torch.where(steps < ends, ends - 1 - steps, steps)
    # expand(-1, -1, C) rather than expand_as: keeps T symbolic when exported
    return x.gather(1, order.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class _RecurrentLayer(nn.Module):
    """One layer: a forward cell and, when bidirectional, a backward one over real tokens."""

    def __init__(self, cell: Cell, in_size: int, hidden: int, bidirectional: bool) -> None:
        super().__init__()
        kind = nn.LSTM if cell == "lstm" else nn.GRU
        self.forward_cell = kind(in_size, hidden, batch_first=True)
        self.backward_cell = kind(in_size, hidden, batch_first=True) if bidirectional else None

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """States [B, T, hidden * directions] for inputs x [B, T, in_size]."""
        ahead, _ = self.forward_cell(x)
        if self.backward_cell is None:
            return ahead
        behind, _ = self.backward_cell(reverse_within(x, lengths))
        return torch.cat([ahead, reverse_within(behind, lengths)], dim=-1)


class RNNClassifier(nn.Module):
    """Token embedding + stacked (bi)directional LSTM/GRU + pooling + dropout + linear head."""

    def __init__(
        self,
        vocab_size: int,
        out_features: int,
        params: RNNParams,
        padding_id: int = 0,
        squeeze: bool = False,
    ) -> None:
        """Build the layers.

        Args:
            vocab_size: Token ids the tokenizer can produce.
            out_features: Logits per text (classes, or 1 for regression).
            params: Sizes, cell, pooling and dropout.
            padding_id: The tokenizer's padding id (its embedding stays zero).
            squeeze: Return [B] instead of [B, 1] (regression).
        """
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, params.embedding_dim, padding_idx=padding_id)
        self.dropout = nn.Dropout(params.dropout)
        directions = 2 if params.bidirectional else 1
        sizes = [params.embedding_dim] + [params.hidden_size * directions] * params.num_layers
        self.layers = nn.ModuleList(
            _RecurrentLayer(params.cell, size, params.hidden_size, params.bidirectional)
            for size in sizes[:-1]
        )
        self.head = nn.Linear(sizes[-1], out_features)
        self.hidden_size = params.hidden_size
        self.pooling = params.pooling
        self.squeeze = squeeze

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence vectors [B, hidden * directions] for token ids and mask [B, T]."""
        input_ids, attention_mask = trim_padding(input_ids, attention_mask)
        lengths = attention_mask.sum(dim=1)
        states = self.dropout(self.embedding(input_ids))
        for position, layer in enumerate(self.layers):
            if position:
                states = self.dropout(states)
            states = layer(states, lengths)
        return self._pool(states, attention_mask, lengths)

    def _pool(
        self, states: torch.Tensor, attention_mask: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        real = attention_mask.unsqueeze(-1).bool()
        if self.pooling == "max":
            # the dtype's lowest value, not -inf: a row of only padding stays finite
            return states.masked_fill(~real, torch.finfo(states.dtype).min).amax(dim=1)
        if self.pooling == "mean":
            total = (states * real.to(states.dtype)).sum(dim=1)
            return total / lengths.clamp(min=1).unsqueeze(-1).to(states.dtype)
        # last: the forward direction's state at the last real token, the backward's at the first
        last = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, states.shape[-1])
        final = states.gather(1, last).squeeze(1)
        if states.shape[-1] == self.hidden_size:
            return final
        return torch.cat([final[:, : self.hidden_size], states[:, 0, self.hidden_size :]], dim=-1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Map token ids and mask [B, T] to logits [B, out_features] (or [B] when squeezing)."""
        logits: torch.Tensor = self.head(self.dropout(self.embed(input_ids, attention_mask)))
        return logits.squeeze(-1) if self.squeeze else logits


def build(task: TaskData, **params: Any) -> RNNClassifier:
    """Build the `rnn` zoo model for a text classification or regression task.

    Args:
        task: Classification or regression task over tokenized text.
        **params: `RNNParams` fields.

    Returns:
        The untrained model, its vocabulary the tokenizer's.

    Raises:
        ConfigError: Bad params, a tokenizer that cannot be loaded, or a task this model
            cannot serve.
    """
    config = parse_model(RNNParams, params, PARAMS_SOURCE)
    out_features, squeeze = head_size(task, "rnn")
    tokenizer = load_tokenizer(pretrained_path(config.tokenizer))
    padding_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    vocab_size = task.vocab_size or len(tokenizer)
    return RNNClassifier(vocab_size, out_features, config, int(padding_id), squeeze=squeeze)


# --- the family: tokenizer and ONNX export ----------------------------------------------


class WordPieceTokenizer:
    """The borrowed tokenizer (`tokenize`); its state is the model params alone."""

    def __init__(self, source: TokenizerSource) -> None:
        self.params = dict(source.params)
        config = parse_model(RNNParams, self.params, PARAMS_SOURCE)
        self.vocab_size: int | None = len(load_tokenizer(pretrained_path(config.tokenizer)))

    def __call__(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return tokenize(texts, self.params)

    def state(self) -> dict[str, Any]:
        return {}


_TOKENS = {1: "sequence"}
FAMILY = ModelFamily(
    name="rnn",
    builder=build,
    modality="text",
    inputs=("input_ids", "attention_mask"),
    tokenizer=WordPieceTokenizer,
    onnx=OnnxExport(dynamic_axes={"input_ids": _TOKENS, "attention_mask": _TOKENS}),
)
