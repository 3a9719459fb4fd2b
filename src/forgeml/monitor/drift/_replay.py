"""A model server's whole request log, row by row with times, to replay through the online
drift detector.

The log is the JSON-lines file `forgeml.serve.request_log` writes (see `_live.py`): each
record a request with its time (`ts`, Unix seconds) and its instances, a row each. Every
row of one served model is read, oldest first, with the time of its request; the detector
then sees them in that order, and each alarm is placed at its row and time
(`forgeml monitor online`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from forgeml.core.errors import EmptyWindowError, NotFoundError, UsageError
from forgeml.monitor.drift._live import TEXT_COLUMN


@dataclass(frozen=True)
class LoggedRows:
    """Every row one model received, oldest first, and the time of each row's request."""

    model: str
    rows: pl.DataFrame
    times: list[float | None]


def _entries(log: Path) -> list[dict[str, Any]]:
    if not log.is_file():
        raise NotFoundError(
            f"No request log at {log}: serve the model with --log-sample-rate above 0 "
            "(or name the log with --log)."
        )
    found = []
    with log.open("rb") as lines:
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the last line may be half-written
            if isinstance(entry, dict) and isinstance(entry.get("model"), str):
                found.append(entry)
    return found


def read_log(log: Path, model: str | None = None) -> LoggedRows:
    """The rows `model` (its served name) received, with their request times.

    Args:
        log: the request log.
        model: the served name; None when the log holds one model's requests only.

    Raises:
        NotFoundError: there is no log at `log`.
        UsageError: `model` is None and the log holds several models' requests.
        EmptyWindowError: the log holds no rows for the model.
    """
    entries = _entries(log)
    if model is None:
        names = sorted({entry["model"] for entry in entries})
        if len(names) > 1:
            raise UsageError(
                f"The request log {log} holds requests for {len(names)} models "
                f"({', '.join(names)}): name one with --name."
            )
        model = names[0] if names else "(any)"
    rows: list[dict[str, Any]] = []
    times: list[float | None] = []
    for entry in entries:
        if entry["model"] != model:
            continue
        stamp = entry.get("ts")
        for instance in entry.get("instances") or []:
            if isinstance(instance, dict):
                rows.append(instance)
            elif isinstance(instance, str):
                rows.append({TEXT_COLUMN: instance})
            else:
                continue
            times.append(float(stamp) if isinstance(stamp, int | float) else None)
    if not rows:
        raise EmptyWindowError(f"The request log {log} holds no rows for model '{model}' yet.")
    return LoggedRows(model, pl.DataFrame(rows, infer_schema_length=None, strict=False), times)
