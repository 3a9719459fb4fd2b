from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from forgeml.serve import ModelRepository, ServeOptions, build_app
from tests.serve.conftest import adult_records, open_home

pytestmark = pytest.mark.slow


async def _predict(repository: ModelRepository, body: dict[str, object]) -> httpx.Response:
    transport = httpx.ASGITransport(app=build_app(repository))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        return await client.post("/v1/models/adult-small:predict", json=body)


def test_the_onnx_runtime_serves_an_exported_version_as_torch_serves_its_parent(
    served_home: Path,
) -> None:
    from forgeml.optimize import OptimizeRequest, optimize_model

    workspace = open_home(served_home)
    request = OptimizeRequest(mode="onnx", verify_rows=16, latency_repeats=2)
    exported = optimize_model(workspace, "adult-small@v1", request).model
    body = {"instances": adult_records(6)}
    answers = {}
    for runtime, ref in (("onnx", exported.ref), ("torch", "adult-small@v1")):
        repository = ModelRepository(workspace, [ref], ServeOptions(runtime=runtime))
        repository.load()
        try:
            response = asyncio.run(_predict(repository, body))
        finally:
            repository.close()
        assert response.status_code == 200, response.text
        answers[runtime] = [p["probabilities"][">50K"] for p in response.json()["predictions"]]
    workspace.close()
    np.testing.assert_allclose(answers["onnx"], answers["torch"], atol=1e-5)
