"""Live drift: the rows a model server logged lately, against its model version's reference.

A model server started with `--log-sample-rate` above 0 writes a sample of its requests to
a JSON-lines log (`forgeml.serve.request_log`). `read_window` takes the latest rows one
served model received from it; `model_reference` is the reference profile of the data the
model version was trained on (the train split of its recorded dataset version, without
the target), built once and kept under FORGEML_HOME beside the model's name and version.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ConfigError, EmptyWindowError, NotFoundError
from forgeml.monitor.drift._config import ReferenceOptions
from forgeml.monitor.drift._reference import ReferenceProfile, build_reference

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

# what a redacted field's value reads in the log (`forgeml.serve.request_log.REDACTED`)
_REDACTED = "[REDACTED]"
# a text model's instances are strings; they become this column
TEXT_COLUMN = "text"


def read_window(log: Path, model: str, rows: int) -> pl.DataFrame:
    """The latest `rows` rows the server logged for `model` (its served name), oldest first.

    A request's instances are its rows: a record (tabular, named inputs) is one row, a string
    (a text model's) a row of `text`. A line the server was still writing is skipped, and a
    field the log redacted is left out (its values are gone).

    Raises:
        NotFoundError: there is no log at `log`.
        EmptyWindowError: the log holds no rows for `model`.
    """
    if not log.is_file():
        raise NotFoundError(
            f"No request log at {log}: serve the model with --log-sample-rate above 0 "
            "(or name the log with --log)."
        )
    window: deque[dict[str, Any]] = deque(maxlen=rows)
    with log.open("rb") as lines:
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the last line may be half-written
            if not isinstance(entry, dict) or entry.get("model") != model:
                continue
            for instance in entry.get("instances") or []:
                if isinstance(instance, dict):
                    window.append(instance)
                elif isinstance(instance, str):
                    window.append({TEXT_COLUMN: instance})
    if not window:
        raise EmptyWindowError(f"The request log {log} holds no rows for model '{model}' yet.")
    frame = pl.DataFrame(list(window), infer_schema_length=None, strict=False)
    redacted = [
        name
        for name, dtype in frame.schema.items()
        if dtype == pl.String and frame[name].drop_nulls().eq(_REDACTED).all()
    ]
    return frame.drop(redacted)


def reference_path(workspace: Workspace, name: str, version: int) -> Path:
    """Where the reference of model version `name@v{version}` is kept."""
    return Path(workspace.settings.home) / "monitor" / "references" / name / f"v{version}.json"


def model_reference(
    workspace: Workspace, model_ref: str, options: ReferenceOptions | None = None
) -> tuple[str, ReferenceProfile]:
    """The model version `model_ref` names (as NAME@vN) and its training data's reference.

    Raises:
        NotFoundError, UsageError: no such model version.
        ConfigError: the version records no dataset version to take a reference from.
    """
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    found = get_model_version(workspace, model_ref)
    ref = f"{found.name}@v{found.version}"
    path = reference_path(workspace, found.name, found.version)
    if path.is_file():
        return ref, ReferenceProfile.model_validate_json(path.read_bytes())
    dataset = found.dataset_version
    if dataset is None:
        raise ConfigError(
            f"{ref} records no dataset version, so it has no reference to compare with; "
            "compare two dataset versions with --reference and --current instead."
        )
    split = "train" if catalog.SPLIT_COLUMN in dataset.schema else None
    frame = catalog.read_frame(workspace, dataset, split)
    target = (found.run.config.get("data") or {}).get("target")
    features = frame.drop(target) if target in frame.columns else frame
    profile = build_reference(features, options=options)  # leaves `__split__` out itself
    atomic_write_text(path, profile.model_dump_json())
    return ref, profile
