"""What every protocol's routes share: orjson responses, whole bodies, recording answers."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from starlette.responses import Response
from starlette.types import Receive

from forgeml.serve.errors import Protocol
from forgeml.serve.model import LoadedModel
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_log import RequestLog

_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def json_response(payload: Any, status: int = 200) -> Response:
    """`payload` as JSON (orjson: numpy arrays and scalars included)."""
    return Response(
        orjson.dumps(payload, option=_JSON_OPTIONS), status, media_type="application/json"
    )


def request_log_of(request: Request) -> RequestLog | None:
    """The sampled request log of the app serving `request` (None: the app keeps none)."""
    return getattr(request.app.state, "request_log", None)


def record_request(
    repository: ModelRepository,
    log: RequestLog | None,
    protocol: Protocol,
    name: str,
    model: LoadedModel,
    rows: list[Any],
    outputs: Any,
    request_id: str,
) -> None:
    """Keep one answered request for feedback, and offer it to the sampled request log."""
    repository.recent.add(request_id, name, model.ref, rows, outputs)
    if log is not None:
        log.record(name, model.ref, protocol, rows, outputs, request_id)


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body from ASGI `receive`; None if the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
