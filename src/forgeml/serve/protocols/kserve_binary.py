"""KServe v2's binary tensor data extension, which tritonclient speaks by default.

Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
A request with an `Inference-Header-Content-Length: N` header carries its JSON in the first
N bytes of the body, then the raw data of each input whose `parameters` hold
`binary_data_size`, in input order: BYTES elements as a 4-byte little-endian length and the
bytes, numbers little-endian at the tensor's datatype, BOOL one byte each. An output asked
for with `parameters.binary_data: true` (every output, if the request's parameters say
`binary_data_output: true`) comes back the same way: its JSON has
`parameters.binary_data_size` instead of `data`, and the response's
`Inference-Header-Content-Length` says where the JSON ends.

`BinaryTensors` turns such a request into the JSON request the v2 `infer` route takes and
the route's JSON answer into the binary answer asked for, so the route and the fast lane
deal in JSON only. A request that asks for nothing binary passes through untouched.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from forgeml.core.errors import InvalidDataError
from forgeml.serve.errors import response_for
from forgeml.serve.protocols._common import read_body

HEADER = b"inference-header-content-length"
_NUMPY = {
    "BOOL": "?", "UINT8": "<u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8",
    "INT8": "<i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8",
    "FP16": "<f2", "FP32": "<f4", "FP64": "<f8",
}  # fmt: skip
_LENGTH = struct.Struct("<I")  # a BYTES element's length prefix
EVERY_OUTPUT = "*"  # in `wanted_binary`'s answer: whichever outputs the route returns


class BinaryTensors:
    """ASGI middleware speaking the binary data extension on `POST /v2/models/*/infer`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] != "POST" or not path.endswith("/infer"):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(receive)
            if body is None:
                return  # the client went away
            header_length = _header_length(scope)
            request = None
            if header_length is not None:
                request = json_request(body, header_length)
                body = orjson.dumps(request)
                _as_json(scope, len(body))
            binary_outputs: set[str] = set()
            if b'"binary_data' in body:
                binary_outputs = wanted_binary(request or _loads_or_none(body))
        except Exception as error:  # answered in the protocol's format, as the app's handlers do
            await response_for(path, error)(scope, receive, send)
            return
        replay = _replay(body)
        if not binary_outputs:
            await self.app(scope, replay, send)
        else:
            await self.app(scope, replay, _BinaryAnswer(send, binary_outputs).send)


def json_request(body: bytes, header_length: int) -> dict[str, Any]:
    """The JSON request of a binary one, each binary input's data decoded into `data`.

    Raises:
        InvalidDataError: the header length, the JSON or the binary data does not add up.
    """
    if header_length > len(body):
        raise InvalidDataError(
            f"Inference-Header-Content-Length is {header_length} but the body has only "
            f"{len(body)} bytes."
        )
    try:
        request = orjson.loads(body[:header_length])
    except orjson.JSONDecodeError as error:
        raise InvalidDataError(f"The inference header is not valid JSON: {error}.") from None
    inputs = request.get("inputs") if isinstance(request, dict) else None
    if not isinstance(inputs, list):
        raise InvalidDataError("The inference header needs 'inputs': a list of tensors.")
    offset, data = 0, memoryview(body)[header_length:]
    for tensor in inputs:
        size = _binary_size(tensor)
        if size is None:
            continue
        if offset + size > len(data):
            raise InvalidDataError(
                f"Input '{tensor.get('name')}' declares {size} bytes of binary data but only "
                f"{len(data) - offset} are left in the body."
            )
        tensor["data"] = _decode(tensor, bytes(data[offset : offset + size]))
        offset += size
    if offset != len(data):
        raise InvalidDataError(
            f"The body holds {len(data) - offset} bytes of binary data no input declares."
        )
    return request


def wanted_binary(request: Any) -> set[str]:
    """The outputs a (JSON) request wants as binary data."""
    if not isinstance(request, dict):
        return set()
    parameters = request.get("parameters")
    every = isinstance(parameters, dict) and parameters.get("binary_data_output") is True
    outputs = request.get("outputs")
    if not isinstance(outputs, list):
        return {EVERY_OUTPUT} if every else set()  # the route picks the outputs
    wanted = set()
    for output in outputs:
        if not isinstance(output, dict) or not isinstance(output.get("name"), str):
            continue
        asked = (output.get("parameters") or {}).get("binary_data")
        if asked is True or (every and asked is not False):
            wanted.add(output["name"])
    return wanted


def encode_outputs(response: dict[str, Any], names: set[str]) -> tuple[bytes, bytes]:
    """The JSON header and binary data of `response` with the outputs `names` as binary."""
    parts = []
    for output in response.get("outputs", []):
        if EVERY_OUTPUT not in names and output["name"] not in names:
            continue
        raw = _encode(output["datatype"], output.pop("data"))
        output["parameters"] = {**output.get("parameters", {}), "binary_data_size": len(raw)}
        parts.append(raw)
    return orjson.dumps(response), b"".join(parts)


def _binary_size(tensor: Any) -> int | None:
    parameters = tensor.get("parameters") if isinstance(tensor, dict) else None
    size = parameters.get("binary_data_size") if isinstance(parameters, dict) else None
    if size is None:
        return None
    name = tensor.get("name")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidDataError(f"Input '{name}' has binary_data_size {size!r}; send a byte count.")
    if "data" in tensor:
        raise InvalidDataError(f"Input '{name}' has both 'data' and binary data; send one.")
    return size


def _decode(tensor: dict[str, Any], raw: bytes) -> list[Any]:
    name, datatype = tensor.get("name"), tensor.get("datatype")
    if datatype == "BYTES":
        values: list[Any] = []
        offset = 0
        while offset < len(raw):
            if offset + 4 > len(raw):
                raise InvalidDataError(f"Input '{name}' ends inside an element's length.")
            (length,) = _LENGTH.unpack_from(raw, offset)
            offset += 4
            if offset + length > len(raw):
                raise InvalidDataError(f"Input '{name}' has an element longer than its data.")
            try:
                values.append(raw[offset : offset + length].decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidDataError(
                    f"Input '{name}' holds bytes that are not UTF-8 text."
                ) from None
            offset += length
        return values
    if datatype not in _NUMPY:
        raise InvalidDataError(f"Input '{name}' has datatype {datatype!r}; see the model's inputs.")
    dtype = np.dtype(_NUMPY[str(datatype)])
    if len(raw) % dtype.itemsize:
        raise InvalidDataError(
            f"Input '{name}' is {datatype} but its {len(raw)} bytes are not a whole number of "
            f"{dtype.itemsize}-byte values."
        )
    numbers: list[Any] = np.frombuffer(raw, dtype).tolist()
    return numbers


def _encode(datatype: str, data: list[Any]) -> bytes:
    if datatype == "BYTES":
        encoded = [str(value).encode("utf-8") for value in data]
        return b"".join(_LENGTH.pack(len(item)) + item for item in encoded)
    return np.asarray(data, dtype=np.dtype(_NUMPY[datatype])).tobytes()


def _header_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == HEADER:
            if not value.strip().isdigit():
                raise InvalidDataError(
                    f"Inference-Header-Content-Length is {value.decode('latin-1')!r}; "
                    "send the byte length of the JSON part."
                )
            return int(value)
    return None


def _as_json(scope: Scope, length: int) -> None:
    """Give `scope` the headers of a plain JSON body of `length` bytes.

    In place, not a copy: the middleware outside reads what the app inside writes into the
    scope (the model name the request metrics are labelled with).
    """
    drop = {HEADER, b"content-length", b"content-type"}
    headers = [(k, v) for k, v in scope["headers"] if k not in drop]
    headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % length)]
    scope["headers"] = headers


def _loads_or_none(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # the route answers malformed JSON in its own words


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


class _BinaryAnswer:
    """Wraps `send`: a successful JSON answer leaves with the outputs `names` as binary."""

    def __init__(self, send: Send, names: set[str]) -> None:
        self._send = send
        self._names = names
        self._start: Message | None = None
        self._chunks: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if message["status"] == 200:
                self._start = message  # held until the body is in, to be re-encoded
            else:
                await self._send(message)  # errors stay JSON
            return
        if self._start is None or message["type"] != "http.response.body":
            await self._send(message)
            return
        self._chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        header, data = encode_outputs(orjson.loads(b"".join(self._chunks)), self._names)
        headers = [
            (k, v)
            for k, v in self._start.get("headers", [])
            if k not in (b"content-length", b"content-type")
        ]
        headers += [
            (b"content-type", b"application/octet-stream"),
            (b"content-length", b"%d" % (len(header) + len(data))),
            (HEADER, b"%d" % len(header)),
        ]
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": header + data})
