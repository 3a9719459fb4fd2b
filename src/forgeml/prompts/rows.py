"""The rows `prompts eval` runs over: a JSONL, JSON or CSV file, or a dataset version."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import InvalidDataError, NotFoundError

if TYPE_CHECKING:
    from forgeml.core.store import DatasetVersion
    from forgeml.core.workspace import Workspace


def load_rows(
    workspace: Workspace, source: str
) -> tuple[list[dict[str, Any]], DatasetVersion | None]:
    """The rows of `source` (a file path, else a dataset reference) and its dataset version.

    Raises:
        InvalidDataError: the file cannot be read as rows, or holds none.
        NotFoundError: `source` is neither a file nor a dataset.
        OtherProjectError: `source` is a dataset of another project than the workspace's.
    """
    path = Path(source)
    version = None
    if path.is_file():
        rows = _file_rows(path)
    elif "/" in source or path.suffix in (".jsonl", ".json", ".csv"):
        raise NotFoundError(f"The data file {source} does not exist.")
    else:
        version, rows = _dataset_rows(workspace, source)
    if not rows:
        raise InvalidDataError(f"{source} holds no rows to evaluate on.")
    return rows, version


def _file_rows(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".csv":
            return [dict(row) for row in csv.DictReader(text.splitlines())]
        if path.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidDataError(f"{path} cannot be read as rows: {error}.") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InvalidDataError(f"{path} must hold JSON objects, one per row.")
    return rows


def _dataset_rows(workspace: Workspace, ref: str) -> tuple[DatasetVersion, list[dict[str, Any]]]:
    from forgeml.data.catalog import read_frame, resolve_to_read

    with workspace.store.session() as session:
        version = resolve_to_read(workspace, session, ref)
    return version, read_frame(workspace, version).to_dicts()
