"""Answers in the very JSON the CLI's `--json` prints, so the CLI's remote mode can print
an answer unchanged.

FastAPI would validate a route's answer against its return annotation and write datetimes
as pydantic does (`Z` for UTC); the CLI writes them with orjson (`+00:00`, or no zone for a
stored naive one). A `CliRouter`'s routes skip that step (`response_model=None`: their
answers are the domain's summaries, already plain data) and render with orjson.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter
from fastapi.datastructures import DefaultPlaceholder
from fastapi.responses import JSONResponse


class CliJSONResponse(JSONResponse):
    """A JSON response encoded as `forgeml ... --json` encodes its output (without indent).

    A JSONResponse so that OpenAPI documents the answer as JSON; FastAPI documents any
    other Response class as a string.
    """

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


class CliRouter(APIRouter):
    """A router whose routes answer in the CLI's JSON (see the module's docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(default_response_class=CliJSONResponse, **kwargs)

    def add_api_route(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("response_model"), DefaultPlaceholder):
            kwargs["response_model"] = None
        super().add_api_route(path, endpoint, **kwargs)
