"""Workspaces holding a small real graph, WordNet 3.0's verbs, and a RotatE trained on it.

The graph is the verbs' 2-core of examples/wordnet/make_graph.py (2,770 entities, 4,560
train triples), added as three datasets without splits, as the example's README adds the
full graph. Each workspace is built once per session and copied by the tests that use it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from examples.wordnet import make_graph

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.train.conftest import _build_once

PARTS = ("train", "valid", "test")
MODEL = "wn-rotate"
SUMMARY = "summary.json"  # beside the trained template's home: the run's final metrics


def require_wordnet() -> Path:
    """WordNet 3.0's folder; the test skips when Debian's wordnet-base is not installed."""
    if not (make_graph.WORDNET / "data.verb").is_file():
        pytest.skip(
            f"WordNet 3.0 is not at {make_graph.WORDNET}: install the Debian package wordnet-base"
        )
    return make_graph.WORDNET


def train_config(name: str = MODEL, model: str = "rotate", **changes: Any) -> dict[str, Any]:
    """A few seconds of training on the verb graph, evaluated once at the end."""
    config: dict[str, Any] = {
        "name": name,
        "data": {
            "dataset": "wn-train",
            "train_split": None,
            "eval_dataset": "wn-valid",
            "test_split": None,
        },
        "model": {"name": model, "params": {"dim": 16, "negatives": 16, "alpha": 0.5}},
        "optimizer": {"name": "adam", "lr": 0.05},
        "max_steps": 40,
        "batch_size": 512,
        "eval_every_steps": 40,
        "seed": 0,
    }
    config.update(changes)
    return config


def _add_graph(home: Path) -> None:
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions

    graph = make_graph.build_graph(require_wordnet(), min_degree=2, parts="v")
    folder = home.parent / "graph"
    make_graph.write_graph(graph, folder)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        for part in PARTS:
            pipeline.add(workspace, f"wn-{part}", folder / f"{part}.csv", IngestOptions())
    finally:
        workspace.close()


def wordnet_data_template(factory: pytest.TempPathFactory) -> Path:
    """A workspace with datasets wn-train, wn-valid and wn-test (no runs: train in copies)."""
    require_wordnet()
    return _build_once(factory, "wordnet-data", _add_graph)


def _train_and_export(home: Path) -> None:
    from forgeml.optimize import OptimizeRequest, optimize_model
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig

    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        summary = run_training(workspace, TrainConfig.model_validate(train_config()))
        (home.parent / SUMMARY).write_text(json.dumps(summary.metrics))
        request = OptimizeRequest("onnx", verify_rows=32, latency_repeats=1)
        optimize_model(workspace, f"{MODEL}@v1", request)
    finally:
        workspace.close()


def wordnet_trained_template(factory: pytest.TempPathFactory) -> Path:
    """The data template plus wn-rotate@v1 (PyTorch) and @v2 (its ONNX export).

    For reading runs and serving models; its MLflow files live in the template's folder.
    """
    data = wordnet_data_template(factory)

    def build(home: Path) -> None:
        shutil.copytree(data, home, dirs_exist_ok=True)
        _train_and_export(home)

    return _build_once(factory, "wordnet-trained", build)


def run_metrics(home: Path) -> dict[str, Any]:
    """The final metrics of the trained template's run (its home's `SUMMARY`)."""
    metrics: dict[str, Any] = json.loads((home.parent / SUMMARY).read_text())
    return metrics
