"""Import labels made elsewhere: CSV, JSONL, or Label Studio's JSON export.

CSV and JSONL rows carry `item` (the row position in the task's dataset version) or the
column named by `key`, `annotator` (or the default given), and `label` (a class; for spans
and boxes a JSON list, as text in CSV). A Label Studio export is a list of tasks, each with
`data` (the row: `item` or the `key` column identifies it) and `annotations`, each with
`completed_by` and `result` regions of type `choices`, `labels` (text spans) or
`rectanglelabels` (boxes, in percent of the image: converted to pixels when the export
gives the image's size). See https://labelstud.io/guide/export#Label-Studio-JSON-format-of-annotated-tasks

The whole file is checked before anything is stored, and stored in one transaction: a bad
row leaves the task as it was.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgeml.core.errors import InvalidDataError, InvalidLabelError, LabelStateError
from forgeml.core.store import LabelAnnotationRecord
from forgeml.core.workspace import Workspace
from forgeml.label.schema import LabelSchema, check_label
from forgeml.label.tasks import annotations_of, get_own_task

FORMATS = ("csv", "jsonl", "label-studio")


@dataclass(frozen=True)
class ImportedLabel:
    """One label read from a file, its item still named as the file names it."""

    where: str  # "line 3", "task 2, annotation 1": for error sentences
    key: Any
    annotator: str
    value: Any


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "label-studio"
    raise InvalidDataError(
        f"Cannot tell the format of {path.name}: give --format ({', '.join(FORMATS)})."
    )


def read_labels(
    path: Path, file_format: str, annotator: str | None, key: str
) -> list[ImportedLabel]:
    """The labels in the file at `path` (see `parse_labels`).

    Raises:
        InvalidDataError: the file cannot be read or a row lacks what it needs.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidDataError(f"{path}: no such file.") from None
    except (UnicodeDecodeError, IsADirectoryError):
        raise InvalidDataError(f"{path} is not a UTF-8 text file.") from None
    return parse_labels(text, path.name, file_format, annotator, key)


def parse_labels(
    text: str, source: str, file_format: str, annotator: str | None, key: str
) -> list[ImportedLabel]:
    """The labels in `text` (a file's content; `source` names it in errors), not yet
    checked against a task.

    Raises:
        InvalidDataError: the text does not parse or a row lacks what it needs.
    """
    if file_format == "label-studio":
        return _label_studio(source, text, key)
    rows = _csv_rows(text) if file_format == "csv" else _jsonl_rows(source, text)
    found = []
    for where, row in rows:
        if key not in row or "label" not in row:
            raise InvalidDataError(f"{source} {where} lacks '{key}' or 'label'.")
        who = row.get("annotator") or annotator
        if not who:
            raise InvalidDataError(f"{source} {where} names no annotator; give --annotator.")
        value = row["label"]
        if file_format == "csv" and isinstance(value, str) and value.startswith("["):
            value = _json(source, where, value)
        found.append(ImportedLabel(where, row[key], str(who), value))
    return found


def _json(source: str, where: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidDataError(f"{source} {where} is not valid JSON ({error.msg}).") from None


def _csv_rows(text: str) -> list[tuple[str, dict[str, Any]]]:
    reader = csv.DictReader(text.splitlines())
    return [(f"line {number}", dict(row)) for number, row in enumerate(reader, start=2)]


def _jsonl_rows(source: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = _json(source, f"line {number}", line)
        if not isinstance(row, dict):
            raise InvalidDataError(f"{source} line {number} is not a JSON object.")
        rows.append((f"line {number}", row))
    return rows


def _label_studio(source: str, text: str, key: str) -> list[ImportedLabel]:
    tasks = _json(source, "(the whole file)", text)
    if not isinstance(tasks, list):
        raise InvalidDataError(f"{source} is not a Label Studio export (a JSON list of tasks).")
    found = []
    for t, task in enumerate(tasks, start=1):
        data = task.get("data") if isinstance(task, dict) else None
        if not isinstance(data, dict) or key not in data:
            raise InvalidDataError(f"{source} task {t} has no data.{key} naming its item.")
        annotations = task.get("annotations") or []
        for a, annotation in enumerate(annotations if isinstance(annotations, list) else [None], 1):
            where = f"task {t}, annotation {a}"
            if not isinstance(annotation, dict):
                raise InvalidDataError(f"{source} {where} is not a JSON object.")
            if annotation.get("was_cancelled"):
                continue
            value = _ls_value(source, where, annotation.get("result") or [])
            who = _ls_annotator(annotation.get("completed_by"))
            found.append(ImportedLabel(where, data[key], who, value))
    return found


def _ls_annotator(completed_by: Any) -> str:
    if isinstance(completed_by, dict):
        return str(completed_by.get("email") or completed_by.get("id"))
    return str(completed_by)


def _ls_value(source: str, where: str, results: list[Any]) -> Any:
    regions: list[dict[str, Any]] = []
    for result in results if isinstance(results, list) else [None]:
        if not isinstance(result, dict) or not isinstance(result.get("value"), dict):
            raise InvalidDataError(f"{source} {where} holds a result without a value object.")
        kind, value = result.get("type"), result["value"]
        try:
            found = _ls_region(kind, result, value)
        except (KeyError, TypeError, IndexError):
            found = None
        if found is None:
            raise InvalidDataError(
                f"{source} {where} holds a '{kind}' result forgeml does not read."
            )
        if kind == "choices":
            return found
        regions.append(found)
    return regions


def _ls_region(kind: Any, result: dict[str, Any], value: dict[str, Any]) -> Any:
    if kind == "choices":
        return value["choices"][0]
    if kind == "labels":
        return {"start": value["start"], "end": value["end"], "label": value["labels"][0]}
    if kind == "rectanglelabels":
        return _ls_box(result, value)
    return None


def _ls_box(result: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    # Label Studio gives x, y, width, height in percent of the image
    width = result.get("original_width")
    height = result.get("original_height")
    sx = width / 100 if width else 1.0
    sy = height / 100 if height else 1.0
    return {
        "x": round(value["x"] * sx, 3),
        "y": round(value["y"] * sy, 3),
        "width": round(value["width"] * sx, 3),
        "height": round(value["height"] * sy, 3),
        "label": value["rectanglelabels"][0],
    }


def import_labels(
    workspace: Workspace, name: str, labels: list[ImportedLabel], key: str
) -> dict[str, Any]:
    """Check `labels` against task `name` and store them all, or none.

    A label equal to one the annotator gave already is skipped (re-importing a file changes
    nothing); a different one is refused.

    Raises:
        OtherProjectError: the task or its dataset belongs to another project.
        InvalidLabelError: an item is not in the task or a label is outside the schema.
        LabelStateError: an annotator labelled an item differently already.
    """
    from forgeml.label.queue import item_row, store_annotation

    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        schema = LabelSchema.model_validate(task.label_schema)
        version_id, items = task.dataset_version_id, len(task.item_order)
    resolve = _item_resolver(workspace, version_id, key, items)
    checked = []
    for label in labels:
        item = resolve(label)
        row = item_row(workspace, version_id, item) if schema.kind == "spans" else None
        try:
            checked.append((item, label.annotator, check_label(schema, label.value, row)))
        except InvalidLabelError as error:
            raise InvalidLabelError(f"{label.where}: {error}") from None
    added = skipped = 0
    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        given = {(a.item, a.annotator): a for a in annotations_of(session, task)}
        for item, annotator, value in checked:
            known = given.get((item, annotator))
            if known is not None and known.value == value:
                skipped += 1
                continue
            if known is not None:
                raise LabelStateError(f"{annotator} labelled item {item} differently already.")
            store_annotation(session, task, item, annotator, value, False, "import")
            given[(item, annotator)] = LabelAnnotationRecord(value=value)
            added += 1
        workspace.audit(session, "label.import", name, {"added": added, "skipped": skipped})
    return {"task": name, "added": added, "skipped": skipped}


def _item_resolver(workspace: Workspace, version_id: str, key: str, items: int) -> Any:
    if key == "item":

        def by_position(label: ImportedLabel) -> int:
            try:
                item = int(label.key)
            except (TypeError, ValueError):
                raise InvalidLabelError(
                    f"{label.where}: item {label.key!r} is not a row number."
                ) from None
            if not 0 <= item < items:
                raise InvalidLabelError(
                    f"{label.where}: item {item} is not in the task (0..{items - 1})."
                )
            return item

        return by_position
    positions = _key_positions(workspace, version_id, key)

    def by_key(label: ImportedLabel) -> int:
        found = positions.get(str(label.key))
        if found is None:
            raise InvalidLabelError(f"{label.where}: no row has {key} = {label.key!r}.")
        return found

    return by_key


def _key_positions(workspace: Workspace, version_id: str, key: str) -> dict[str, int]:
    import polars as pl

    from forgeml.core.store import DatasetVersion
    from forgeml.data import catalog
    from forgeml.data._frame import require_columns

    with workspace.store.session() as session:
        version = session.get(DatasetVersion, version_id)
        if version is None:
            raise InvalidDataError("The dataset version of this label task is gone.")
        catalog.check_readable(workspace, version)
    frame = catalog.read_frame(workspace, version)
    require_columns(frame, [key], "--key")
    values = frame[key].cast(pl.String).to_list()
    if len(set(values)) != len(values):
        raise InvalidDataError(f"Column '{key}' repeats values, so it cannot name items; use item.")
    return {value: position for position, value in enumerate(values)}
