"""Labels that arrive later and live accuracy, on a real server over the Adult MLP.

The held-out test split of adult-mlp@v1's data is sent through the server, labelled by
request id, and measured; then a window of married people only (the model's hardest
subgroup: a shift in the subgroup mix), whose measured and estimated accuracy both drop.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from forgeml.serve.feedback import predictions_in_log
from tests.cli.conftest import assert_cli_error, json_out
from tests.monitor.conftest import label, send, stored, wait_logged
from tests.serve.conftest import LiveServer

pytestmark = pytest.mark.slow
CALM, SHIFTED = 1200, 600


def test_estimated_accuracy_follows_the_measured_one_and_both_drop_on_a_shift(
    server: LiveServer, test_split: pl.DataFrame, home: Path, at_home: Any
) -> None:
    calm = test_split.head(CALM)
    sent = send(server.url, calm, "calm")
    label(server.url, sent)
    wait_logged(home, sent[-1][0])

    before = json_out(at_home("monitor", "accuracy", "adult-mlp", "--window", CALM, "--json"))
    assert before["labelled_rows"] == CALM and before["estimated_rows"] == CALM
    assert before["estimated_from"] == "request log" and before["model"] == "adult-mlp@v1"
    assert 0.75 < before["accuracy"] < 0.95
    assert abs(before["estimated_accuracy"] - before["accuracy"]) < 0.03
    assert abs(before["reference_accuracy"] - before["accuracy"]) < 0.04
    kept = home / "monitor" / "references" / "adult-mlp" / "v1.calibration.json"
    assert kept.is_file()  # calibrated once, kept beside the model version's reference

    married = test_split.slice(CALM).filter(pl.col("marital-status") == "Married-civ-spouse")
    sent = send(server.url, married.head(SHIFTED), "married")
    label(server.url, sent)
    wait_logged(home, sent[-1][0])

    args = ["monitor", "accuracy", "adult-mlp", "--window", SHIFTED, "--slice", "sex", "--json"]
    after = json_out(at_home(*args))
    assert after["accuracy"] < before["accuracy"] - 0.05
    assert after["estimated_accuracy"] < before["estimated_accuracy"] - 0.05
    assert abs(after["estimated_accuracy"] - after["accuracy"]) < 0.04
    slices = {s["value"]: s for s in after["slices"]}
    assert set(slices) == {"Male", "Female"} and all(s["column"] == "sex" for s in slices.values())
    assert sum(s["rows"] for s in slices.values()) == SHIFTED
    right = sum(s["accuracy"] * s["rows"] for s in slices.values())
    assert right / SHIFTED == pytest.approx(after["accuracy"])

    table = at_home("monitor", "accuracy", "adult-mlp", "--window", SHIFTED, "--slice", "age")
    assert table.code == 0 and "age=[" in table.stdout and "estimated" in table.stdout


def test_labels_from_a_file_are_recorded_by_request_id(
    server: LiveServer, test_split: pl.DataFrame, home: Path, at_home: Any, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex  # ids of this run only: labelled again they would be replaced
    sent = send(server.url, test_split.slice(2000, 4), f"file-{run}")
    sent += send(server.url, test_split.slice(2010, 1), f"single-{run}")
    wait_logged(home, sent[-1][0])
    rows, events = stored(home)

    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_bytes(orjson.dumps({"id": sent[0][0], "label": sent[0][1]}) + b"\n")
    result = at_home("monitor", "feedback", jsonl, "--model", "adult-mlp")
    assert result.code == 0, result.stderr
    assert stored(home) == (rows + 4, events + 1)

    csv = tmp_path / "labels.csv"
    csv.write_text(f"id,label\n{sent[1][0]},{sent[1][1][0]}\n")
    assert at_home("monitor", "feedback", csv, "--model", "adult-mlp@v1").code == 0
    assert stored(home) == (rows + 5, events + 2)


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("id,label\nfile-0,<=50K\nnosuch,>50K\n", ".csv", "request id 'nosuch'"),
        ("request,label\nfile-0,<=50K\n", ".csv", "has no 'id' and 'label' columns"),
        ("id,label\n", ".csv", "holds no labels"),
        ("id,label\nfile-0,\n", ".csv", "Line 2 of"),
        ("id,label\nfile-0,a\nfile-0,b\n", ".csv", "labelled twice"),
        ('{"id": "file-0", "label": "<=50K"}\nnot json\n', ".jsonl", "Line 2 of"),
        ('{"id": "file-0"}\n', ".jsonl", "not an object with id and label"),
        ('{"id": "file-0", "label": ">50K"}\n', ".jsonl", "had 4 rows but its feedback gives 1"),
    ],
)
def test_a_bad_file_of_labels_records_nothing(
    server: LiveServer,
    test_split: pl.DataFrame,
    home: Path,
    at_home: Any,
    tmp_path: Path,
    content: str,
    suffix: str,
    message: str,
) -> None:
    if not predictions_in_log(
        home / "logs" / "requests" / "adult-mlp.jsonl", "adult-mlp", {"file-0"}
    ):
        wait_logged(home, send(server.url, test_split.slice(2000, 4), "file")[-1][0])
    path = tmp_path / f"labels{suffix}"
    path.write_text(content)
    before = stored(home)

    assert_cli_error(at_home("monitor", "feedback", path, "--model", "adult-mlp"), message)

    assert stored(home) == before


def test_feedback_and_accuracy_refuse_what_they_cannot_find(
    home: Path, at_home: Any, tmp_path: Path
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\nx,1\n")
    before = stored(home)
    assert_cli_error(
        at_home("monitor", "feedback", tmp_path / "none.csv", "--model", "adult-mlp"),
        "No file of labels",
    )
    assert_cli_error(at_home("monitor", "feedback", labels), "Give --model", code=2)
    assert_cli_error(
        at_home(
            "monitor", "feedback", labels, "--model", "adult-mlp", "--log", tmp_path / "no.jsonl"
        ),
        "No request log at",
    )
    assert_cli_error(at_home("monitor", "feedback", labels, "--deployment", "nosuch"), "nosuch")
    assert_cli_error(at_home("monitor", "accuracy", "nosuch"), "nosuch")
    assert_cli_error(
        at_home("monitor", "accuracy", "adult-mlp", "--slice", "height"), "column 'height'"
    )
    assert stored(home) == before


def test_a_logged_request_without_predictions_is_left_out(tmp_path: Path) -> None:
    from forgeml.monitor.accuracy import logged_predictions

    log = tmp_path / "requests.jsonl"
    answered = {"model": "m", "version": "m@v1", "instances": [{}, {}], "outputs": [1, 0]}
    refused = {"model": "m", "version": "m@v1", "instances": [{}], "error": "bad row"}
    log.write_bytes(b"\n".join(orjson.dumps(entry) for entry in (answered, refused)) + b"\n")

    predictions, version = logged_predictions(log, "m", rows=10)

    assert len(predictions) == 2
    assert version == "m@v1"
