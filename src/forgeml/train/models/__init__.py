"""The model zoo: one registered `ModelFamily` per kind of model, read by every layer.

`register_family(name=..., builder=..., modality=..., inputs=..., ...)` adds a family;
a training config names it as `model.name`, or as 'package.module:attribute' (a
`ModelFamily`, or a bare builder, which trains on tabular features). A bundle records
where its family was registered, so `forgeml serve` finds it in another process.

A builder is `builder(task: TaskData, **params) -> torch.nn.Module`; the module's
`forward(**inputs)` returns logits (see `forgeml.train.task`).
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError
from forgeml.train.models._codec import (
    AnswerDecoder,
    InputField,
    RowEncoder,
    TabularEncoder,
    TextEncoder,
)
from forgeml.train.models._family import (
    MODALITIES,
    AnswersFactory,
    Modality,
    ModelBuilder,
    ModelFamily,
    Objective,
    ObjectiveFactory,
    OnnxExport,
    RequestsFactory,
    ServedBundle,
    Tokenizer,
    TokenizerFactory,
    TokenizerSource,
)

if TYPE_CHECKING:
    from torch import nn

    from forgeml.train.task import TaskData

# name -> "module:attribute" of its ModelFamily; imported on first use (no torch at start-up)
_BUILTIN: dict[str, str] = {
    "mlp": "forgeml.train.models.mlp:FAMILY",
    "cnn": "forgeml.train.models.cnn:FAMILY",
    "text_classifier": "forgeml.train.models.text_classifier:FAMILY",
    "tiny_gpt": "forgeml.train.models.tiny_gpt:FAMILY",
    "hf_causal_lm": "forgeml.train.models.hf_causal_lm:FAMILY",
    "rnn": "forgeml.train.models.rnn:FAMILY",
    "rotate": "forgeml.train.models.kg._family:ROTATE",
    "transe": "forgeml.train.models.kg._family:TRANSE",
    "onnx": "forgeml.train.models.onnx_graph:FAMILY",
}
_REGISTERED: dict[str, ModelFamily] = {}
_ORIGIN: dict[str, str] = {}  # family name -> the module that registered it


def register_family(**fields: Any) -> ModelFamily:
    """Register a model family; its keyword fields are those of `ModelFamily`.

    Required: `name`, `builder`, `modality` (tabular, image, text, language_model, triples) and
    `inputs` (the forward keywords). Registering a name again replaces it.

    Returns:
        The registered record.

    Raises:
        ConfigError: a field is missing or unknown, or the name is a built-in family's.
    """
    try:
        family = ModelFamily(**fields)
    except TypeError as error:
        raise ConfigError(f"register_family: {error}.") from None
    if family.name in _BUILTIN:
        raise ConfigError(
            f"Model family '{family.name}' is built in; register yours under another name."
        )
    if family.modality not in MODALITIES:
        raise ConfigError(
            f"Model family '{family.name}' has modality '{family.modality}'; use one of "
            f"{', '.join(MODALITIES)}."
        )
    _REGISTERED[family.name] = family
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller and caller != "__main__":
        _ORIGIN[family.name] = caller  # the served process imports it to register again
    return family


def family_names() -> list[str]:
    """The built-in and registered family names."""
    return sorted({*_BUILTIN, *_REGISTERED})


def _load_target(target: str) -> ModelFamily:
    module_name, _, attribute = target.partition(":")
    try:
        found = getattr(import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"Model entry point '{target}' cannot be loaded ({error}); "
            "give 'package.module:attribute' importable from this environment."
        ) from None
    if isinstance(found, ModelFamily):
        return found
    if not callable(found):
        raise ConfigError(f"Model entry point '{target}' is neither a ModelFamily nor a function.")
    # a bare builder: trained and served on tabular features, as before families existed
    return ModelFamily(name=target, builder=found, modality="tabular", inputs=("features",))


def get_family(name: str) -> ModelFamily:
    """The family of a registered name, a built-in name, or 'module:attribute'.

    Raises:
        ConfigError: no such family, or the entry point cannot be imported.
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _BUILTIN:
        return _load_target(_BUILTIN[name])
    if ":" in name:
        return _load_target(name)
    raise ConfigError(
        f"Unknown model '{name}': choose one of {', '.join(family_names())} "
        "or give 'package.module:attribute'."
    )


def family_record(family: ModelFamily) -> dict[str, Any]:
    """What a bundle's model.json keeps to find the family again (`family_of`)."""
    registered = _REGISTERED.get(family.name) is family
    return {
        "name": family.name,
        "modality": family.modality,
        "module": _ORIGIN.get(family.name) if registered else None,
    }


def family_of(description: dict[str, Any]) -> ModelFamily:
    """The family of a bundle's model.json, importing the module that registered it.

    Raises:
        ConfigError: the family is not registered here and cannot be imported.
    """
    name = description["model"]["name"]
    if name in _REGISTERED or name in _BUILTIN or ":" in name:
        return get_family(name)
    module = (description.get("family") or {}).get("module")
    if module:
        try:
            import_module(module)
        except ImportError as error:
            raise ConfigError(
                f"Model family '{name}' is registered by module '{module}', which cannot be "
                f"imported here ({error}); install it where the model is served."
            ) from None
    if name not in _REGISTERED:
        raise ConfigError(
            f"Model family '{name}' is not registered in this process; import the module "
            "that calls register_family before loading the model."
        )
    return _REGISTERED[name]


def get_builder(name: str) -> ModelBuilder:
    """The builder of family `name` (see `get_family`)."""
    return get_family(name).builder


def build_model(name: str, task: TaskData, params: dict[str, Any]) -> nn.Module:
    """Build model `name` for `task` with keyword `params`."""
    return get_family(name).build(task, params)


__all__ = [
    "MODALITIES",
    "AnswerDecoder",
    "AnswersFactory",
    "InputField",
    "Modality",
    "ModelBuilder",
    "ModelFamily",
    "Objective",
    "ObjectiveFactory",
    "OnnxExport",
    "RequestsFactory",
    "RowEncoder",
    "ServedBundle",
    "TabularEncoder",
    "TextEncoder",
    "Tokenizer",
    "TokenizerFactory",
    "TokenizerSource",
    "build_model",
    "family_names",
    "family_of",
    "family_record",
    "get_builder",
    "get_family",
    "register_family",
]
