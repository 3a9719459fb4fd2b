from __future__ import annotations

import json
from collections import Counter

import onnx
import pytest

from forgeml.core.errors import UsageError
from forgeml.core.workspace import Workspace
from forgeml.optimize import OnnxModel, OptimizeRequest, optimize_model
from forgeml.tracking import download_bundle

pytestmark = pytest.mark.slow


def test_minilm_exports_to_onnx_with_embeddings_and_quantises_to_int8(
    text_workspace: Workspace,
) -> None:
    exported = optimize_model(
        text_workspace, "sst2-minilm@v1", OptimizeRequest("onnx", verify_rows=32, latency_repeats=1)
    )
    assert exported.model.ref == "sst2-minilm@v2"
    assert exported.model.parent == "sst2-minilm@v1"
    assert exported.report["max_abs_diff"] < 1e-4
    assert exported.report["fused_operators"]["Attention"] == 6  # one per MiniLM layer
    fp32_model = OnnxModel(download_bundle(text_workspace, exported.model))
    assert fp32_model.input_names == ["input_ids", "attention_mask"]
    assert fp32_model.output_names == ["logits", "embeddings"]
    vectors = fp32_model.run({"input_ids": [[101, 2204, 102]], "attention_mask": [[1, 1, 1]]})
    assert vectors["embeddings"].shape == (1, 384)

    quantised = optimize_model(
        text_workspace, "sst2-minilm@v2", OptimizeRequest("int8", latency_repeats=1)
    )
    report = quantised.report
    assert quantised.model.parent == "sst2-minilm@v2"
    # every weight int8, the fused attention's Q/K/V included (fp32 Q/K/V: ~1/2.9)
    assert report["size_bytes"]["after"] < report["size_bytes"]["before"] / 3.5
    assert 0 <= report["metrics"]["after"]["test_accuracy"] <= 1
    assert report["metric"] == "test_accuracy"
    assert isinstance(report["metric_delta"], float)
    bundle = download_bundle(text_workspace, quantised.model)
    description = json.loads((bundle / "model.json").read_text())
    assert description["onnx"]["quantization"] == "int8"
    operators = Counter(node.op_type for node in onnx.load(str(bundle / "model.onnx")).graph.node)
    assert operators["QAttention"] == 6
    assert operators["Attention"] == 0  # no attention left with fp32 Q/K/V weights

    with pytest.raises(UsageError, match="already an ONNX model"):
        optimize_model(text_workspace, "sst2-minilm@v2", OptimizeRequest("prune", sparsity=0.5))
