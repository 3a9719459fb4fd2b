"""Live drift: the rows a model server logged lately, against its model version's reference.

A model server started with `--log-sample-rate` above 0 writes a sample of its requests to
a JSON-lines log (`forgeml.serve.request_log`). `read_requests` takes the rows (and the
model's answers, and their times) one served model received from one or more such logs
(a deployment's replicas may write several); `read_window` the latest rows alone.
`model_reference` is the reference profile of the data the model version was trained on
(the train split of its recorded dataset version, without the target), with the profile
of the model's own outputs on the validation split, built once and kept under
FORGEML_HOME beside the model's name and version; a kept profile of an older format is
rebuilt, never misread.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ConfigError, EmptyWindowError, NotFoundError
from forgeml.monitor.drift._config import ReferenceOptions
from forgeml.monitor.drift._predictions import model_outputs, output_frame
from forgeml.monitor.drift._reference import (
    ReferenceProfile,
    StaleReferenceError,
    build_reference,
)

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace

# what a redacted field's value reads in the log (`forgeml.serve.request_log.REDACTED`)
_REDACTED = "[REDACTED]"
# a text model's instances are strings; they become this column
TEXT_COLUMN = "text"
# rows of the validation split the model answers for the reference of its outputs
PREDICTION_ROWS = 5_000


@dataclass(frozen=True)
class LoggedRequests:
    """Rows a server logged for one model, oldest first, with its answers and their times."""

    frame: pl.DataFrame  # the rows (instances), redacted fields left out
    outputs: pl.DataFrame | None  # `output_frame` columns, one row per row (None: unknown)
    times: list[float]  # when each row's request was logged (seconds since the epoch)


def _entries(
    log: Path, which: int, model: str, version: str | None
) -> Iterator[tuple[float, int, int, Any]]:
    with log.open("rb") as lines:
        for number, line in enumerate(lines):
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the last line may be half-written
            if not isinstance(entry, dict) or entry.get("model") != model:
                continue
            if version is not None and entry.get("version") != version:
                continue
            stamp = entry.get("ts")
            yield (float(stamp) if isinstance(stamp, int | float) else 0.0), which, number, entry


def _rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for instance in entry.get("instances") or []:
        if isinstance(instance, dict):
            rows.append(instance)
        elif isinstance(instance, str):
            rows.append({TEXT_COLUMN: instance})
    return rows


def read_requests(
    logs: list[Path], model: str, rows: int | None = None, version: str | None = None
) -> LoggedRequests:
    """The latest `rows` rows (all: None) the logs hold for `model`, oldest first.

    A request's instances are its rows: a record (tabular, named inputs) is one row, a
    string (a text model's) a row of `text`. Several logs are merged by time. A line the
    server was still writing is skipped, and a field the log redacted is left out (its
    values are gone). `version` (NAME@vN) keeps only the requests that version answered.

    Raises:
        NotFoundError: none of `logs` exists.
        EmptyWindowError: the logs hold no rows for `model`.
    """
    present = [log for log in logs if log.is_file()]
    if not present:
        raise NotFoundError(
            f"No request log at {', '.join(map(str, logs))}: serve the model with "
            "--log-sample-rate above 0 (or name the log with --log)."
        )
    kept: deque[tuple[float, dict[str, Any], Any]] = deque(maxlen=rows)
    logs_entries = (_entries(log, k, model, version) for k, log in enumerate(present))
    for stamp, _, _, entry in heapq.merge(*logs_entries):
        found = _rows(entry)
        outputs = output_frame(entry.get("outputs"), len(found))
        for k, row in enumerate(found):
            kept.append((stamp, row, None if outputs is None else outputs.row(k, named=True)))
    if not kept:
        where = ", ".join(map(str, present))
        raise EmptyWindowError(f"The request log {where} holds no rows for model '{model}' yet.")
    frame = pl.DataFrame([row for _, row, _ in kept], infer_schema_length=None, strict=False)
    redacted = [
        name
        for name, dtype in frame.schema.items()
        if dtype == pl.String and frame[name].drop_nulls().eq(_REDACTED).all()
    ]
    answers = [answer for _, _, answer in kept]
    outputs = None
    if all(answer is not None for answer in answers):
        outputs = pl.DataFrame(answers, infer_schema_length=None, strict=False)
    return LoggedRequests(frame.drop(redacted), outputs, [stamp for stamp, _, _ in kept])


def read_window(log: Path, model: str, rows: int) -> pl.DataFrame:
    """The latest `rows` rows the server logged for `model` (its served name), oldest first.

    Raises:
        NotFoundError: there is no log at `log`.
        EmptyWindowError: the log holds no rows for `model`.
    """
    return read_requests([log], model, rows).frame


def reference_path(workspace: Workspace, name: str, version: int) -> Path:
    """Where the reference of model version `name@v{version}` is kept."""
    return Path(workspace.settings.home) / "monitor" / "references" / name / f"v{version}.json"


def _kept(path: Path) -> ReferenceProfile | None:
    if not path.is_file():
        return None
    try:
        return ReferenceProfile.from_json(path.read_bytes())
    except StaleReferenceError:
        return None  # an older forgeml's shape: rebuilt from the data below


def _features(found: ModelVersionRecord, frame: pl.DataFrame) -> pl.DataFrame:
    """The model's inputs: a text model's text column as `text`, else all but the target."""
    data = found.run.config.get("data") or {}
    text, target = data.get("text_column"), data.get("target")
    if text in frame.columns:
        return frame.select(pl.col(text).alias(TEXT_COLUMN))
    return frame.drop(target) if target in frame.columns else frame


def _predictions(
    workspace: Workspace, found: ModelVersionRecord, validation: pl.DataFrame, options: Any
) -> ReferenceProfile | None:
    """The profile of the model's answers on (at most PREDICTION_ROWS of) validation rows."""
    from forgeml.serve.model import load_model

    if validation.height == 0:
        return None
    model = load_model(workspace, found, "torch", threads=None)
    rows = validation.drop("__split__", strict=False).head(PREDICTION_ROWS)
    inputs: list[Any] = (
        rows.get_column(TEXT_COLUMN).to_list() if model.kind == "text" else rows.to_dicts()
    )
    outputs = model_outputs(model, inputs)
    return None if outputs is None else build_reference(outputs, options=options)


def model_reference(
    workspace: Workspace,
    model_ref: str,
    options: ReferenceOptions | None = None,
    *,
    any_project: bool = False,
) -> tuple[str, ReferenceProfile]:
    """The model version `model_ref` names (as NAME@vN) and its training data's reference.

    Args:
        any_project: read the reference of a version trained on another project's dataset
            than the workspace's: for the server's own reads (its gauges, and a route
            authorized in the project of the deployment or model it names), never for a
            reader acting in one project (the CLI).

    Raises:
        NotFoundError, UsageError: no such model version.
        ConfigError: the version records no dataset version to take a reference from.
        OtherProjectError: without `any_project`, the version was trained on a dataset of
            another project than the workspace's (checked before a kept reference is read).
    """
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    found = get_model_version(workspace, model_ref)
    ref = f"{found.name}@v{found.version}"
    if found.dataset_version is not None and not any_project:
        catalog.check_readable(workspace, found.dataset_version)
    path = reference_path(workspace, found.name, found.version)
    kept = _kept(path)
    if kept is not None:
        return ref, kept
    dataset = found.dataset_version
    if dataset is None:
        raise ConfigError(
            f"{ref} records no dataset version, so it has no reference to compare with; "
            "compare two dataset versions with --reference and --current instead."
        )
    split = catalog.SPLIT_COLUMN in dataset.schema
    frame = _features(found, catalog.read_frame(workspace, dataset, "train" if split else None))
    predictions = None
    if split:
        validation = _features(found, catalog.read_frame(workspace, dataset, "validation"))
        predictions = _predictions(workspace, found, validation, options)
    # build_reference leaves `__split__` out itself
    profile = build_reference(frame, options=options, predictions=predictions)
    atomic_write_text(path, profile.model_dump_json())
    return ref, profile


@dataclass(frozen=True)
class LiveSource:
    """Where a live check reads: the model version, the name it is served under, the logs."""

    model_ref: str  # NAME@vN (a deployment's primary) or the reference as given
    served: str | None  # the served name (None: the model version's own name)
    logs: list[Path]
    version: str | None  # only the requests this NAME@vN answered (a deployment's primary)
    deployment: str | None = None


def request_log_path(workspace: Workspace, served: str) -> Path:
    """The request log a server writes by default for model(s) served as `served`."""
    return Path(workspace.settings.home) / "logs" / "requests" / f"{served}.jsonl"


def deployment_source(workspace: Workspace, name: str) -> LiveSource | None:
    """The live source of deployment `name` (None: no live deployment has that name).

    Its replicas serve its primary model version under the deployment's name, so they
    log to that name's request log; logs beside their process logs count too. Only the
    primary's answers are read: a canary's rows are another model's traffic.
    """
    from forgeml.serve.deployments import get_deployment, log_dir

    try:
        deployment = get_deployment(workspace, name)
    except NotFoundError:
        return None
    if deployment.status == "deleted":
        return None
    logs = [request_log_path(workspace, name), *sorted(log_dir(workspace, name).glob("*.jsonl"))]
    model = deployment.spec.model
    return LiveSource(model, name, logs, version=model, deployment=name)
