"""Explain a registered model version's answers (`forgeml models explain`, the SDK).

The model is loaded by the model server's own code (`forgeml.serve.model.load_model`), so
what is explained is what is served: the same FeatureSpec, tokenizer and weights. A
tabular model is explained against rows sampled from the training split its version
records (`forgeml.serve.explain.training_background`); the explainers themselves live in
`forgeml.serve.explain`, where the model server's `/v2/models/NAME/explain` calls them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forgeml.serve.explain import (
    DEFAULT_BACKGROUND,
    IG_STEPS,
    Explained,
    Method,
    explain_rows,
    model_background,
)

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


def explain_model(
    workspace: Workspace,
    ref: str,
    rows: list[Any],
    method: Method | None = None,
    background_size: int = DEFAULT_BACKGROUND,
    seed: int = 0,
    steps: int = IG_STEPS,
) -> Explained:
    """Explain each of `rows` as the model version `ref` answers it.

    Args:
        workspace: where the model and its training data are registered.
        ref: a model reference (`NAME`, `NAME@vN`, `NAME@alias`).
        rows: raw rows as a request sends them (records, or texts).
        method: kernel_shap or integrated_gradients (None: the model's default).
        background_size: training rows a tabular model is explained against.
        seed: the seed the background rows are sampled with.
        steps: integration steps of Integrated Gradients.

    Raises:
        NotFoundError: no such model or version.
        InvalidDataError: a row the model does not take.
        ConfigError: the model cannot be explained (no training data recorded, a
            modality without an explainer).
    """
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    model = load_model(workspace, record, "torch", None)
    try:
        model.row_encoder().check(rows)  # a bad row fails before the background is read
        background = model_background(workspace, model, background_size, seed)
        return Explained(model.ref, explain_rows(model, rows, background, method, steps))
    finally:
        model.close()
