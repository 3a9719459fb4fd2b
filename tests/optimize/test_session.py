from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.optimize import OnnxModel, is_onnx_bundle, read_description


def test_a_bundle_without_model_json_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InvalidDataError, match=r"no readable model\.json"):
        read_description(tmp_path)


def test_a_bundle_without_an_onnx_graph_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(json.dumps({"onnx": {"file": "model.onnx"}}))
    assert is_onnx_bundle(tmp_path)
    with pytest.raises(InvalidDataError, match="has no ONNX graph"):
        OnnxModel(tmp_path)


def test_a_corrupt_onnx_graph_cannot_be_loaded(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(json.dumps({"onnx": {"file": "model.onnx"}}))
    (tmp_path / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(InvalidDataError, match="cannot be loaded"):
        OnnxModel(tmp_path)
