from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from forgeml.core.config import get_settings
from tests.serve.conftest import adult_records, free_port, wait_ready
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = pytest.mark.slow


def test_serve_answers_under_its_name_and_stops_cleanly_on_sigterm(served_home: Path) -> None:
    port = free_port()
    command = forgeml_command(
        "serve", "adult-mlp@v2", "--port", str(port), "--name", "adult", "--max-batch-size", "8",
        "--latency-objective-ms", "250",
    )  # fmt: skip
    process = subprocess.Popen(
        command, env=subprocess_env(served_home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 120, process)
        body = {"instances": adult_records(2)}
        response = httpx.post(f"{url}/v1/models/adult:predict", json=body)
        assert response.status_code == 200 and response.json()["model_version"] == "2"
        assert httpx.get(f"{url}/v2/models/adult-mlp").status_code == 404
        # `forgeml serve` owns its process: the loaded heap is frozen out of collections
        samples = {
            (sample.name, sample.labels.get("model")): sample.value
            for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)
            for sample in family.samples
        }
        assert samples[("forgeml_gc_frozen_objects", None)] > 10_000
        # the alert rule's threshold, under the served name
        assert samples[("forgeml_latency_objective_seconds", "adult")] == 0.25
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output.decode()
    log = output.decode()
    assert f"adult-mlp@v2 as 'adult' on http://127.0.0.1:{port}" in log and "stopped" in log


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nosuch@v1", "--port", "{port}"], 1, "Model 'nosuch' is not registered"),
        (["adult-mlp@v9", "--port", "{port}"], 1, "has no version v9"),
        (["adult-mlp@v1", "--port", "0"], 2, "Invalid --port 0"),
        (["adult-mlp@v1", "adult-small@v1", "--name", "x", "--port", "{port}"], 2, "--name"),
        (["adult-mlp@v1", "--max-batch-size", "0", "--port", "{port}"], 2, "--max-batch-size"),
        (
            ["adult-mlp@v1", "--latency-objective-ms", "0", "--port", "{port}"],
            2,
            "--latency-objective-ms",
        ),
        (["adult-mlp@v1", "--runtime", "onnx", "--port", "{port}"], 1, "no ONNX export"),
    ],
)
def test_serve_rejects_bad_arguments_with_one_sentence(
    cli: Any,
    served_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    message: str,
) -> None:
    monkeypatch.setenv("FORGEML_HOME", str(served_home))
    get_settings.cache_clear()
    port = str(free_port())
    result = cli("serve", *(arg.replace("{port}", port) for arg in args))
    assert result.code == code, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
