from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from forgeml.core.workspace import Workspace
from forgeml.serve import ModelRepository, ServeOptions, build_app
from tests.cli.conftest import assert_cli_error, json_out


@pytest.fixture(scope="module")
def iris() -> tuple[Any, np.ndarray]:
    """A scikit-learn pipeline on Iris (string labels) and the rows to check it on."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    data = load_iris()
    labels = data.target_names[data.target]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    model.fit(data.data, labels)
    return model, data.data[::7].astype(np.float32)


@pytest.fixture(scope="module")
def iris_onnx(iris: tuple[Any, np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from skl2onnx import to_onnx

    model, rows = iris
    graph = to_onnx(model, rows[:1], options={"zipmap": False}, target_opset=17)
    path = tmp_path_factory.mktemp("iris") / "iris.onnx"
    path.write_bytes(graph.SerializeToString())
    return path


async def _post(repository: ModelRepository, path: str, body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=build_app(repository))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        return await client.post(path, json=body)


def _served(workspace: Workspace, ref: str, path: str, body: dict[str, Any]) -> Any:
    repository = ModelRepository(workspace, [ref], ServeOptions())
    repository.load()
    try:
        response = asyncio.run(_post(repository, path, body))
    finally:
        repository.close()
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow
def test_a_scikit_learn_model_imported_as_onnx_serves_sklearns_predictions(
    cli: Any, home_workspace: Workspace, iris: tuple[Any, np.ndarray], iris_onnx: Path
) -> None:
    model, rows = iris
    imported = json_out(cli("models", "import", str(iris_onnx), "--name", "iris", "--json"))
    assert imported["model"] == "iris@v1"
    assert imported["source"].startswith("onnx:iris.onnx@sha256:")
    expected_labels = model.predict(rows).tolist()
    expected = model.predict_proba(rows)

    body = {"instances": rows.tolist()}
    predictions = _served(home_workspace, "iris@v1", "/v1/models/iris:predict", body)
    predictions = predictions["predictions"]
    assert [p["label"] for p in predictions] == expected_labels
    got = np.array([[p["probabilities"][c] for c in model.classes_] for p in predictions])
    np.testing.assert_allclose(got, expected, atol=1e-5)

    infer = {
        "inputs": [
            {"name": "X", "datatype": "FP32", "shape": list(rows.shape), "data": rows.tolist()}
        ]
    }
    answer = _served(home_workspace, "iris@v1", "/v2/models/iris/infer", infer)
    outputs = {o["name"]: o for o in answer["outputs"]}
    assert outputs["label"]["data"] == expected_labels
    np.testing.assert_allclose(
        np.array(outputs["probabilities"]["data"]).reshape(expected.shape), expected, atol=1e-5
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PK\x03\x04 a zip", "is not a valid ONNX model"),
        (None, "does not exist or is not a file"),
    ],
    ids=["not-onnx", "missing"],
)
def test_importing_a_bad_onnx_file_is_one_sentence_and_records_nothing(
    cli: Any, tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    assert_cli_error(cli("models", "import", str(path), "--name", "m"), message)
    assert json_out(cli("models", "list", "--json")) == []


def test_a_zipmap_output_is_refused_with_the_export_option_to_use(
    cli: Any, iris: tuple[Any, np.ndarray], tmp_path: Path
) -> None:
    from skl2onnx import to_onnx

    model, rows = iris
    path = tmp_path / "zipmap.onnx"
    path.write_bytes(to_onnx(model, rows[:1], target_opset=17).SerializeToString())
    assert_cli_error(cli("models", "import", str(path), "--name", "m"), "'zipmap': False")


@pytest.fixture(scope="module")
def iris_mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, np.ndarray, Path]:
    """A scikit-learn MLP on Iris (MatMul layers, which int8 quantises) and its ONNX file."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.neural_network import MLPClassifier

    data = load_iris()
    model = MLPClassifier((64, 64), max_iter=2000, random_state=0).fit(data.data, data.target)
    rows = data.data.astype(np.float32)
    path = tmp_path_factory.mktemp("iris-mlp") / "mlp.onnx"
    graph = to_onnx(model, rows[:1], options={"zipmap": False}, target_opset=17)
    path.write_bytes(graph.SerializeToString())
    return model, rows, path


@pytest.mark.slow
def test_an_imported_graph_quantises_to_int8_with_its_parent_in_the_lineage(
    cli: Any, home_workspace: Workspace, iris_mlp: tuple[Any, np.ndarray, Path]
) -> None:
    model, rows, path = iris_mlp
    json_out(cli("models", "import", str(path), "--name", "iris", "--json"))
    result = cli("optimize", "iris@v1", "--quantize", "int8", "--json")
    assert result.code == 0, result.stderr
    shown = json_out(cli("models", "show", "iris@v2", "--json"))
    assert shown["parent"] == "iris@v1"
    assert 0 < shown["metrics"]["size_bytes"] < path.stat().st_size
    body = {"instances": rows.tolist()}
    predictions = _served(home_workspace, "iris@v2", "/v1/models/iris:predict", body)
    labels = [p["label"] for p in predictions["predictions"]]
    assert np.mean(np.array(labels) == model.predict(rows).astype(str)) >= 0.95
    refused = cli("optimize", "iris@v1", "--onnx")
    assert_cli_error(refused, "only --quantize int8 applies to it", code=2)


@pytest.mark.slow
def test_an_imported_graph_exports_as_an_edge_bundle_that_answers_as_sklearn(
    cli: Any, iris: tuple[Any, np.ndarray], iris_onnx: Path, tmp_path: Path
) -> None:
    from forgeml.optimize.edge.runner import EdgeModel

    model, rows = iris
    json_out(cli("models", "import", str(iris_onnx), "--name", "iris", "--json"))
    folder = tmp_path / "edge"
    exported = json_out(cli("models", "export", "iris", "--target", "edge", str(folder), "--json"))
    assert exported["precision"] == "fp32"
    assert sorted(exported["files"]) == ["model.json", "model.onnx", "runner.py"]
    answers = EdgeModel(folder).predict(rows.tolist())
    assert [a["label"] for a in answers] == model.predict(rows).tolist()
    got = np.array([a["probabilities"] for a in answers])
    np.testing.assert_allclose(got, model.predict_proba(rows), atol=1e-5)
