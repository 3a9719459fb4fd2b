"""A model family: everything the layers need to know about one kind of model, in one record.

Training reads `builder`, `modality`, `tokenizer` and `objective`; the ONNX export reads `inputs`,
`outputs`, `output_module` and `onnx`; serving reads `requests` (raw request rows ->
input arrays) and `answers` (raw outputs -> the decoded answers the model's metadata
lists). No layer tests a model's name: each reads the record (peft's
`register_peft_method(name=..., config_cls=..., model_cls=...)` shape).

Nothing here imports torch, so `forgeml --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from forgeml.train.models._codec import AnswerDecoder, RowEncoder
    from forgeml.train.task import SplitData, TaskData

# Which rows a family trains on, so which loader of `forgeml.train.data` makes its tensors:
# tabular: a fitted FeatureSpec's `features`; image: `images` [N, C, H, W]; text: the
# family's tokenizer over `data.text_column`, one label per row; language_model: byte
# windows and next-byte targets; triples: head, relation, tail name columns, as a
# tail-prediction task over the graph's entities (`forgeml.train.models.kg.triples_task`).
Modality = Literal["tabular", "image", "text", "language_model", "triples"]
MODALITIES: tuple[Modality, ...] = ("tabular", "image", "text", "language_model", "triples")

ModelBuilder = Callable[..., "nn.Module"]  # builder(task: TaskData, **params) -> nn.Module


class Tokenizer(Protocol):
    """Texts -> the model's input tensors; fitted on train texts or restored from a bundle."""

    vocab_size: int | None  # ids it emits (the builder reads `TaskData.vocab_size`); None: n/a

    def __call__(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Long tensors [N, T] named as the family's `inputs`."""
        ...

    def state(self) -> dict[str, Any]:
        """JSON the bundle keeps (model.json `tokenizer`) to rebuild it for serving."""
        ...


@dataclass(frozen=True)
class TokenizerSource:
    """What a tokenizer is made from: the model params, and a saved state or train texts."""

    params: Mapping[str, Any]
    state: Mapping[str, Any] | None = None  # from a trained bundle; None while training
    texts: Sequence[str] = ()  # the train split's texts, to fit a vocabulary on


TokenizerFactory = Callable[[TokenizerSource], Tokenizer]


@dataclass(frozen=True)
class OnnxExport:
    """How the family's `output_module` exports: extra dynamic axes, a graph rewrite after."""

    # per input, dynamic axes beyond the batch (axis 0 is always dynamic), e.g. a sequence
    dynamic_axes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    # rewrites the exported file in place (operator fusions); returns fused operator counts
    optimize: Callable[[Path, nn.Module], dict[str, int]] | None = None
    # the most rows one call of the graph should take, from the bundle's model.json, where
    # the graph's temporaries grow with rows x what the model holds; None: any batch
    max_rows: Callable[[Mapping[str, Any]], int] | None = None

    def rows_cap(self, description: Mapping[str, Any], rows: int) -> int:
        """`rows`, or fewer (at least 1) where `max_rows` says a call should take fewer."""
        return rows if self.max_rows is None else max(1, min(rows, self.max_rows(description)))


@dataclass(frozen=True)
class ServedBundle:
    """A trained model's bundle as serving sees it: its family, model.json and folder."""

    family: ModelFamily
    description: dict[str, Any]  # model.json
    directory: Path  # read files eagerly: serving removes the folder after loading

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = self.description["model"]["params"]
        return params

    def tokenizer(self) -> Tokenizer:
        """The family's tokenizer restored from the bundle's saved state."""
        if self.family.tokenizer is None:
            raise ValueError(f"Model family '{self.family.name}' has no tokenizer.")
        state = self.description.get("tokenizer") or {}
        return self.family.tokenizer(TokenizerSource(self.params, state))


class Objective(Protocol):
    """A family's own training objective and evaluation, in place of the task's defaults.

    The loop keeps everything else (optimiser, schedule, accumulation, checkpoints, logging);
    a family whose loss is not a function of `model(**inputs)` and the targets (a graph's
    negative sampling) brings these two instead of cross-entropy and `evaluate`.

    `forgeml optimize` and `models compare` score a model as it is served, in PyTorch or
    ONNX Runtime, by `evaluate_served`, and lead with its `served_metric`; the task's
    classification metrics (and confusion matrix) are never computed for such a family.
    """

    served_metric: str  # the metric of `evaluate_served` a comparison leads with

    def loss(
        self, model: nn.Module, inputs: dict[str, torch.Tensor], targets: torch.Tensor
    ) -> torch.Tensor:
        """The mean training loss of one micro-batch (the loop calls backward on it)."""
        ...

    def evaluate(self, model: nn.Module, data: TaskData, split: SplitData) -> dict[str, float]:
        """Float metrics of `model` on `split`, one of `data`'s splits."""
        ...

    def evaluate_served(
        self, served: nn.Module, data: TaskData, split: SplitData
    ) -> dict[str, float]:
        """Float metrics on `split` of `served`, which maps the family's `inputs` (keyword
        tensors) to its serving output: the family's serving module or its ONNX graph."""
        ...


ObjectiveFactory = Callable[[Mapping[str, Any]], Objective]  # from the model params

RequestsFactory = Callable[[ServedBundle], "RowEncoder | None"]  # None: takes no rows
AnswersFactory = Callable[[ServedBundle], "AnswerDecoder"]


@dataclass(frozen=True)
class ModelFamily:
    """One kind of model, registered once with `register_family`.

    Attributes:
        name: The name training configs give as `model.name`.
        builder: `builder(task: TaskData, **params) -> nn.Module`; `forward(**inputs)`
            returns the training output (logits) only.
        modality: The rows it trains on (see `Modality`).
        inputs: The forward keywords, which are also the ONNX and runtime input names.
        outputs: The raw outputs a served model computes, `output_module`'s in order.
        output_module: Wraps a built model as a module returning `outputs` (a tuple when
            more than one); None: the model itself returns its one output, `logits`.
        tokenizer: Makes the text tokenizer (text modality).
        requests: Makes the encoder of raw request rows; None: the modality's default
            (tabular: the bundle's FeatureSpec; text: the tokenizer; otherwise no rows).
        answers: Makes the decoder of raw outputs into answers; None: from the task
            (classification: probabilities and label; regression: prediction), plus
            every raw output other than `logits` as it is.
        onnx: Export settings; None: the family cannot be exported to ONNX.
        objective: Makes the family's own loss and evaluation from the model params;
            None: the task's (cross-entropy or MSE, and `forgeml.train.evaluate`).
    """

    name: str
    builder: ModelBuilder
    modality: Modality
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ("logits",)
    output_module: Callable[[nn.Module], nn.Module] | None = None
    tokenizer: TokenizerFactory | None = None
    requests: RequestsFactory | None = None
    answers: AnswersFactory | None = None
    onnx: OnnxExport | None = field(default_factory=OnnxExport)
    objective: ObjectiveFactory | None = None

    def build(self, task: TaskData, params: Mapping[str, Any]) -> nn.Module:
        """Build the model for `task` with keyword `params`.

        Raises:
            ConfigError: the builder does not take these params (or rejects them).
        """
        from forgeml.core.errors import ConfigError

        try:
            return self.builder(task, **params)
        except TypeError as error:
            raise ConfigError(
                f"Model '{self.name}' does not accept these params: {error}."
            ) from None

    def training_objective(self, params: Mapping[str, Any]) -> Objective | None:
        """The family's own objective for these model params; None: the task's default."""
        return None if self.objective is None else self.objective(params)

    def serving_module(self, model: nn.Module) -> nn.Module:
        """`model` as a module returning `outputs` (what serving and ONNX run)."""
        return model if self.output_module is None else self.output_module(model)

    def request_encoder(self, bundle: ServedBundle) -> RowEncoder | None:
        """The encoder of raw request rows; None when the model takes no rows."""
        from forgeml.train.models._codec import default_requests

        factory = self.requests or default_requests(self.modality)
        return None if factory is None else factory(bundle)

    def answer_decoder(self, bundle: ServedBundle) -> AnswerDecoder:
        """The decoder of raw outputs into the answers a request may ask for."""
        from forgeml.train.models._codec import task_answers

        return (self.answers or task_answers)(bundle)
