from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import orjson
import pytest
import tritonclient.http as triton
from starlette.responses import JSONResponse, Response
from tritonclient.utils import serialize_byte_tensor

from forgeml.core.errors import InvalidDataError
from forgeml.serve.protocols.kserve_binary import (
    HEADER,
    BinaryTensors,
    encode_outputs,
    json_request,
    wanted_binary,
)


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
    ("header", "data", "length", "message"),
    [
        (b"{}", b"", 10, "has only 2 bytes"),  # `length`: the header's own unless given
        (b"{not json", b"", None, "not valid JSON"),
        (b'{"inputs": 3}', b"", None, "needs 'inputs'"),
        (_header(4), b"\x05\x00", None, "declares 4 bytes"),
        (_header(None), b"xx", None, "2 bytes of binary data no input declares"),
        (_header(2), b"\x05\x00", None, "ends inside an element's length"),
        (_header(6), b"\x05\x00\x00\x00hi", None, "longer than its data"),
        (_header(6), b"\x02\x00\x00\x00\xff\xfe", None, "not UTF-8"),
        (_header(-1), b"", None, "send a byte count"),
        (_header(0, data=["x"]), b"", None, "both 'data' and binary data"),
        (_header(3, datatype="FP32"), b"abc", None, "not a whole number of 4-byte values"),
        (_header(4, datatype="TEXT"), b"abcd", None, "datatype 'TEXT'"),
    ],
)
def test_binary_data_that_does_not_add_up_is_one_clear_error(
    header: bytes, data: bytes, length: int | None, message: str
) -> None:
    with pytest.raises(InvalidDataError, match=message):
        json_request(header + data, len(header) if length is None else length)


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


def _through(body: bytes, headers: list[tuple[bytes, bytes]], answer: Response) -> tuple[Any, ...]:
    """`body` sent through `BinaryTensors` to an app answering `answer`: what each side saw."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["body"] = (await receive())["body"]
        await answer(scope, receive, send)

    async def run() -> list[Any]:
        sent: list[Any] = []
        scope = {"type": "http", "method": "POST", "path": "/v2/models/m/infer", "headers": headers}
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Any:
            return messages.pop(0)

        async def send(message: Any) -> None:
            sent.append(message)

        await BinaryTensors(app)(scope, receive, send)
        return sent

    sent = asyncio.run(run())
    return seen.get("body"), sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


def test_malformed_json_naming_binary_data_reaches_the_route_unchanged() -> None:
    body = b'{"outputs": [{"name": "a", "parameters": {"binary_data": true}}'  # cut short
    seen, status, headers, _ = _through(body, [], JSONResponse({"error": "not JSON"}, 400))
    assert seen == body and status == 400 and HEADER not in headers


def test_an_error_answer_stays_json_when_binary_outputs_were_asked_for() -> None:
    body = orjson.dumps({"inputs": [], "parameters": {"binary_data_output": True}})
    _, status, headers, sent = _through(body, [], JSONResponse({"error": "no model"}, 404))
    assert (status, sent) == (404, b'{"error":"no model"}') and HEADER not in headers
    answer = JSONResponse(
        {"outputs": [{"name": "p", "datatype": "FP32", "shape": [1], "data": [0.5]}]}
    )
    _, status, headers, sent = _through(body, [], answer)
    assert status == 200 and headers[HEADER] == b"%d" % (len(sent) - 4)  # 4 bytes: one FP32
