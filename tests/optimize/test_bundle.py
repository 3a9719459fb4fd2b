from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.tracking._bundle import check_bundle


def test_an_onnx_graph_stands_in_for_safetensors_weights(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text("{}")
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07")
    assert check_bundle(tmp_path) == [Path("model.json"), Path("model.onnx")]


def test_a_bundle_without_any_weights_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text("{}")
    (tmp_path / "other.onnx").write_bytes(b"\x08\x07")
    with pytest.raises(InvalidDataError, match="nor an ONNX graph"):
        check_bundle(tmp_path)
