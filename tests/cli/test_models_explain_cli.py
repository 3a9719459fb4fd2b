import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.serve.conftest import adult_records, serve_template
from tests.train.conftest import copy_home

__all__ = ["serve_template"]  # the fixture, for this module


@pytest.fixture
def run(
    cli: Callable[..., Any], serve_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Any]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy_home(serve_template, tmp_path / "home")  # the FORGEML_HOME `cli` runs in
    return cli


def test_explain_json_answers_the_top_attributions(run: Callable[..., Any]) -> None:
    row = adult_records(1)[0]
    found = run("models", "explain", "adult-mlp@v1", "--input", json.dumps(row), "--top", "3",
                "--background", "20", "--json")  # fmt: skip
    assert found.code == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["model"] == "adult-mlp@v1"
    (explained,) = answer["explanations"]
    values = [abs(a["value"]) for a in explained["attributions"]]
    assert len(values) == 3 and values == sorted(values, reverse=True)
    gap = explained["prediction"] - explained["base_value"]
    assert explained["attributions_total"] == pytest.approx(gap, abs=1e-4)


def test_explain_reads_a_csv_of_rows(run: Callable[..., Any], tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    pl.DataFrame(adult_records(2, offset=5)).write_csv(rows)
    found = run("models", "explain", "adult-mlp@v1", "--input", rows, "--background", "10",
                "--json")  # fmt: skip
    assert found.code == 0, found.stderr
    assert len(json.loads(found.stdout)["explanations"]) == 2


def test_explain_prints_a_table_of_words(run: Callable[..., Any]) -> None:
    found = run("models", "explain", "sst2-minilm@v1", "--text", "a funny and moving film")
    assert found.code == 0, found.stderr
    for word in ("funny", "moving", "attribution", "integrated_gradients"):
        assert word in found.stdout


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["adult-mlp@v1", "--input", "{age: 39"], 2, "is not JSON"),
        (["adult-mlp@v1", "--input", '{"age": 39}'], 1, "has no field 'fnlwgt'"),
        (["nosuch", "--text", "hello"], 1, "'nosuch' is not registered"),
        (["adult-mlp@v1"], 2, "--input or one text with --text"),
        (["sst2-minilm@v1", "--text", "x", "--method", "lime"], 2, "Unknown method 'lime'"),
    ],
)
def test_explain_bad_input_is_one_sentence(
    run: Callable[..., Any], args: list[str], code: int, words: str
) -> None:
    found = run("models", "explain", *args)
    assert found.code == code
    assert words in found.stderr and "Traceback" not in found.stderr
