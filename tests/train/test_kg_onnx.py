from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from forgeml.optimize.onnx_export import export_onnx
from forgeml.train.models.kg import KGEmbedding, RotatE, TailScores, TransE, TripleScores

MODELS = {"rotate": RotatE, "transe": TransE}


def _model(name: str) -> KGEmbedding:
    torch.manual_seed(0)
    return MODELS[name](num_entities=50, num_relations=3, dim=8, gamma=6.0).eval()


def _onnx_run(path: Path, inputs: dict[str, torch.Tensor]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {name: tensor.numpy() for name, tensor in inputs.items()}
    (out,) = session.run(None, feed)
    return np.asarray(out)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scoring_triples_in_onnx_runtime_matches_torch(name: str, tmp_path: Path) -> None:
    wrapper = TripleScores(_model(name))
    graph = export_onnx(wrapper, TripleScores.example(), tmp_path / "triples.onnx")
    # another batch size than the example's: the batch dimension is dynamic
    inputs = {
        "head": torch.tensor([0, 7, 49, 3, 3]),
        "relation": torch.tensor([0, 1, 2, 2, 0]),
        "tail": torch.tensor([1, 7, 0, 48, 3]),
    }

    with torch.inference_mode():
        expected = wrapper(**inputs).numpy()
    got = _onnx_run(tmp_path / "triples.onnx", inputs)

    assert graph.inputs == ["head", "relation", "tail"]
    assert got.shape == (5,)
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scoring_every_tail_in_onnx_runtime_matches_torch(name: str, tmp_path: Path) -> None:
    model = _model(name)
    export_onnx(TailScores(model), TailScores.example(), tmp_path / "tails.onnx")
    inputs = {"head": torch.tensor([4, 0, 49]), "relation": torch.tensor([2, 0, 1])}

    with torch.inference_mode():
        expected = model.score_all(inputs["head"], inputs["relation"], "tail").numpy()
    got = _onnx_run(tmp_path / "tails.onnx", inputs)

    assert got.shape == (3, 50)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert (got.argmax(axis=1) == expected.argmax(axis=1)).all()
