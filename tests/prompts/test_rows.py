from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgeml.core.errors import InvalidDataError, NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.prompts import load_rows

ROWS = [{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("rows.jsonl", "".join(json.dumps(row) + "\n" for row in ROWS)),
        ("rows.json", json.dumps(ROWS)),
        ("rows.csv", "question,answer\na,1\nb,2\n"),
    ],
)
def test_a_file_of_rows_reads_as_dicts(
    workspace: Workspace, tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")

    rows, version = load_rows(workspace, str(tmp_path / name))

    assert rows == ROWS
    assert version is None


@pytest.mark.parametrize(
    ("name", "text", "sentence"),
    [
        ("empty.jsonl", "", "holds no rows to evaluate on."),
        ("bad.jsonl", "{not json\n", "cannot be read as rows"),
        ("list.json", "[1, 2]", "must hold JSON objects, one per row."),
    ],
)
def test_a_file_that_is_not_rows_is_one_sentence(
    workspace: Workspace, tmp_path: Path, name: str, text: str, sentence: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")

    with pytest.raises(InvalidDataError, match=sentence):
        load_rows(workspace, str(tmp_path / name))


@pytest.mark.parametrize(
    ("source", "sentence"),
    [
        ("missing.jsonl", "The data file missing.jsonl does not exist."),
        ("nosuch@v1", "Dataset 'nosuch' does not exist"),
    ],
)
def test_a_missing_source_is_not_found(workspace: Workspace, source: str, sentence: str) -> None:
    with pytest.raises(NotFoundError, match=sentence):
        load_rows(workspace, source)
