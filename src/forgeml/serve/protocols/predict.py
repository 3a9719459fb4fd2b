"""`POST /v1/models/{name}:predict`, TF-Serving style, for callers without a v2 client.

Spec: https://www.tensorflow.org/tfx/serving/api_rest#request_format_2. Two request formats:
- row: `{"instances": [row, ...]}`, a row a raw record for tabular models, for text
  models a string or an object of named inputs `{"text": "..."}`, for graph models
  `{"head": ..., "relation": ...}` with an optional `"tail"` (score it) or `"k"`;
- columnar: `{"inputs": {input name: [value, ...], ...}}`, or for a text model (one
  input) the bare list of texts `{"inputs": ["...", ...]}`.
A row request is answered `{"predictions": [...], "model_version": "N"}`, where a
classifier's prediction is `{"label": ..., "probabilities": {class: p, ...}}` and a
regressor's a number, and any other model's an object of every answer its family
decodes (a graph's `{"score": ..., "tails": [...], "tail_scores": [...]}`); a columnar
one `{"outputs": ..., "model_version": "N"}`, the same predictions by column
(`{"label": [...], "probabilities": [...]}`, or the list of numbers).
Other fields (`signature_name`) are ignored. The body is read as JSON whatever its
Content-Type says, as TF Serving does (the app declares it JSON).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from forgeml.core.errors import InvalidDataError
from forgeml.serve.model import LoadedModel
from forgeml.serve.protocols._common import json_response, record_request, request_log_of
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_ids import request_id_of
from forgeml.serve.request_log import RequestLog

PATH = "/v1/models/{name}:predict"


class PredictRequest(BaseModel):
    """A `:predict` request: `instances` (one row each) or `inputs` (one list per input)."""

    instances: list[Any] | None = Field(default=None, min_length=1)
    inputs: dict[str, list[Any]] | list[Any] | None = Field(default=None, min_length=1)


def _text_rows(model: LoadedModel, rows: list[Any]) -> list[Any]:
    """A text model's rows as its encoder takes them: `{"text": t}` is `t`."""
    (name,) = [field.name for field in model.row_encoder().fields]
    for position, row in enumerate(rows):
        if isinstance(row, dict) and list(row) != [name]:
            raise InvalidDataError(
                f'Instance {position} is an object but not {{"{name}": string}}; this text '
                f'model takes a string or {{"{name}": string}} per instance.'
            )
    # a string; anything else the encoder's check refuses
    return [row[name] if isinstance(row, dict) else row for row in rows]


def _columns_to_rows(model: LoadedModel, inputs: dict[str, list[Any]] | list[Any]) -> list[Any]:
    """The rows of a columnar request (one list per named input)."""
    fields = [field.name for field in model.row_encoder().fields]
    if isinstance(inputs, list):
        if model.kind != "text":
            raise InvalidDataError(
                f"'inputs' is a list, but this model takes named inputs: send an object "
                f"with a list for each of {', '.join(fields)}."
            )
        return inputs
    for name in inputs:
        if name not in fields:
            raise InvalidDataError(
                f"Input '{name}' is not one the model takes (inputs: {', '.join(fields)})."
            )
    required = [field.name for field in model.row_encoder().fields if field.required]
    missing = [name for name in required if name not in inputs]
    if missing:
        raise InvalidDataError(f"Input '{missing[0]}' is missing (inputs: {', '.join(fields)}).")
    lengths = {len(values) for values in inputs.values()}
    if len(lengths) > 1:
        raise InvalidDataError("The inputs hold different numbers of rows; send N of each.")
    if model.kind == "text":
        return inputs[fields[0]]
    return [dict(zip(inputs, row, strict=True)) for row in zip(*inputs.values(), strict=True)]


def request_rows(model: LoadedModel, body: PredictRequest) -> list[Any]:
    """The raw rows `body` carries, as `model`'s encoder takes them.

    Raises:
        InvalidDataError: the body has both formats or neither, or its inputs do not fit
            the model's.
    """
    if (body.instances is None) == (body.inputs is None):
        raise InvalidDataError(
            "Send 'instances' (a list of rows) or 'inputs' (a list for each input), one of the two."
        )
    if body.inputs is not None:
        return _columns_to_rows(model, body.inputs)
    rows = body.instances or []
    return _text_rows(model, rows) if model.kind == "text" else rows


_CLASS_ANSWERS = {"label", "probabilities"}


def _wanted(model: LoadedModel) -> set[str]:
    """A classifier's label and probabilities, a regressor's prediction, else every answer."""
    answers = {field.name for field in model.outputs}
    if answers >= _CLASS_ANSWERS:
        return _CLASS_ANSWERS
    if "prediction" in answers:
        return {"prediction"}
    return answers


def _predictions(model: LoadedModel, arrays: dict[str, np.ndarray]) -> list[Any]:
    if "prediction" in arrays:
        return [float(value) for value in arrays["prediction"]]
    if not set(arrays) >= _CLASS_ANSWERS:
        return [
            {name: _plain(values[row]) for name, values in arrays.items()}
            for row in range(len(next(iter(arrays.values()), [])))
        ]
    names = model.class_names or [str(i) for i in range(arrays["probabilities"].shape[1])]
    return [
        {"label": str(label), "probabilities": dict(zip(names, row.tolist(), strict=True))}
        for label, row in zip(arrays["label"], arrays["probabilities"], strict=True)
    ]


def _by_column(predictions: list[Any]) -> Any:
    """Row-format predictions as columnar outputs: one list per output."""
    if not predictions or not isinstance(predictions[0], dict):
        return predictions  # one output (a regressor's numbers): the list itself
    return {name: [p[name] for p in predictions] for name in predictions[0]}


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else value


async def answer(
    repository: ModelRepository,
    name: str,
    body: PredictRequest,
    log: RequestLog | None,
    request_id: str,
) -> dict[str, Any]:
    """The `:predict` response to `body` for model `name` (the route's and the fast lane's).

    Raises:
        NotFoundError, ServiceUnavailableError, InvalidDataError: as the route answers them.
    """
    served = repository.get(name)
    model = served.ready_model()
    rows = request_rows(model, body)
    arrays, used = await served.infer(rows, _wanted(model))
    predictions = _predictions(used, arrays)
    record_request(repository, log, "predict", name, used, rows, predictions, request_id)
    if body.inputs is not None:
        return {"outputs": _by_column(predictions), "model_version": str(used.version)}
    return {"predictions": predictions, "model_version": str(used.version)}


def router(repository: ModelRepository) -> APIRouter:
    """The `:predict` route over the models of `repository`."""
    routes = APIRouter(tags=["predict"])

    @routes.post(PATH)
    async def predict(name: str, body: PredictRequest, request: Request) -> Response:
        log, request_id = request_log_of(request), request_id_of(request.scope)
        return json_response(await answer(repository, name, body, log, request_id))

    return routes
