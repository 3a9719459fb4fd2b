"""The per-request work every peer server does, through forgeml's own encoding code.

`served(home, name)` loads a registered model version as `forgeml serve` does; the
functions below turn raw rows into the same answers forgeml's server sends: `:predict`'s
`{"label", "probabilities"}` per row and OpenAI's embedding objects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.serve.model import LoadedModel

CLASSIFIER_OUTPUTS = {"label", "probabilities"}


def served(home: Path, name: str) -> LoadedModel:
    """The latest version of model `name` in the forgeml home `home`, loaded for torch."""
    import torch

    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    # the thread budget `forgeml serve` gets by default (Ray sets OMP_NUM_THREADS=1 in actors)
    torch.set_num_threads(os.cpu_count() or 1)
    workspace = Workspace(Settings(home=home, user="bench"))
    try:
        return load_model(workspace, get_model_version(workspace, name), "torch", None)
    finally:
        workspace.close()


def predictions(model: LoadedModel, rows: list[Any]) -> list[dict[str, Any]]:
    """`:predict`'s answer per raw record: the decoded label and the class probabilities."""
    arrays = model.run_rows(rows, CLASSIFIER_OUTPUTS)
    names = model.class_names or [str(i) for i in range(arrays["probabilities"].shape[1])]
    return [
        {"label": str(label), "probabilities": dict(zip(names, row.tolist(), strict=True))}
        for label, row in zip(arrays["label"], arrays["probabilities"], strict=True)
    ]


def embeddings(model: LoadedModel, texts: list[str]) -> list[list[float]]:
    """One sentence vector per text."""
    vectors: list[list[float]] = model.run_rows(texts, {"embeddings"})["embeddings"].tolist()
    return vectors


def embedding_answer(name: str, texts: list[str], vectors: list[list[float]]) -> dict[str, Any]:
    """OpenAI's `/v1/embeddings` response body, as forgeml's server shapes it."""
    data = [
        {"object": "embedding", "index": index, "embedding": vector}
        for index, vector in enumerate(vectors)
    ]
    words = sum(len(text.split()) for text in texts)
    usage = {"prompt_tokens": words, "total_tokens": words}
    return {"object": "list", "data": data, "model": name, "usage": usage}
