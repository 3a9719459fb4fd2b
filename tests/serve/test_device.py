from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest
import torch

from forgeml.core import devices
from forgeml.serve import ModelRepository, ServeOptions, build_app
from tests.serve.conftest import adult_records, open_home


async def _predict(repository: ModelRepository, body: dict[str, object]) -> httpx.Response:
    transport = httpx.ASGITransport(app=build_app(repository))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        return await client.post("/v1/models/adult-small:predict", json=body)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a CPU machine")
def test_a_server_asked_for_cuda_without_one_logs_one_line_and_answers_as_on_the_cpu(
    served_home: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devices, "_said", set())
    monkeypatch.setattr(devices, "_sink", [devices.log.warning])
    workspace = open_home(served_home)
    body = {"instances": adult_records(6)}
    answers = {}
    with caplog.at_level(logging.WARNING, logger="forgeml.device"):
        for device in ("cuda", "cpu"):
            options = ServeOptions(runtime="torch", device=device)
            repository = ModelRepository(workspace, ["adult-small@v1"], options)
            repository.load()
            try:
                response = asyncio.run(_predict(repository, body))
            finally:
                repository.close()
            assert response.status_code == 200, response.text
            answers[device] = response.json()["predictions"]
    workspace.close()

    assert answers["cuda"] == answers["cpu"]
    assert [r.getMessage() for r in caplog.records if r.name == "forgeml.device"] == [
        "--device cuda: torch sees no CUDA GPU here; running on the CPU."
    ]
