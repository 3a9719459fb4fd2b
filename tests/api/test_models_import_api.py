from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.api._accounts_app import accounts_client, seed


@pytest.fixture
def owner_client(workspace, tmp_path):
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace, settings, {"alice": ("owner", "default"), "carol": ("viewer", "default")}
    )
    with client:
        yield client, tokens


def _iris_bytes() -> bytes:
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    data = load_iris()
    model = LogisticRegression(max_iter=300).fit(data.data, data.target)
    rows = data.data[:1].astype(np.float32)
    return to_onnx(model, rows, options={"zipmap": False}, target_opset=17).SerializeToString()


def test_an_uploaded_onnx_graph_is_registered_for_an_owner_and_refused_for_a_viewer(
    owner_client, tmp_path: Path
) -> None:
    client, tokens = owner_client
    graph = _iris_bytes()
    headers = {"Content-Type": "application/octet-stream"}
    viewer = client.post(
        "/api/v1/models/import?name=iris", content=graph,
        headers={**headers, "Authorization": f"Bearer {tokens['carol']}"},
    )  # fmt: skip
    assert viewer.status_code == 403
    owner = {**headers, "Authorization": f"Bearer {tokens['alice']}"}
    done = client.post("/api/v1/models/import?name=iris", content=graph, headers=owner)
    assert done.status_code == 200, done.text
    assert done.json()["model"] == "iris@v1"
    assert done.json()["source"].startswith("onnx:upload.onnx@sha256:")
    bad = client.post("/api/v1/models/import?name=junk", content=b"not onnx", headers=owner)
    assert bad.status_code == 422, bad.text
    assert "upload.onnx is not a valid ONNX model" in bad.json()["error"]
