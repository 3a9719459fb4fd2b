"""Labels from a file, joined to the logged predictions they name (`forgeml monitor feedback`).

A file of labels is CSV with a header, or JSON lines (`.jsonl`, `.ndjson`), holding an `id`
(a request id, `forgeml.serve.request_ids`) and a `label` per line. The ids are looked up
in the served model's request log, as a model server looks up those it no longer keeps
in memory (`forgeml.serve.feedback`), and the rows are recorded in one transaction: an
unknown id, a bad line or a bad file records nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from forgeml.core.errors import InvalidDataError, NotFoundError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.feedback import Label

_JSON_LINES = (".jsonl", ".ndjson")


def _csv_labels(path: Path) -> list[tuple[int, Any, Any]]:
    import csv

    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"id", "label"} <= set(reader.fieldnames):
            raise InvalidDataError(
                f"{path} has no 'id' and 'label' columns in its header "
                f"(it has: {', '.join(reader.fieldnames or []) or 'none'})."
            )
        return [(number, row["id"], row["label"]) for number, row in enumerate(reader, start=2)]


def _json_labels(path: Path) -> list[tuple[int, Any, Any]]:
    found = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise InvalidDataError(f"Line {number} of {path} is not JSON.") from None
        if not isinstance(entry, dict) or not {"id", "label"} <= set(entry):
            raise InvalidDataError(f"Line {number} of {path} is not an object with id and label.")
        found.append((number, entry["id"], entry["label"]))
    return found


def read_labels(path: Path) -> list[Label]:
    """The labels in the CSV or JSON-lines file at `path`.

    Raises:
        NotFoundError: there is no file at `path`.
        InvalidDataError: the file is not CSV or JSON lines with id and label, a line's
            id or label is empty, an id comes twice, or the file holds no labels.
    """
    from forgeml.serve.feedback import Label

    if not path.is_file():
        raise NotFoundError(f"No file of labels at {path}.")
    try:
        lines = _json_labels(path) if path.suffix.lower() in _JSON_LINES else _csv_labels(path)
    except UnicodeDecodeError:
        raise InvalidDataError(f"{path} is not UTF-8 text (CSV or JSON lines).") from None
    labels: dict[str, Label] = {}
    for number, request_id, label in lines:
        if not isinstance(request_id, str) or not request_id:
            raise InvalidDataError(f"Line {number} of {path} has no request id.")
        if label is None or label == "":
            raise InvalidDataError(f"Line {number} of {path} has no label.")
        if request_id in labels:
            raise InvalidDataError(
                f"Request id '{request_id}' is labelled twice in {path} (again on line {number})."
            )
        labels[request_id] = Label(request_id, label)
    if not labels:
        raise InvalidDataError(f"{path} holds no labels.")
    return list(labels.values())


def record_file(workspace: Workspace, path: Path, served: str, log: Path) -> tuple[int, int]:
    """Record the labels of `path` for served model `served`, its ids found in `log`.

    Returns the requests and rows recorded.

    Raises:
        NotFoundError: no file, or an id the log does not hold (nothing is recorded).
        InvalidDataError: a bad file or label (nothing is recorded).
    """
    from forgeml.serve.feedback import find_predictions, join, record_feedback

    labels = read_labels(path)
    if not log.is_file():
        raise NotFoundError(
            f"No request log at {log}: feedback names logged requests, so serve '{served}' "
            "with --log-sample-rate above 0 (or name the log with --log)."
        )
    found = find_predictions(served, {label.request_id for label in labels}, None, log)
    rows = join(labels, found)
    return len(labels), record_feedback(workspace, rows, "file")
