"""The model zoo: an explicit registry of builders, plus user models by entry point.

A builder is `builder(task: TaskData, **params) -> torch.nn.Module`; the module's
`forward(**inputs)` returns logits (see `forgeml.train.task`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from torch import nn

    from forgeml.train.task import TaskData

ModelBuilder = Callable[..., "nn.Module"]

# name -> "module:function"; imported on first use so `forgeml --help` stays fast
_BUILTIN: dict[str, str] = {
    "mlp": "forgeml.train.models.mlp:build",
    "cnn": "forgeml.train.models.cnn:build",
    "text_classifier": "forgeml.train.models.text_classifier:build",
    "tiny_gpt": "forgeml.train.models.tiny_gpt:build",
}
_REGISTERED: dict[str, ModelBuilder] = {}


def register_model(name: str, builder: ModelBuilder) -> None:
    """Make `builder` available as model `name` in training configs."""
    _REGISTERED[name] = builder


def model_names() -> list[str]:
    return sorted({*_BUILTIN, *_REGISTERED})


def _load_entry_point(target: str) -> ModelBuilder:
    module_name, _, attribute = target.partition(":")
    try:
        module = import_module(module_name)
        builder = getattr(module, attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"Model entry point '{target}' cannot be loaded ({error}); "
            "give 'package.module:function' importable from this environment."
        ) from None
    if not callable(builder):
        raise ConfigError(f"Model entry point '{target}' is not a function.")
    return builder


def get_builder(name: str) -> ModelBuilder:
    """The builder for a zoo name, a registered name, or 'module:function'."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _BUILTIN:
        return _load_entry_point(_BUILTIN[name])
    if ":" in name:
        return _load_entry_point(name)
    raise ConfigError(
        f"Unknown model '{name}': choose one of {', '.join(model_names())} "
        "or give 'package.module:function'."
    )


def build_model(name: str, task: TaskData, params: dict[str, Any]) -> nn.Module:
    """Build model `name` for `task` with keyword `params`."""
    try:
        return get_builder(name)(task, **params)
    except TypeError as error:
        raise ConfigError(f"Model '{name}' does not accept these params: {error}.") from None
