from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgeml.core.errors import InvalidDataError, InvalidLabelError, LabelStateError
from forgeml.core.workspace import Workspace
from forgeml.label import describe_task, import_labels, read_labels, task_agreement
from tests.label.conftest import make_task


def _import(workspace: Workspace, path: Path, fmt: str, key: str = "item", **kw: str) -> dict:
    return import_labels(
        workspace, "sentiment", read_labels(path, fmt, kw.get("annotator"), key), key
    )


def test_csv_labels_import_by_item_and_again_change_nothing(
    reviews: Workspace, tmp_path: Path
) -> None:
    make_task(reviews)
    path = tmp_path / "labels.csv"
    path.write_text("item,annotator,label\n0,ann,pos\n1,ann,neg\n0,bob,pos\n")
    assert _import(reviews, path, "csv") == {"task": "sentiment", "added": 3, "skipped": 0}
    assert _import(reviews, path, "csv")["skipped"] == 3
    assert describe_task(reviews, "sentiment")["progress"]["by_annotator"] == {"ann": 2, "bob": 1}


def test_jsonl_labels_import_by_a_key_column(reviews: Workspace, tmp_path: Path) -> None:
    make_task(reviews)
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "r2", "label": "pos"}\n\n{"id": "r3", "label": "neg"}\n')
    assert _import(reviews, path, "jsonl", key="id", annotator="carol")["added"] == 2


def test_a_bad_row_stores_nothing(reviews: Workspace, tmp_path: Path) -> None:
    make_task(reviews)
    path = tmp_path / "labels.csv"
    path.write_text("item,annotator,label\n0,ann,pos\n1,ann,awful\n")
    with pytest.raises(InvalidLabelError, match="line 3: Label 'awful' is not one of"):
        _import(reviews, path, "csv")
    assert describe_task(reviews, "sentiment")["progress"]["labels"] == 0
    path.write_text("item,annotator,label\n9,ann,pos\n")
    with pytest.raises(InvalidLabelError, match="item 9 is not in the task"):
        _import(reviews, path, "csv")
    path.write_text("item,label\n0,pos\n")
    with pytest.raises(InvalidDataError, match="names no annotator"):
        _import(reviews, path, "csv")
    path.write_text("item,annotator,label\n0,ann,pos\n")
    _import(reviews, path, "csv")
    path.write_text("item,annotator,label\n0,ann,neg\n")
    with pytest.raises(LabelStateError, match="differently already"):
        _import(reviews, path, "csv")


def _ls_task(key: str, results: list[dict], who: object) -> dict:
    return {"id": 17, "data": {"id": key, "text": "..."}, "annotations": [
        {"id": 1, "completed_by": who, "result": results, "was_cancelled": False}
    ]}  # fmt: skip


def test_label_studio_export_imports_choices_and_agreement_follows(
    reviews: Workspace, tmp_path: Path
) -> None:
    make_task(reviews, overlap=2)
    choice = [{"type": "choices", "from_name": "sentiment", "to_name": "text",
               "value": {"choices": ["pos"]}}]  # fmt: skip
    other = [{"type": "choices", "value": {"choices": ["neg"]}}]
    tasks = [
        _ls_task("r0", choice, {"id": 1, "email": "ann@example.org"}),
        _ls_task("r0", choice, 2),
        _ls_task("r1", other, {"id": 1, "email": "ann@example.org"}),
        _ls_task("r1", choice, 2),
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    assert _import(reviews, path, "label-studio", key="id")["added"] == 4
    found = task_agreement(reviews, "sentiment")
    assert found["pairs"][0]["annotators"] == ["2", "ann@example.org"]
    assert found["pairs"][0]["observed"] == 0.5
    assert found["fleiss"]["items"] == 2


def test_label_studio_spans_and_boxes_convert(tmp_path: Path) -> None:
    span = {"type": "labels", "value": {"start": 0, "end": 5, "text": "Paris", "labels": ["PLACE"]}}
    region = {"x": 10, "y": 20, "width": 50, "height": 50, "rectanglelabels": ["cat"]}
    box = {"type": "rectanglelabels", "original_width": 200, "original_height": 100}
    box["value"] = region
    path = tmp_path / "export.json"
    path.write_text(json.dumps([_ls_task("r5", [span], 3), _ls_task("r6", [box], 3)]))
    spans, boxes = read_labels(path, "label-studio", None, "id")
    assert spans.value == [{"start": 0, "end": 5, "label": "PLACE"}]
    assert boxes.value == [{"x": 20.0, "y": 20.0, "width": 100.0, "height": 50.0, "label": "cat"}]


def test_unreadable_files_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(InvalidDataError, match="no such file"):
        read_labels(tmp_path / "missing.csv", "csv", None, "item")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(InvalidDataError, match="line 1 is not valid JSON"):
        read_labels(bad, "jsonl", None, "item")
    ls = tmp_path / "bad.json"
    ls.write_text(json.dumps({"tasks": []}))
    with pytest.raises(InvalidDataError, match="not a Label Studio export"):
        read_labels(ls, "label-studio", None, "item")
