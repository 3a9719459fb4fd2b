"""The registry of transforms: each turns one parent version into a new version.

A transform is a params model (the recipe, stored with the version) and a pure,
deterministic `apply(frame, params) -> TransformOutput`; `data rebuild` re-runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from pydantic import BaseModel

from forgeml.core.errors import UsageError
from forgeml.data._frame import TransformOutput


@dataclass(frozen=True)
class Transform:
    """A registered transform: its params model and its apply function."""

    name: str
    params: type[BaseModel]
    apply: Callable[[Any, Any], TransformOutput]
    # appended to the parent's dataset name by default; "" records a new version of it
    output_suffix: str = ""


# name -> (module, params class); modules are imported on first use
_REGISTRY: dict[str, tuple[str, str]] = {
    "clean": ("forgeml.data.clean", "CleanParams"),
    "validate": ("forgeml.data.validate", "Expectations"),
    "redact": ("forgeml.data.pii", "RedactParams"),
    "split": ("forgeml.data.split", "SplitParams"),
    "augment": ("forgeml.data.augment", "AugmentParams"),
    "features": ("forgeml.data.features", "FeatureSpecConfig"),
    "label": ("forgeml.data.labelled", "LabelledParams"),
}


def transform_names() -> list[str]:
    return sorted(_REGISTRY)


def get_transform(name: str) -> Transform:
    """The transform registered as `name`."""
    try:
        module_name, params_name = _REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"Unknown transform '{name}': choose one of {', '.join(transform_names())}."
        ) from None
    module = import_module(module_name)
    # model-ready features are another kind of data than their source rows
    suffix = "-features" if name == "features" else ""
    return Transform(name, getattr(module, params_name), module.apply, suffix)
