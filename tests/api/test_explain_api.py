"""`POST /api/v1/models/{name}/versions/{version}/explain` over a trained Adult model: the
answer is what `models explain --json` prints for the same row, the work is bounded, and
bad input answers a JSON sentence with the CLI's error class's status."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forgeml.api._explain import MAX_API_BACKGROUND, MAX_API_ROWS
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client, copied_workspace
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.serve.conftest import adult_records
from tests.train.conftest import trained_adult_template

EXPLAIN = "/api/v1/models/adult-mlp/versions/1/explain"


@pytest.fixture
def workspace(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with copied_workspace(trained_adult_template(tmp_path_factory), tmp_path / "home") as workspace:
        yield workspace


@pytest.fixture
def api(workspace: Workspace) -> Iterator[TestClient]:
    with api_client(workspace) as client:
        yield client


@pytest.mark.parametrize("method", [None, "integrated_gradients"])
def test_the_answer_is_what_the_cli_prints(
    api: TestClient, cli: Callable[..., CliResult], method: str | None
) -> None:
    rows = adult_records(2)
    body = {"inputs": rows, "top": 4, "background": 8} | ({"method": method} if method else {})

    answer = api.post(EXPLAIN, json=body)

    assert answer.status_code == 200, answer.text
    args = ["--input", json.dumps(rows), "--top", "4", "--background", "8", "--json"]
    printed = json_out(cli("models", "explain", "adult-mlp@v1", *args,
                           *(["--method", method] if method else [])))  # fmt: skip
    assert answer.json() == printed
    found = answer.json()
    assert found["model"] == "adult-mlp@v1" and len(found["explanations"]) == 2
    first = found["explanations"][0]
    assert len(first["attributions"]) == 4
    magnitudes = [abs(a["value"]) for a in first["attributions"]]
    assert magnitudes == sorted(magnitudes, reverse=True)


def test_kernel_shap_attributions_add_up_to_the_prediction(api: TestClient) -> None:
    answer = api.post(EXPLAIN, json={"inputs": adult_records(1), "background": 10})

    found = answer.json()["explanations"][0]
    assert found["method"] == "kernel_shap"
    total = found["base_value"] + found["attributions_total"]
    assert total == pytest.approx(found["prediction"], abs=1e-4)
    assert len(found["attributions"]) == 14  # every Adult feature without --top


def _without(field: str) -> dict[str, object]:
    row = adult_records(1)[0]
    del row[field]
    return row


@pytest.mark.parametrize(
    ("url", "body", "status", "sentence"),
    [
        ("/api/v1/models/adult-mlp/versions/9/explain", {"inputs": adult_records(1)}, 404,
         "has no version v9"),
        ("/api/v1/models/nosuch/versions/1/explain", {"inputs": adult_records(1)}, 404,
         "is not registered"),
        (EXPLAIN, {"inputs": [_without("age")]}, 422, "age"),
        (EXPLAIN, {"inputs": adult_records(1), "method": "integrated_gradients", "top": 1,
                   "text": "two things at once"}, 400, "Give the rows to explain"),
        (EXPLAIN, {"top": 3}, 400, "Give the rows to explain"),
        (EXPLAIN, {"text": "a funny film"}, 422, ""),
    ],
)  # fmt: skip
def test_errors_are_json_sentences(
    api: TestClient, url: str, body: object, status: int, sentence: str
) -> None:
    answer = api.post(url, json=body)

    assert answer.status_code == status, answer.text
    assert sentence in answer.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": adult_records(MAX_API_ROWS + 1)},  # the work is bounded
        {"inputs": adult_records(1), "background": MAX_API_BACKGROUND + 1},
        {"inputs": []},
        {"inputs": adult_records(1), "method": "lime"},
        {"inputs": adult_records(1), "top": 0},
        {"inputs": adult_records(1), "seed": 3},
    ],
)
def test_malformed_requests_are_422(api: TestClient, body: object) -> None:
    assert api.post(EXPLAIN, json=body).status_code == 422
