"""`POST /v1/models/{name}:predict`, TF-Serving style, for callers without a v2 client.

Request `{"instances": [raw record, ...]}` (texts for text models, as strings);
response `{"predictions": [...], "model_version": "N"}`, where a classifier's
prediction is `{"label": ..., "probabilities": {class: p, ...}}`, a regressor's a number,
and any other model's an object of every answer its family decodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from forgeml.serve.model import LoadedModel
from forgeml.serve.protocols._common import json_response, record_request, request_log_of
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_log import RequestLog

PATH = "/v1/models/{name}:predict"


class PredictRequest(BaseModel):
    """A `:predict` request: one raw row per instance."""

    instances: list[Any] = Field(min_length=1)


def _wanted(model: LoadedModel) -> set[str]:
    if model.task == "classification":
        return {"label", "probabilities"}
    if model.task == "regression":
        return {"prediction"}
    return {field.name for field in model.outputs}


def _predictions(model: LoadedModel, arrays: dict[str, np.ndarray]) -> list[Any]:
    if model.task not in ("classification", "regression"):
        return [
            {name: _plain(values[row]) for name, values in arrays.items()}
            for row in range(len(next(iter(arrays.values()), [])))
        ]
    if "prediction" in arrays:
        return [float(value) for value in arrays["prediction"]]
    names = model.class_names or [str(i) for i in range(arrays["probabilities"].shape[1])]
    return [
        {"label": str(label), "probabilities": dict(zip(names, row.tolist(), strict=True))}
        for label, row in zip(arrays["label"], arrays["probabilities"], strict=True)
    ]


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else value


async def answer(
    repository: ModelRepository, name: str, body: PredictRequest, log: RequestLog | None
) -> dict[str, Any]:
    """The `:predict` response to `body` for model `name` (the route's and the fast lane's).

    Raises:
        NotFoundError, ServiceUnavailableError, InvalidDataError: as the route answers them.
    """
    served = repository.get(name)
    model = served.ready_model()
    arrays, used = await served.infer(body.instances, _wanted(model))
    predictions = _predictions(used, arrays)
    record_request(log, "predict", name, used, body.instances, predictions)
    return {"predictions": predictions, "model_version": str(used.version)}


def router(repository: ModelRepository) -> APIRouter:
    """The `:predict` route over the models of `repository`."""
    routes = APIRouter(tags=["predict"])

    @routes.post(PATH)
    async def predict(name: str, body: PredictRequest, request: Request) -> Response:
        return json_response(await answer(repository, name, body, request_log_of(request)))

    return routes
