"""The KServe Open Inference Protocol v2 (REST), as Triton and KServe serve it.

Spec: https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/.
Tabular models take one tensor per raw field, named like the field, shape [N] or [N, 1]
(BYTES for strings, INT64/FP32/FP64 for numbers, BOOL); text models take one BYTES
tensor `text`; graph models `head` and `relation` BYTES, and optionally `tail` BYTES and
`k` INT64. Outputs: `probabilities` [N, C] FP32 and `label` [N] BYTES for
classifiers, `prediction` [N] FP32 for regressors, `embeddings` [N, H] FP32 of text
encoders, `score` [N] FP32, `tails` [N, k] BYTES and `tail_scores` [N, k] FP32 of
graphs; a request that names no outputs gets every output the model's metadata lists,
as the protocol says ("If not specified all outputs produced by the model will be
returned"). Tensor data is JSON here; `kserve_binary` speaks the binary tensor
data extension in front of these routes.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from forgeml.core.errors import InvalidDataError, ServiceUnavailableError
from forgeml.serve.inputs import InputField
from forgeml.serve.model import LoadedModel
from forgeml.serve.protocols._common import json_response, record_request, request_log_of
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_ids import request_id_of, set_request_id, usable
from forgeml.serve.request_log import RequestLog

Datatype = Literal[
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BYTES",
]  # fmt: skip
_ACCEPTS = {  # field datatype -> tensor datatypes that may carry it
    "BYTES": {"BYTES"},
    "BOOL": {"BOOL"},
    "INT64": {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"},
}
_NUMBERS = {"FP16", "FP32", "FP64", *_ACCEPTS["INT64"]}
INFER_PATH = "/v2/models/{name}/infer"


class InferInput(BaseModel):
    """One input tensor of an inference request."""

    name: str = Field(min_length=1)
    shape: list[int] = Field(min_length=1, max_length=2)
    datatype: Datatype
    parameters: dict[str, Any] | None = None
    data: list[Any]


class RequestedOutput(BaseModel):
    """An output the caller wants back."""

    name: str = Field(min_length=1)
    parameters: dict[str, Any] | None = None


class InferRequest(BaseModel):
    """A v2 inference request."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    parameters: dict[str, Any] | None = None
    inputs: list[InferInput] = Field(min_length=1)
    outputs: list[RequestedOutput] | None = None


def _flatten(data: list[Any]) -> list[Any]:
    return (
        [v for item in data for v in _flatten(item)]
        if any(isinstance(d, list) for d in data)
        else data
    )


def _column(tensor: InferInput, field: InputField) -> list[Any]:
    """The tensor's values as one column, its datatype and shape checked."""
    allowed = _ACCEPTS.get(field.datatype, _NUMBERS)
    if tensor.datatype not in allowed:
        raise InvalidDataError(
            f"Input '{tensor.name}' is {tensor.datatype} but the model takes it as "
            f"{field.datatype}; send one of {', '.join(sorted(allowed))}."
        )
    per_row = len(field.shape) > 1  # a row is an array (a graph's feature vector)
    if len(tensor.shape) == 2 and tensor.shape[1] != 1 and not per_row:
        raise InvalidDataError(
            f"Input '{tensor.name}' has shape {tensor.shape}; send shape [N] or [N, 1]."
        )
    values = _flatten(tensor.data)
    if any(size < 0 for size in tensor.shape) or len(values) != math.prod(tensor.shape):
        raise InvalidDataError(
            f"Input '{tensor.name}' has shape {tensor.shape} but {len(values)} values."
        )
    if tensor.datatype in _NUMBERS:
        # JSON floats are fine for FP tensors; integers only for INT/UINT ones
        integral = tensor.datatype in _ACCEPTS["INT64"]
        for value in values:
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or (integral and not isinstance(value, int))
            ):
                raise InvalidDataError(
                    f"Input '{tensor.name}' is {tensor.datatype} but holds {value!r}."
                )
    if per_row and tensor.shape:
        return _rows_of(values, tensor.shape)
    return values


def _rows_of(values: list[Any], shape: list[int]) -> list[Any]:
    """Flat values of a tensor [N, ...] as N nested lists of the row shape."""
    nested: list[Any] = np.array(values, dtype=object).reshape(shape).tolist()
    return nested


def tensors_to_rows(model: LoadedModel, inputs: list[InferInput]) -> list[Any]:
    """The raw rows the input tensors carry (records for tabular models, texts for text ones).

    Raises:
        InvalidDataError: the model takes no rows, an input is unknown, missing,
            duplicated, or of the wrong datatype or shape, or the inputs differ in length.
    """
    encoder = model.row_encoder()
    fields = {field.name: field for field in encoder.fields}
    given = {tensor.name: tensor for tensor in inputs}
    if len(given) < len(inputs):
        raise InvalidDataError("Two inputs have the same name; send each field once.")
    for name in given:
        if name not in fields:
            raise InvalidDataError(
                f"Input '{name}' is not one the model takes (inputs: {', '.join(fields)})."
            )
    missing = [name for name, field in fields.items() if name not in given and field.required]
    if missing:
        raise InvalidDataError(f"Input '{missing[0]}' is missing (inputs: {', '.join(fields)}).")
    columns = {name: _column(given[name], field) for name, field in fields.items() if name in given}
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise InvalidDataError("The inputs hold different numbers of rows; send N of each.")
    if encoder.scalar_rows:  # a row is the one field's value (a text)
        return next(iter(columns.values()))
    count = lengths.pop()
    return [{name: values[i] for name, values in columns.items()} for i in range(count)]


def _output_tensor(name: str, datatype: str, values: np.ndarray) -> dict[str, Any]:
    if values.dtype == object and values.ndim == 1 and len(values) and isinstance(values[0], list):
        # one list per row (a graph's k best tails), of one length within a request: [N, k]
        values = np.array(values.tolist(), dtype=object if datatype == "BYTES" else np.float32)
    data = values.reshape(-1).tolist()
    return {"name": name, "datatype": datatype, "shape": list(values.shape), "data": data}


def _metadata(model: LoadedModel) -> dict[str, Any]:
    inputs = model.encoder.fields if model.encoder is not None else []
    return {
        "name": model.name,
        "versions": [str(model.version)],
        "platform": "onnxruntime_onnx" if model.runtime.name == "onnx" else "pytorch",
        "inputs": [
            {
                "name": f.name,
                "datatype": f.datatype,
                "shape": list(f.shape) if len(f.shape) > 1 else [-1],
            }
            for f in inputs
        ],
        # -1: the batch, or a width not known before a run
        "outputs": [
            {"name": f.name, "datatype": f.datatype, "shape": list(f.shape)} for f in model.outputs
        ],
    }


async def answer(
    repository: ModelRepository,
    name: str,
    body: InferRequest,
    log: RequestLog | None,
    request_id: str,
) -> dict[str, Any]:
    """The v2 inference response to `body` for model `name` (the route's and the fast lane's).

    Its `id` is the body's own when that can serve as a request id (`request_ids.usable`),
    else `request_id`; a body `id` that cannot is still echoed, as the protocol says.

    Raises:
        NotFoundError, ServiceUnavailableError, InvalidDataError: as the route answers them.
    """
    served = repository.get(name)
    model = served.ready_model()
    rows = tensors_to_rows(model, body.inputs)
    known = {field.name: field.datatype for field in model.outputs}
    # no outputs named: every output the metadata lists (the protocol's "all outputs")
    wanted = [o.name for o in body.outputs] if body.outputs else list(known)
    for output in wanted:
        if output not in known:
            raise InvalidDataError(
                f"Output '{output}' is not one the model has ({', '.join(known)})."
            )
    arrays, used = await served.infer(rows, set(wanted))
    outputs = [_output_tensor(n, known[n], np.asarray(arrays[n])) for n in wanted]
    if body.id is not None and usable(body.id):
        request_id = body.id
    record_request(
        repository, log, "v2", name, used, rows, {o: arrays[o] for o in wanted}, request_id
    )
    return {
        "id": body.id if body.id is not None else request_id,
        "model_name": name,
        "model_version": str(used.version),
        "outputs": outputs,
    }


def router(repository: ModelRepository, version: str) -> APIRouter:
    """The v2 routes over the models of `repository` (`version`: the server's version)."""
    routes = APIRouter(tags=["KServe v2"])

    @routes.get("/v2")
    async def server_metadata() -> Response:
        return json_response(
            {"name": "forgeml", "version": version, "extensions": ["binary_tensor_data"]}
        )

    @routes.get("/v2/health/live")
    async def live() -> Response:
        return json_response({"live": True})

    @routes.get("/v2/health/ready")
    async def ready() -> Response:
        if not repository.ready:
            raise ServiceUnavailableError("The server is still loading its models.")
        return json_response({"ready": True})

    @routes.get("/v2/models/{name}")
    async def model_metadata(name: str) -> Response:
        return json_response(_metadata(repository.get(name).ready_model()))

    @routes.get("/v2/models/{name}/ready")
    async def model_ready(name: str) -> Response:
        repository.get(name).ready_model()
        return json_response({"name": name, "ready": True})

    @routes.post(INFER_PATH)
    async def infer(name: str, body: InferRequest, request: Request) -> Response:
        log, request_id = request_log_of(request), request_id_of(request.scope)
        payload = await answer(repository, name, body, log, request_id)
        if body.id is not None and usable(body.id):
            set_request_id(request.scope, body.id)
        return json_response(payload)

    return routes
