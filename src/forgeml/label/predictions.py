"""A model version's class probabilities for the items of a labelling task.

The model is loaded as a server loads it (`forgeml.serve.model.load_model`: its family's
request encoder and answer decoder), and the dataset version's rows are run through it in
batches; only the probabilities are kept. Reserved columns (split, augmented) never reach
the encoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

_BATCH = 256


def model_probabilities(workspace: Workspace, model_ref: str, frame: pl.DataFrame) -> np.ndarray:
    """The probabilities (items, classes) model `model_ref` gives each row of `frame`.

    Raises:
        NotFoundError, UsageError: no such model version.
        OtherProjectError: the model belongs to another project than the workspace's.
        ConfigError: the model answers no class probabilities (a regressor, an LM).
        InvalidDataError: the rows lack what the model reads.
    """
    from forgeml.data._frame import user_columns
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, model_ref)
    workspace.check_own("Model", record.name, record.project)
    model = load_model(workspace, record, "torch", None)
    try:
        if "probabilities" not in {field.name for field in model.outputs}:
            raise ConfigError(
                f"Model {record.ref} answers no class probabilities, so it cannot rank "
                "items by uncertainty; use --strategy random or a classifier."
            )
        rows = frame.select(user_columns(frame)).to_dicts()
        parts = [
            model.run_rows(rows[start : start + _BATCH], {"probabilities"})["probabilities"]
            for start in range(0, len(rows), _BATCH)
        ]
    finally:
        model.close()
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros((0, 2))
