"""What a run records about where it came from: code version, packages, config, data."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from forgeml.tracking._mlflow import (
    MAX_DATASET_DIGEST_LENGTH,
    MAX_PARAM_VALUE_LENGTH,
    flatten,
    sanitize_key,
)

if TYPE_CHECKING:
    from mlflow.entities import DatasetInput

    from forgeml.core.store import DatasetVersion

_ELLIPSIS = "..."
# how a forgeml dataset version shows in MLflow's dataset inputs
DATASET_SOURCE_TYPE = "forgeml"
DATASET_CONTEXT = "training"


def environment() -> dict[str, Any]:
    """Python, platform and every installed distribution with its version."""
    packages: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        # one parse of the METADATA file: `dist.version` parses it again (each run's start
        # read ~260 of them twice, 0.7 s at a load of 10 on 2 cores; once, 0.35 s)
        metadata = dist.metadata
        name = metadata["Name"]
        if name:
            packages[name] = metadata["Version"]
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": dict(sorted(packages.items(), key=lambda item: item[0].lower())),
    }


def config_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The resolved config as flat MLflow params (`optimizer.lr` -> `"0.001"`), within limits."""
    params: dict[str, str] = {}
    for key, value in flatten(config):
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > MAX_PARAM_VALUE_LENGTH:
            text = text[: MAX_PARAM_VALUE_LENGTH - len(_ELLIPSIS)] + _ELLIPSIS
        params[sanitize_key(key)] = text
    return params


def dataset_input(version: DatasetVersion, blob_url: str) -> DatasetInput:
    """The dataset version as an MLflow dataset input.

    MLflow caps a dataset digest at 36 characters, so it holds the first 36 hex digits of
    the forgeml digest (itself a valid `NAME@<digest prefix>` reference); the source
    carries the full digest.
    """
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    source = {"ref": version.ref, "digest": version.digest, "url": blob_url}
    dataset = Dataset(
        name=version.ref,
        digest=version.digest[:MAX_DATASET_DIGEST_LENGTH],
        source_type=DATASET_SOURCE_TYPE,
        source=json.dumps(source),
        profile=json.dumps({"num_rows": version.rows, "size_bytes": version.size_bytes}),
    )
    return DatasetInput(dataset, tags=[InputTag(MLFLOW_DATASET_CONTEXT, DATASET_CONTEXT)])
