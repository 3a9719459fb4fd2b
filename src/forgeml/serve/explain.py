"""Why a served model answered what it did: per-feature (or per-token) attributions.

The one entry, `explain_rows`, explains the rows a model takes, as the model server and
`forgeml models explain` both call it:

- tabular models: Kernel SHAP (Lundberg & Lee 2017) over the raw fields a request sends,
  against a background of rows from the model's training split (`training_background`);
  each field is one player, its encoded columns (one-hot, hash buckets) masked together
  (`forgeml.serve._shap`). `method="integrated_gradients"` explains a PyTorch tabular
  model with Integrated Gradients instead (Sundararajan et al. 2017), from the mean
  background row.
- text models: Integrated Gradients over the word-embedding layer, 50 steps, from a
  baseline of padding tokens, one attribution per word (`forgeml.serve._integrated_gradients`).

The explained output is the probability of the predicted class (a classifier) or the
predicted number (a regressor); `base_value` is that output at the baseline (the mean
over the background for SHAP), so the attributions add up to `prediction - base_value`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from forgeml.core.errors import ConfigError, InvalidDataError

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.serve.model import LoadedModel

Method = Literal["kernel_shap", "integrated_gradients"]
METHODS: tuple[Method, ...] = ("kernel_shap", "integrated_gradients")
DEFAULT_BACKGROUND = 50  # rows of the training split (Kernel SHAP costs grow with it)
IG_STEPS = 50
MAX_ROWS = 16  # rows one request may explain: each costs thousands of model rows


@dataclass(frozen=True)
class Attribution:
    """How much one feature (or word) moved the explained output from the base value."""

    feature: str
    value: float
    position: int | None = None  # a word's place in the text (a word may come twice)


@dataclass
class Explanation:
    """One row's explanation; `attributions` are sorted by |value|, largest first."""

    method: Method
    output: str  # what was explained, e.g. "probability of '>50K'"
    label: str | None  # the predicted class; None for a regressor
    prediction: float  # the explained output for the row
    base_value: float
    attributions: list[Attribution]
    convergence_delta: float | None = None  # Integrated Gradients' completeness gap
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The JSON answer (`models explain --json` and `POST .../explain` alike).

        `top` keeps the largest attributions; `attributions_total` still sums them all.
        """
        kept = self.attributions if top is None else self.attributions[:top]
        return {
            "method": self.method,
            "output": self.output,
            "label": self.label,
            "prediction": self.prediction,
            "base_value": self.base_value,
            "attributions_total": float(sum(a.value for a in self.attributions)),
            "convergence_delta": self.convergence_delta,
            "attributions": [
                {"feature": a.feature, "value": a.value}
                | ({} if a.position is None else {"position": a.position})
                for a in kept
            ],
            **self.details,
        }


@dataclass
class Explained:
    """The explanations of some rows by one model version: what `--json` and the model
    server's `/v2/models/NAME/explain` both answer."""

    model: str  # NAME@vN
    explanations: list[Explanation]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """`{"model": NAME@vN, "explanations": [one per row]}`."""
        return {"model": self.model, "explanations": [e.to_dict(top) for e in self.explanations]}


def sorted_attributions(attributions: list[Attribution]) -> list[Attribution]:
    """Largest |value| first (ties keep their order)."""
    return sorted(attributions, key=lambda a: -abs(a.value))


@dataclass(frozen=True)
class Target:
    """The scalar output explained: a class's probability, or the regression output."""

    class_index: int | None  # None: a regressor's single output
    label: str | None
    output: str

    def pick(self, logits: np.ndarray) -> np.ndarray:
        """The explained output [N] from raw logits [N, C] (or [N] for a regressor)."""
        if self.class_index is None:
            return logits.reshape(len(logits), -1)[:, 0].astype(np.float64)
        shifted = logits - logits.max(axis=1, keepdims=True)  # stable softmax
        exp = np.exp(shifted.astype(np.float64))
        return exp[:, self.class_index] / exp.sum(axis=1)


def target_of(model: LoadedModel, logits: np.ndarray) -> Target:
    """The output to explain for one row's logits: its predicted class, or its number."""
    if model.task != "classification":
        return Target(None, None, "prediction")
    index = int(np.asarray(logits).reshape(-1).argmax())
    names = model.class_names or [str(i) for i in range(np.asarray(logits).size)]
    return Target(index, names[index], f"probability of '{names[index]}'")


def explain_rows(
    model: LoadedModel,
    rows: list[Any],
    background: list[dict[str, Any]] | None = None,
    method: Method | None = None,
    steps: int = IG_STEPS,
) -> list[Explanation]:
    """Explain each row of `rows` as `model` answers it.

    Args:
        model: a loaded model version (`forgeml.serve.model.load_model`).
        rows: raw rows as a request sends them (tabular records, or texts).
        background: raw training records (tabular models; `training_background`).
        method: kernel_shap (tabular default) or integrated_gradients (text default).
        steps: integration steps of Integrated Gradients.

    Raises:
        InvalidDataError: no rows, too many, or a row the model does not take.
        ConfigError: the model or method cannot be explained this way.
    """
    if not rows:
        raise InvalidDataError("There are no rows to explain; give at least one.")
    if len(rows) > MAX_ROWS:
        raise InvalidDataError(
            f"{len(rows)} rows is over the limit of {MAX_ROWS} explained at once; send fewer rows."
        )
    encoder = model.row_encoder()
    encoder.check(rows)
    if model.task not in ("classification", "regression"):
        raise ConfigError(f"Model '{model.name}' ({model.task}) has no output to explain.")
    if model.kind == "tabular":
        return _explain_tabular(model, rows, background, method or "kernel_shap", steps)
    if model.kind == "text":
        if method not in (None, "integrated_gradients"):
            raise ConfigError(
                "Text models are explained with integrated_gradients over their token "
                "embeddings; drop the method or choose that one."
            )
        from forgeml.serve._integrated_gradients import explain_text

        return [explain_text(model, text, steps) for text in rows]
    raise ConfigError(
        f"Model '{model.name}' reads {model.kind} inputs; explanations cover tabular and "
        "text models."
    )


def _explain_tabular(
    model: LoadedModel,
    rows: list[Any],
    background: list[dict[str, Any]] | None,
    method: Method,
    steps: int,
) -> list[Explanation]:
    from forgeml.serve._shap import FieldMasker

    if not background:
        raise ConfigError(
            f"Model '{model.name}' needs background rows from its training data to be "
            "explained, and none were given."
        )
    masker = FieldMasker(model, background)
    if method == "kernel_shap":
        return [masker.kernel_shap(row) for row in rows]
    from forgeml.serve._integrated_gradients import explain_features

    return [explain_features(model, masker, row, steps) for row in rows]


def training_background(
    workspace: Workspace,
    record: ModelVersionRecord,
    columns: list[str],
    size: int = DEFAULT_BACKGROUND,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """`size` raw rows sampled (seeded) from the split `record` was trained on.

    The model version records its dataset version; its run's config names the split
    (`data.train_split`, "train" unless set). Only `columns` (the fields the model
    takes) are kept.

    Raises:
        ConfigError: the version records no training dataset (an imported model).
        UsageError: the dataset version has no such split.
    """
    from forgeml.data import catalog

    version = record.dataset_version
    if version is None:
        raise ConfigError(
            f"{record.ref} records no training dataset version (was it imported?), so there "
            "are no training rows to explain it against."
        )
    config = record.run.config if record.run is not None else {}
    split = (config.get("data") or {}).get("train_split", "train")
    frame = catalog.read_frame(workspace, version, split).select(columns)
    if frame.is_empty():
        raise ConfigError(f"The training rows of {record.ref} ({version.ref}) are empty.")
    sampled = frame.sample(n=min(size, frame.height), seed=seed, shuffle=True)
    return sampled.to_dicts()


def model_background(
    workspace: Workspace, model: LoadedModel, size: int = DEFAULT_BACKGROUND, seed: int = 0
) -> list[dict[str, Any]] | None:
    """The background `explain_rows` needs for `model`: training rows for a tabular model,
    None for a text model (its baseline is padding)."""
    if model.kind != "tabular":
        return None
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, model.ref)
    columns = [f.name for f in model.row_encoder().fields]
    return training_background(workspace, record, columns, size, seed)
