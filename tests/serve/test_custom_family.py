from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.optimize import OptimizeRequest, optimize_model
from forgeml.tracking import download_bundle, get_model_version
from forgeml.tracking.runner import run_training
from forgeml.train.config import TrainConfig
from forgeml.train.models import TokenizerSource
from forgeml.train.recipe import load_bundle_model
from tests.serve import _word_family
from tests.serve.conftest import free_port, open_home, wait_ready
from tests.train.conftest import REPO, SRC, SST2_DIR, copy_empty_home, forgeml_command
from tests.train.conftest import subprocess_env as forgeml_env

pytestmark = pytest.mark.slow

TEXTS = ["a gorgeous , witty , seductive movie .", "the plot is nothing but boilerplate ."]


def _train_and_export(home: Path, scratch: Path) -> None:
    lines = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[:801]
    (scratch / "sst2.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    workspace = open_home(home)
    try:
        pipeline.add(workspace, "sst2", scratch / "sst2.tsv", IngestOptions())
        pipeline.derive(workspace, "split", "sst2", {"ratios": [0.8, 0.1, 0.1], "seed": 0})
        config = {
            "name": "sst2-words",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": _word_family.FAMILY.name, "params": {"dim": 8, "vocab": 500}},
            "optimizer": {"name": "adamw", "lr": 0.05},
            "max_steps": 40,
            "batch_size": 32,
            "seed": 0,
            "schedule": {"warmup_steps": 0},
        }
        run_training(workspace, TrainConfig.model_validate(config))
        request = OptimizeRequest("onnx", verify_rows=32, latency_repeats=1)
        optimize_model(workspace, "sst2-words@v1", request)
    finally:
        workspace.close()


def _torch_answers(home: Path, scratch: Path) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """Probabilities and pooled vectors of TEXTS from the trained bundle, and its family."""
    workspace = open_home(home)
    try:
        bundle = download_bundle(workspace, get_model_version(workspace, "sst2-words@v1"), scratch)
    finally:
        workspace.close()
    description = json.loads((bundle / "model.json").read_text())
    model = load_bundle_model(bundle)
    tokenizer = _word_family.WordTokenizer(
        TokenizerSource(description["model"]["params"], description["tokenizer"])
    )
    with torch.inference_mode():
        logits, pooled = _word_family.WordBagOutputs(model)(**tokenizer(TEXTS))
    return torch.softmax(logits, dim=1).numpy(), pooled.numpy(), description["family"]


@pytest.mark.skipif(not (SST2_DIR / "train.tsv").is_file(), reason="SST-2 data is missing")
def test_a_family_defined_in_a_test_module_trains_exports_and_serves(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = copy_empty_home(tmp_path_factory, tmp_path / "home")
    _train_and_export(home, tmp_path)
    probabilities, pooled, family = _torch_answers(home, tmp_path / "bundle")
    assert family == {"name": "word_bag", "modality": "text", "module": "tests.serve._word_family"}

    # a fresh `forgeml serve` finds the family from the bundle: the module is importable
    # there (as an installed package would be), and nothing registered it in that process
    port = free_port()
    env = forgeml_env(home) | {"PYTHONPATH": os.pathsep.join([str(SRC), str(REPO)])}
    command = forgeml_command("serve", "sst2-words@v2", "--runtime", "onnx", "--port", str(port))
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 120, process)
        metadata = httpx.get(f"{url}/v2/models/sst2-words").json()
        v2 = httpx.post(
            f"{url}/v2/models/sst2-words/infer",
            json={
                "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": TEXTS}],
                "outputs": [{"name": "probabilities"}, {"name": "label"}, {"name": "pooled"}],
            },
        )
        predicted = httpx.post(f"{url}/v1/models/sst2-words:predict", json={"instances": TEXTS})
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output.decode()

    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert [o["name"] for o in metadata["outputs"]] == ["probabilities", "label", "pooled"]
    assert v2.status_code == 200, v2.text
    served = {o["name"]: o for o in v2.json()["outputs"]}
    got = np.array(served["probabilities"]["data"]).reshape(served["probabilities"]["shape"])
    np.testing.assert_allclose(got, probabilities, atol=1e-5)
    vectors = np.array(served["pooled"]["data"]).reshape(served["pooled"]["shape"])
    np.testing.assert_allclose(vectors, pooled, atol=1e-5)
    labels = [str(probabilities[i].argmax()) for i in range(len(TEXTS))]
    assert served["label"]["data"] == labels
    assert predicted.status_code == 200, predicted.text
    assert [p["label"] for p in predicted.json()["predictions"]] == labels
