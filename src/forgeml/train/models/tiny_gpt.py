"""A small GPT-style decoder language model, trained from scratch (nanoGPT's structure).

GPT-2 (Radford et al. 2019): token + learned position embeddings, `n_layer` pre-norm
blocks of causal self-attention and a 4x MLP, a final layer norm and a linear head over
the vocabulary. Attention uses `torch.nn.functional.scaled_dot_product_attention`
(flash / memory-efficient kernels where the device has them).

Unlike nanoGPT the head is not tied to the token embedding: safetensors refuses to save
tensors that share memory, and at a byte vocabulary (256) tying saves almost nothing.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch import nn
from torch.nn import functional as F  # noqa: N812  (the PyTorch convention)

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError
from forgeml.train.models._family import ModelFamily, OnnxExport
from forgeml.train.models.mlp import PARAMS_SOURCE
from forgeml.train.task import TaskData

BYTE_VOCAB_SIZE = 256


class TinyGPTParams(BaseModel):
    """Parameters of the `tiny_gpt` model (`model.params` in a training config)."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: PositiveInt | None = Field(
        default=None, description="Token ids the model knows; null: the task's, else 256 (bytes)."
    )
    block_size: PositiveInt = Field(default=128, description="Longest context in tokens.")
    n_layer: PositiveInt = Field(default=2, description="Transformer blocks.")
    n_head: PositiveInt = Field(default=4, description="Attention heads per block.")
    n_embd: PositiveInt = Field(default=128, description="Width of the residual stream.")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="Dropout (0 when pretraining).")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t sees positions <= t only."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # query, key, value in one matmul
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, channels  # noqa: N806
        q, k, v = self.c_attn(x).split(C, dim=2)
        # [B, T, C] -> [B, n_head, T, head size]
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        out: torch.Tensor = self.resid_dropout(self.c_proj(y))
        return out


class MLP(nn.Module):
    """Position-wise feed-forward layer, 4x wide with GELU."""

    def __init__(self, n_embd: int, dropout: float) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
        return out


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """Decoder-only language model: token ids [B, T] -> next-token logits [B, T, vocab]."""

    def __init__(
        self,
        vocab_size: int = BYTE_VOCAB_SIZE,
        block_size: int = 128,
        n_layer: int = 2,
        n_head: int = 4,
        n_embd: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(_init_weights)
        # GPT-2: scale residual projections by 1/sqrt(2 * n_layer) so the stream's
        # variance does not grow with depth
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] for token ids [B, T], T <= block_size.

        Raises:
            ConfigError: The sequences are longer than `block_size`.
        """
        length = input_ids.shape[1]
        if length > self.block_size:
            raise ConfigError(
                f"Sequences of {length} tokens exceed the model's block_size of {self.block_size}; "
                f"raise {PARAMS_SOURCE}.block_size or cut the sequences shorter."
            )
        positions = torch.arange(length, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        logits: torch.Tensor = self.lm_head(self.ln_f(x))
        return logits


def _init_weights(module: nn.Module) -> None:
    # GPT-2's initialisation: N(0, 0.02) weights, zero biases
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def _check_sampling(max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    if max_new_tokens < 0:
        raise ConfigError(f"max_new_tokens must be 0 or more, got {max_new_tokens}.")
    if temperature < 0:
        raise ConfigError(f"temperature must be 0 (greedy) or more, got {temperature}.")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top_k must be 1 or more (or unset), got {top_k}.")


@torch.no_grad()
def generate(
    model: TinyGPT,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend each prompt by sampling one token at a time (nanoGPT's sampler).

    The model runs in eval mode (no dropout) and gets back its previous mode after.
    Context beyond `block_size` is cut from the left. No KV cache: every step re-reads
    the context, which is fine at this model's size.

    Args:
        model: The language model.
        input_ids: Prompts [B, T0], long.
        max_new_tokens: Tokens to add.
        temperature: Softmax temperature; 0 picks the most likely token (greedy).
        top_k: Sample among the k most likely tokens only.
        generator: Random source on the model's device, for reproducible samples.

    Returns:
        Token ids [B, T0 + max_new_tokens], the prompts first.

    Raises:
        ConfigError: A negative count or temperature, or top_k under 1.
    """
    _check_sampling(max_new_tokens, temperature, top_k)
    was_training = model.training
    model.eval()
    try:
        tokens = input_ids
        for _ in range(max_new_tokens):
            logits = model(input_ids=tokens[:, -model.block_size :])[:, -1, :]
            tokens = torch.cat((tokens, _next_token(logits, temperature, top_k, generator)), dim=1)
    finally:
        model.train(was_training)
    return tokens


def _next_token(
    logits: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None
) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, [-1]]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probabilities = F.softmax(logits, dim=-1)
    return torch.multinomial(probabilities, num_samples=1, generator=generator)


def build(task: TaskData, **params: Any) -> TinyGPT:
    """Build the `tiny_gpt` zoo model for a language-modelling task.

    Args:
        task: Language-modelling task; `vocab_size` and `input_shape` (T,) are checked.
        **params: `TinyGPTParams` fields.

    Returns:
        The untrained model.

    Raises:
        ConfigError: Bad params, a task that is not language modelling, a vocabulary
            smaller than the task's, or sequences longer than `block_size`.
    """
    config = parse_model(TinyGPTParams, params, PARAMS_SOURCE)
    if task.task != "language_modeling":
        raise ConfigError(
            f"Model 'tiny_gpt' is a language model but the task is '{task.task}'; "
            "use 'text_classifier' to classify text."
        )
    if config.n_embd % config.n_head:
        raise ConfigError(
            f"{PARAMS_SOURCE}.n_embd ({config.n_embd}) must be a multiple of n_head "
            f"({config.n_head}) so every head gets the same width."
        )
    vocab_size = config.vocab_size or task.vocab_size or BYTE_VOCAB_SIZE
    if task.vocab_size is not None and vocab_size < task.vocab_size:
        raise ConfigError(
            f"{PARAMS_SOURCE}.vocab_size is {vocab_size} but the data uses {task.vocab_size} "
            "token ids; raise vocab_size or leave it unset."
        )
    if task.input_shape and task.input_shape[0] > config.block_size:
        raise ConfigError(
            f"The data's sequences have {task.input_shape[0]} tokens but {PARAMS_SOURCE}."
            f"block_size is {config.block_size}; raise block_size or cut the sequences shorter."
        )
    return TinyGPT(
        vocab_size,
        config.block_size,
        config.n_layer,
        config.n_head,
        config.n_embd,
        config.dropout,
    )


# Byte-level language model: served by generation (/v1/completions), not by rows.
FAMILY = ModelFamily(
    name="tiny_gpt",
    builder=build,
    modality="language_model",
    inputs=("input_ids",),
    onnx=OnnxExport(dynamic_axes={"input_ids": {1: "sequence"}}),
)
