from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
import tritonclient.http as triton
from tritonclient.utils import serialize_byte_tensor

from forgeml.core.errors import InvalidDataError
from forgeml.serve.protocols.kserve_binary import encode_outputs, json_request, wanted_binary


def _binary_request(*tensors: tuple[str, str, np.ndarray]) -> tuple[bytes, int]:
    """A request body the way tritonclient lays one out, and its header length."""
    inputs = []
    for name, datatype, array in tensors:
        tensor = triton.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)  # binary_data=True: tritonclient's default
        inputs.append(tensor)
    header = orjson.dumps({"inputs": [tensor._get_tensor() for tensor in inputs]})
    data = b"".join(tensor._get_binary_data() for tensor in inputs)
    return header + data, len(header)


def test_binary_inputs_decode_to_the_json_tritonclient_would_have_sent() -> None:
    body, length = _binary_request(
        ("workclass", "BYTES", np.array([b"Private", "État".encode()], dtype=np.object_)),
        ("age", "INT64", np.array([39, 50], dtype=np.int64)),
        ("score", "FP32", np.array([[0.5], [1.25]], dtype=np.float32)),
        ("flag", "BOOL", np.array([True, False])),
    )
    request = json_request(body, length)
    data = {tensor["name"]: tensor["data"] for tensor in request["inputs"]}
    assert data == {
        "workclass": ["Private", "État"],
        "age": [39, 50],
        "score": [0.5, 1.25],
        "flag": [True, False],
    }


def _header(size: Any, **extra: Any) -> bytes:
    tensor = {"name": "text", "shape": [1], "datatype": "BYTES", "parameters": {}, **extra}
    if size is not None:
        tensor["parameters"]["binary_data_size"] = size
    return orjson.dumps({"inputs": [tensor]})


@pytest.mark.parametrize(
    ("body", "length", "message"),
    [
        (b"{}", 10, "has only 2 bytes"),
        (b"{not json", 9, "not valid JSON"),
        (b'{"inputs": 3}', 13, "needs 'inputs'"),
        (_header(4) + b"\x05\x00", None, "declares 4 bytes"),
        (_header(None) + b"xx", None, "2 bytes of binary data no input declares"),
        (_header(2) + b"\x05\x00", None, "ends inside an element's length"),
        (_header(6) + b"\x05\x00\x00\x00hi", None, "longer than its data"),
        (_header(6) + b"\x02\x00\x00\x00\xff\xfe", None, "not UTF-8"),
        (_header(-1), None, "send a byte count"),
        (_header(0, data=["x"]), None, "both 'data' and binary data"),
        (_header(3, datatype="FP32") + b"abc", None, "not a whole number of 4-byte values"),
        (_header(4, datatype="TEXT") + b"abcd", None, "datatype 'TEXT'"),
    ],
)
def test_binary_data_that_does_not_add_up_is_one_clear_error(
    body: bytes, length: int | None, message: str
) -> None:
    header_length = length if length is not None else len(body.split(b"}]}")[0]) + 3
    with pytest.raises(InvalidDataError, match=message):
        json_request(body, header_length)


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"inputs": []}, set()),
        ({"parameters": {"binary_data_output": True}}, {"*"}),
        ({"outputs": [{"name": "a", "parameters": {"binary_data": True}}, {"name": "b"}]}, {"a"}),
        (
            {"parameters": {"binary_data_output": True},
             "outputs": [{"name": "a", "parameters": {"binary_data": False}}, {"name": "b"}]},
            {"b"},
        ),
        ("not a request", set()),
    ],
)  # fmt: skip
def test_which_outputs_go_back_binary(request_: Any, expected: set[str]) -> None:
    assert wanted_binary(request_) == expected


def test_binary_outputs_read_back_with_tritonclient() -> None:
    probabilities = np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32)
    response = {
        "model_name": "m",
        "outputs": [
            {"name": "probabilities", "datatype": "FP32", "shape": [2, 2],
             "data": probabilities.reshape(-1).tolist()},
            {"name": "label", "datatype": "BYTES", "shape": [2], "data": [">50K", "<=50K"]},
            {"name": "score", "datatype": "FP64", "shape": [2], "data": [1.0, 2.0]},
        ],
    }  # fmt: skip
    header, data = encode_outputs(response, {"probabilities", "label"})
    result = triton.InferResult.from_response_body(header + data, header_length=len(header))
    np.testing.assert_array_equal(result.as_numpy("probabilities"), probabilities)
    assert result.as_numpy("label").tolist() == [b">50K", b"<=50K"]
    assert result.as_numpy("score").tolist() == [1.0, 2.0]  # stayed JSON
    assert "data" not in result.get_output("label") and "data" in result.get_output("score")
    assert serialize_byte_tensor(np.array([b">50K", b"<=50K"], dtype=np.object_)).item() in data
