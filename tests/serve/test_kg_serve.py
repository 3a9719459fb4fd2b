from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from forgeml.serve import ServeOptions
from forgeml.tracking import download_bundle, get_model_version
from forgeml.train.models.kg import KGEmbedding, TripleVocab, rank_tails, score_triples
from forgeml.train.recipe import load_bundle_model
from tests.serve.conftest import LiveServer, open_home
from tests.train._kg_home import MODEL, wordnet_trained_template
from tests.train.conftest import EXAMPLES, copy_home

pytestmark = pytest.mark.slow

HEAD, RELATION = "breathe.v.01", "_hypernym"


@pytest.fixture(scope="module")
def kg_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    template = wordnet_trained_template(tmp_path_factory)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield copy_home(template, tmp_path_factory.mktemp("kg-served") / "home")


@pytest.fixture(scope="module")
def library(kg_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, TripleVocab]:
    """The PyTorch model of @v1 and its vocabulary, from the bundle, for reference answers."""
    workspace = open_home(kg_home)
    try:
        record = get_model_version(workspace, f"{MODEL}@v1")
        bundle = download_bundle(workspace, record, tmp_path_factory.mktemp("kg-bundle"))
    finally:
        workspace.close()
    description = json.loads((bundle / "model.json").read_text())
    model = load_bundle_model(bundle)
    assert isinstance(model, KGEmbedding)
    return model, TripleVocab.from_state(description["tokenizer"])


@pytest.fixture(scope="module", params=["torch", "onnx"])
def server(request: pytest.FixtureRequest, kg_home: Path) -> Iterator[str]:
    """wn-rotate@v1 on the torch runtime, or its ONNX export @v2 on ONNX Runtime."""
    version = "v1" if request.param == "torch" else "v2"
    workspace = open_home(kg_home)
    live = LiveServer(workspace, [f"{MODEL}@{version}"], ServeOptions(runtime=request.param))
    live.start()
    yield live.url
    live.stop()
    workspace.close()


def _v2(url: str, inputs: dict[str, list[Any]], outputs: list[str] | None = None) -> httpx.Response:
    tensors = [
        {
            "name": name,
            "datatype": "INT64" if name == "k" else "BYTES",
            "shape": [len(values)],
            "data": values,
        }
        for name, values in inputs.items()
    ]
    body: dict[str, Any] = {"inputs": tensors}
    if outputs is not None:
        body["outputs"] = [{"name": name} for name in outputs]
    return httpx.post(f"{url}/v2/models/{MODEL}/infer", json=body)


def _predict(url: str, body: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/models/{MODEL}:predict", json=body)


def test_the_metadata_lists_the_names_in_and_the_answers_out(server: str) -> None:
    metadata = httpx.get(f"{server}/v2/models/{MODEL}").json()

    assert [(i["name"], i["datatype"]) for i in metadata["inputs"]] == [
        ("head", "BYTES"),
        ("relation", "BYTES"),
        ("tail", "BYTES"),
        ("k", "INT64"),
    ]
    assert [(o["name"], o["shape"]) for o in metadata["outputs"]] == [
        ("score", [-1]),
        ("tails", [-1, -1]),
        ("tail_scores", [-1, -1]),
    ]


def test_v2_ranks_the_tails_the_library_ranks_best_first(
    server: str, library: tuple[Any, TripleVocab]
) -> None:
    model, vocab = library
    expected = rank_tails(model, vocab, HEAD, RELATION, k=5)

    response = _v2(server, {"head": [HEAD], "relation": [RELATION], "k": [5]})

    assert response.status_code == 200, response.text
    outputs = {o["name"]: o for o in response.json()["outputs"]}
    assert outputs["tails"]["shape"] == [1, 5]
    assert outputs["tails"]["data"] == [name for name, _ in expected]
    np.testing.assert_allclose(outputs["tail_scores"]["data"], [s for _, s in expected], atol=1e-4)
    assert outputs["tail_scores"]["data"] == sorted(outputs["tail_scores"]["data"], reverse=True)
    assert outputs["score"]["data"] == [None]  # no tail given: nothing to score


def test_v2_scores_triples_as_the_library_does(
    server: str, library: tuple[Any, TripleVocab]
) -> None:
    model, vocab = library
    best = rank_tails(model, vocab, HEAD, RELATION, k=1)[0][0]
    triples = [(HEAD, RELATION, best), (HEAD, RELATION, "sleep.v.01")]
    heads, relations, tails = (list(column) for column in zip(*triples, strict=True))

    response = _v2(server, {"head": heads, "relation": relations, "tail": tails}, ["score"])

    assert response.status_code == 200, response.text
    (output,) = response.json()["outputs"]
    assert output["name"] == "score" and output["shape"] == [2]
    np.testing.assert_allclose(output["data"], score_triples(model, vocab, triples), atol=1e-4)
    assert output["data"][0] > output["data"][1]


def test_predict_answers_a_score_and_the_best_tails_per_instance(
    server: str, library: tuple[Any, TripleVocab]
) -> None:
    model, vocab = library
    rows = [
        {"head": HEAD, "relation": RELATION, "tail": "sleep.v.01", "k": 3},
        {"head": "sleep.v.01", "relation": RELATION, "k": 3},
    ]

    response = _predict(server, {"instances": rows})

    assert response.status_code == 200, response.text
    first, second = response.json()["predictions"]
    assert first["score"] == pytest.approx(
        score_triples(model, vocab, [(HEAD, RELATION, "sleep.v.01")])[0], abs=1e-4
    )
    assert second["score"] is None
    assert second["tails"] == [
        name for name, _ in rank_tails(model, vocab, "sleep.v.01", RELATION, 3)
    ]
    assert len(second["tail_scores"]) == 3


@pytest.mark.parametrize(
    ("row", "named"),
    [
        ({"head": "unicorn.v.01", "relation": RELATION}, "Entity 'unicorn.v.01'"),
        ({"head": HEAD, "relation": "_part_of"}, "Relation '_part_of'"),
        ({"head": HEAD, "relation": RELATION, "tail": "unicorn.v.01"}, "Entity 'unicorn.v.01'"),
        ({"head": HEAD}, "no 'relation'"),
        ({"head": HEAD, "relation": RELATION, "k": 0}, "Field 'k' of instance 0 is 0"),
        ({"head": HEAD, "relation": RELATION, "label": "x"}, "field 'label'"),
    ],
)
def test_a_bad_instance_is_a_422_naming_what_is_wrong(
    server: str, row: dict[str, Any], named: str
) -> None:
    response = _predict(server, {"instances": [row]})

    assert response.status_code == 422, response.text
    assert named in response.json()["error"]
    assert "Traceback" not in response.text


def test_an_unknown_entity_over_v2_is_a_422_naming_it(server: str) -> None:
    response = _v2(server, {"head": ["unicorn.v.01"], "relation": [RELATION]})

    assert response.status_code == 422
    assert response.json() == {
        "error": "Instance 0: Entity 'unicorn.v.01' is not one of the graph's 2770 entities."
    }


def test_one_request_asks_for_one_k(server: str) -> None:
    rows = [{"head": HEAD, "relation": RELATION, "k": 2}, {"head": HEAD, "relation": RELATION}]

    response = _predict(server, {"instances": rows})

    assert response.status_code == 422
    assert "different k ([2, 10])" in response.json()["error"]


def test_the_readme_query_is_answered(server: str) -> None:
    readme = (EXAMPLES / "wordnet" / "README.md").read_text(encoding="utf-8")
    (body,) = re.findall(r"curl .*?:predict.*?-d '(.*?)'", readme, re.S)

    response = _predict(server, json.loads(body))

    assert response.status_code == 200, response.text
    (prediction,) = response.json()["predictions"]
    assert len(prediction["tails"]) == json.loads(body)["instances"][0]["k"]
