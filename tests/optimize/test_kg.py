"""`forgeml optimize` and `models compare` on a knowledge-graph model: ranked, not classified.

The rotate family trains with its own objective, so the PyTorch model and its ONNX graph
are compared by that objective's filtered tail ranking (`tail_mrr`, ...), a few triples
per call, and never by classification metrics over an entities x entities confusion
matrix (24 GB on the full WordNet graph of examples/wordnet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch

from forgeml.core.workspace import Workspace
from forgeml.optimize import OptimizeRequest, optimize_model, profile_models
from forgeml.optimize._inputs import training_config
from forgeml.tracking import download_bundle, get_model_version
from forgeml.train.data import load_task_data
from forgeml.train.models.kg import (
    KGEmbedding,
    KnownTriples,
    NegativeSamplingParams,
    filtered_ranks,
    ranking_metrics,
    triple_ids,
    triples_task,
)
from forgeml.train.models.kg._objective import NegativeSamplingObjective
from forgeml.train.recipe import load_bundle_model
from tests.train._kg_home import MODEL

RANKING = {"tail_mrr", "tail_mr", "tail_hits_at_1", "tail_hits_at_3", "tail_hits_at_10"}


def _keys(value: Any) -> set[str]:
    """Every key of a nested report."""
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in _keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in _keys(item)}
    return set()


def _library_tail_mrr(workspace: Workspace, tmp_path: Path) -> float:
    """Filtered tail MRR of @v1's validation triples, computed by the library directly."""
    record = get_model_version(workspace, f"{MODEL}@v1")
    task = load_task_data(workspace, training_config(workspace, record))
    model = load_bundle_model(download_bundle(workspace, record, tmp_path / "v1"))
    assert isinstance(model, KGEmbedding) and task.eval is not None
    splits = [triple_ids(s) for s in (task.train, task.eval)]
    known = KnownTriples(splits, int(model.relation.num_embeddings))
    return ranking_metrics(filtered_ranks(model, triple_ids(task.eval), known, "tail")).mrr


@pytest.mark.slow
def test_onnx_export_is_compared_by_the_filtered_ranking_not_a_confusion_matrix(
    kg_workspace: Workspace, tmp_path: Path
) -> None:
    request = OptimizeRequest("onnx", name="wn-rotate-onnx", verify_rows=16, latency_repeats=1)
    report = optimize_model(kg_workspace, f"{MODEL}@v1", request).report

    assert report["split"] == "validation" and report["metric"] == "tail_mrr"
    before, after = report["metrics"]["before"], report["metrics"]["after"]
    assert set(before) == set(after) == RANKING
    assert not _keys(report) & {"confusion_matrix", "accuracy", "roc_auc", "f1_macro", "loss"}
    assert before["tail_mrr"] == pytest.approx(_library_tail_mrr(kg_workspace, tmp_path), abs=1e-6)
    assert after["tail_mrr"] == pytest.approx(before["tail_mrr"], abs=1e-3)
    assert 0.05 < before["tail_mrr"] <= 1  # trained: far above chance (about 1/2,770 per triple)
    assert abs(report["metric_delta"]) <= 1e-3
    version = get_model_version(kg_workspace, "wn-rotate-onnx@v1")
    assert version.metrics["tail_mrr"] == after["tail_mrr"]


@pytest.mark.slow
def test_models_compare_leads_with_the_tail_mrr_of_each_runtime(kg_workspace: Workspace) -> None:
    torch_model, onnx_model = profile_models(
        kg_workspace, [f"{MODEL}@v1", f"{MODEL}@v2"], split="validation", repeats=1
    )
    assert (torch_model.runtime, onnx_model.runtime) == ("torch", "onnx")
    assert torch_model.metric == onnx_model.metric == "tail_mrr"
    assert torch_model.value is not None and onnx_model.value is not None
    assert onnx_model.value == pytest.approx(torch_model.value, abs=1e-3)


class _Recorder(torch.nn.Module):
    """A served module that scores every entity alike and records each call's rows."""

    def __init__(self, entities: int) -> None:
        super().__init__()
        self.entities = entities
        self.rows: list[int] = []

    def forward(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        self.rows.append(int(head.shape[0]))
        return torch.zeros(head.shape[0], self.entities)


def test_served_ranking_on_a_large_graph_asks_few_triples_per_call() -> None:
    # a chain e0 -> e1 -> ... of 60,000 edges: 60,001 entities, ranked for 40 test triples
    names = [f"e{i}" for i in range(60_001)]
    train = pl.DataFrame({"head": names[:-1], "relation": ["r"] * 60_000, "tail": names[1:]})
    task = triples_task(train, test=train.head(40))
    assert task.test is not None
    served = _Recorder(len(names))

    metrics = NegativeSamplingObjective(NegativeSamplingParams()).evaluate_served(
        served, task, task.test
    )

    assert sum(served.rows) == 40
    assert max(served.rows) * len(names) <= 1 << 18  # [rows, entities] scores per call
    assert set(metrics) == RANKING
    # every other entity ties with the true tail: rank 1 + 59,999 / 2
    assert metrics["tail_mr"] == pytest.approx(1 + (len(names) - 1) / 2)


@pytest.mark.slow
def test_int8_quantises_the_tables_and_is_ranked_against_its_fp32_export(
    kg_workspace: Workspace,
) -> None:
    request = OptimizeRequest("int8", name="wn-rotate-int8", verify_rows=16, latency_repeats=1)
    report = optimize_model(kg_workspace, f"{MODEL}@v1", request).report

    assert report["runtime"] == {"before": "onnx", "after": "onnx"}
    assert report["size_bytes"]["after"] < report["size_bytes"]["before"] / 2
    before, after = report["metrics"]["before"], report["metrics"]["after"]
    assert set(before) == set(after) == RANKING and report["metric"] == "tail_mrr"
    assert "confusion_matrix" not in _keys(report)
    assert abs(report["metric_delta"]) <= 0.01  # int8 weights: near, not equal


def test_the_export_takes_few_rows_per_call_on_a_large_graph() -> None:
    from forgeml.train.models.kg._export import export_rows

    def description(entities: int, dim: int) -> dict[str, Any]:
        vocab = {"entities": [f"e{i}" for i in range(entities)], "relations": ["r"]}
        return {"model": {"name": "rotate", "params": {"dim": dim}}, "tokenizer": vocab}

    # WordNet's 54,479 entities at dim 100: a [rows, entities, 200] float temporary per row
    assert export_rows(description(54_479, 100)) == 3
    assert export_rows(description(2_770, 16)) > 32  # the verbs: latency at 1 and 32 rows
