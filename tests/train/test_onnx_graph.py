from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from forgeml.core.errors import InvalidDataError, NotFoundError
from forgeml.train.models.onnx_graph import GraphEncoder, GraphTensor, read_graph


def _graph_with_external_weight(path: Path, location: str) -> Path:
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    weight.external_data.add(key="length", value="8")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
        [weight],
    )
    onnx.save(helper.make_model(graph), str(path))
    return path


@pytest.mark.parametrize(
    "location", ["../../../../etc/passwd", "/etc/passwd", "..\\..\\secret.bin", "C:\\x.bin"]
)
def test_cve_2024_27318_external_data_outside_the_folder_is_refused(
    tmp_path: Path, location: str
) -> None:
    path = _graph_with_external_weight(tmp_path / "evil.onnx", location)
    with pytest.raises(InvalidDataError, match="CVE-2024-27318") as raised:
        read_graph(path)
    assert location in str(raised.value)


def test_cve_2024_27319_any_external_data_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)
    path = _graph_with_external_weight(tmp_path / "side.onnx", "weights.bin")
    with pytest.raises(InvalidDataError, match="self-contained file"):
        read_graph(path)


def test_a_file_that_is_not_onnx_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"PK\x03\x04 a zip, not a graph")
    with pytest.raises(InvalidDataError, match="is not a valid ONNX model"):
        read_graph(path)
    with pytest.raises(NotFoundError, match="does not exist"):
        read_graph(tmp_path / "missing.onnx")


def test_the_signature_is_read_from_the_graph(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["batch", 3])],
    )
    path = tmp_path / "cast.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    found = read_graph(path)
    assert found.inputs == [GraphTensor("x", "float32", "FP32", (-1, 3))]
    assert found.outputs == [GraphTensor("y", "int64", "INT64", (-1, 3))]
    assert found.opset == 17
    assert found.class_names is None


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([1.0, 2.0], "has shape [2] but the model takes [3]"),
        (["a", "b", "c"], "holds <U1 values; it takes float32"),
        ({"z": [1.0, 2.0, 3.0]}, "has fields z but the model takes x"),
        ([[1.0], [2.0, 3.0]], "is ragged"),
    ],
)
def test_a_row_that_does_not_fit_the_graph_is_one_sentence(row: object, message: str) -> None:
    encoder = GraphEncoder([GraphTensor("x", "float32", "FP32", (-1, 3))])
    with pytest.raises(InvalidDataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        encoder.check([[0.0, 0.0, 0.0], row])


def test_rows_are_stacked_as_the_graph_types_them() -> None:
    encoder = GraphEncoder([GraphTensor("x", "float32", "FP32", (-1, 3))])
    arrays = encoder.encode([[1, 2, 3], {"x": [4.5, 5, 6]}])
    assert arrays["x"].dtype == np.float32
    np.testing.assert_array_equal(arrays["x"], [[1, 2, 3], [4.5, 5, 6]])
