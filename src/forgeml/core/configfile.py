"""Typed YAML configs: load a file into a pydantic model, or say exactly what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from forgeml.core.errors import ConfigError

ModelT = TypeVar("ModelT", bound=BaseModel)


def describe_validation_error(error: ValidationError, source: str) -> str:
    """One sentence naming the source, the first bad key path and what was expected."""
    first = error.errors()[0]
    path = ".".join(str(part) for part in first["loc"]) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{source}: unknown key '{path}'."
    if kind == "missing":
        return f"{source}: missing required key '{path}'."
    return f"{source}: key '{path}': {first['msg']} (got {first.get('input')!r})."


def parse_model(model: type[ModelT], data: Any, source: str) -> ModelT:
    """Validate `data` as `model`, raising `ConfigError` that names `source` and the key path."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, source)) from None


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file, raising `ConfigError` for a missing file or invalid YAML."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a file.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text.") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{where}.") from None


def load_yaml_model(path: str | Path, model: type[ModelT]) -> ModelT:
    """Load and validate a YAML file as `model`."""
    return parse_model(model, load_yaml(path) or {}, str(path))
