from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from forgeml.serve import ServeOptions
from tests.serve.conftest import LiveServer, adult_records, open_home

REFS = ["adult-mlp@v1", "sst2-minilm@v1"]


@pytest.fixture(scope="module")
def server(served_home: Path) -> Iterator[LiveServer]:
    workspace = open_home(served_home)
    live = LiveServer(workspace, REFS, ServeOptions()).start()
    yield live
    live.stop()
    workspace.close()


def _post(server: LiveServer, name: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else None
    payload = None if isinstance(body, bytes) else body
    with httpx.Client(timeout=120) as client:
        return client.post(f"{server.url}/v2/models/{name}/explain", json=payload, content=content)


def test_a_tabular_row_is_explained_by_kernel_shap_against_training_rows(
    server: LiveServer,
) -> None:
    row = adult_records(1, offset=2)[0]
    answer = _post(server, "adult-mlp", {"instances": [row], "top": 4})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["model"] == "adult-mlp@v1"
    (explained,) = found["explanations"]
    assert explained["method"] == "kernel_shap" and explained["background_rows"] == 50
    assert len(explained["attributions"]) == 4
    assert {a["feature"] for a in explained["attributions"]} <= set(row)
    gap = explained["prediction"] - explained["base_value"]
    assert explained["attributions_total"] == pytest.approx(gap, abs=1e-4)
    with httpx.Client(timeout=60) as client:
        predicted = client.post(
            f"{server.url}/v1/models/adult-mlp:predict", json={"instances": [row]}
        ).json()["predictions"][0]
    assert explained["label"] == predicted["label"]
    probability = predicted["probabilities"][predicted["label"]]
    assert explained["prediction"] == pytest.approx(probability, abs=1e-5)


def test_a_text_is_explained_word_by_word(server: LiveServer) -> None:
    text = "a gripping , funny and deeply moving film"
    answer = _post(server, "sst2-minilm", {"instances": [text]})
    assert answer.status_code == 200, answer.text
    (explained,) = answer.json()["explanations"]
    assert explained["method"] == "integrated_gradients"
    words = sorted(explained["attributions"], key=lambda a: a["position"])
    assert " ".join(a["feature"] for a in words) == text
    gap = explained["prediction"] - explained["base_value"]
    assert explained["attributions_total"] == pytest.approx(gap, abs=0.02)


@pytest.mark.parametrize(
    ("name", "body", "status", "words"),
    [
        ("adult-mlp", {"instances": [{"age": 39}]}, 422, "has no field 'fnlwgt'"),
        ("adult-mlp", {"instances": []}, 422, "instances"),
        ("adult-mlp", b"{not json", 400, "not valid JSON"),
        ("nosuch", {"instances": ["x"]}, 404, "no model 'nosuch'"),
        ("sst2-minilm", {"instances": [7]}, 422, "takes strings"),
        (
            "sst2-minilm",
            {"instances": ["fine"], "method": "kernel_shap"},
            422,
            "integrated_gradients",
        ),
    ],
)
def test_bad_requests_answer_one_json_error(
    server: LiveServer, name: str, body: Any, status: int, words: str
) -> None:
    answer = _post(server, name, body)
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]
