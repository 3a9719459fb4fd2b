"""`POST /v2/models/{name}/explain`: attributions for rows, as `forgeml models explain --json`.

Body: `{"instances": [row, ...], "method": "kernel_shap" | "integrated_gradients",
"top": N}` (method and top optional), a row as `:predict` takes it (a raw record, or a
text). Answer: `{"model": NAME@vN, "explanations": [...]}` (`forgeml.serve.explain`).
Errors answer as the v2 `infer` route's do: 400 for a body that is not JSON, 422 for a
row the model does not take (a missing or extra field, a wrong type) or a method it
cannot be explained with, 404 for a model this server does not serve.

A tabular model's background (training rows) is read once per loaded version. One
explanation runs at a time per server: each costs thousands of model rows, which would
otherwise starve the inference requests sharing the CPU.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from forgeml.serve.explain import MAX_ROWS, Explained, Method, explain_rows, model_background
from forgeml.serve.model import LoadedModel
from forgeml.serve.protocols._common import json_response
from forgeml.serve.repository import ModelRepository

EXPLAIN_SUFFIX = "/explain"
EXPLAIN_PATH = "/v2/models/{name}" + EXPLAIN_SUFFIX


class ExplainRequest(BaseModel):
    """Rows to explain, and optionally how."""

    model_config = ConfigDict(extra="forbid")

    instances: list[Any] = Field(min_length=1, max_length=MAX_ROWS)
    method: Method | None = None
    top: int | None = Field(default=None, ge=1, description="Keep the N largest attributions.")


class _Explainer:
    """Explains rows with a served version, one request at a time."""

    def __init__(self, repository: ModelRepository) -> None:
        self.repository = repository
        self.lock = threading.Lock()
        self.backgrounds: dict[str, list[dict[str, Any]] | None] = {}  # by bundle digest

    def explain(self, model: LoadedModel, body: ExplainRequest) -> Explained:
        model.row_encoder().check(body.instances)  # a bad row answers before any work
        with self.lock:
            if model.digest not in self.backgrounds:
                self.backgrounds[model.digest] = model_background(self.repository.workspace, model)
            background = self.backgrounds[model.digest]
            return Explained(
                model.ref, explain_rows(model, body.instances, background, body.method)
            )


def router(repository: ModelRepository) -> APIRouter:
    """The explain route over the models of `repository`."""
    routes = APIRouter(tags=["explain"])
    explainer = _Explainer(repository)

    @routes.post(EXPLAIN_PATH)
    async def explain(name: str, body: ExplainRequest) -> Response:
        model = repository.get(name).ready_model()
        found = await run_in_threadpool(explainer.explain, model, body)
        return json_response(found.to_dict(body.top))

    return routes
