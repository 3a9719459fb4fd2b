"""`POST /v2/models/{name}/feedback`: labels for predictions this server answered.

The body labels one request, `{"id": ID, "label": L}`, or several,
`{"feedback": [{"id": ..., "label": ...}, ...]}`; a label is one value, or a list of one
per row for a request of several rows. Answer: `{"recorded": rows, "requests": n}`. An
id the server cannot find answers 404 naming it and records nothing (`forgeml.serve.feedback`
says how ids are found, across replicas too).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from forgeml.core.errors import InvalidDataError
from forgeml.serve.feedback import (
    FEEDBACK_PATH,
    Label,
    find_predictions,
    join,
    record_feedback,
)
from forgeml.serve.protocols._common import json_response, request_log_of
from forgeml.serve.repository import ModelRepository


class FeedbackItem(BaseModel):
    """The label of one request."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    label: Any


class FeedbackRequest(BaseModel):
    """One label (`id` and `label`) or a batch of them (`feedback`)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, min_length=1, max_length=128)
    label: Any = None
    feedback: list[FeedbackItem] | None = Field(default=None, min_length=1, max_length=10_000)

    def labels(self) -> list[Label]:
        """The labels, one per request id.

        Raises:
            InvalidDataError: both forms or neither, or one request id twice.
        """
        if (self.id is None) == (self.feedback is None):
            raise InvalidDataError(
                'Send {"id": ..., "label": ...} or {"feedback": [{"id": ..., "label": ...}]}, '
                "one of the two."
            )
        items = self.feedback or [FeedbackItem(id=self.id or "", label=self.label)]
        labels = [Label(item.id, item.label) for item in items]
        seen: set[str] = set()
        for label in labels:
            if label.request_id in seen:
                raise InvalidDataError(
                    f"Request id '{label.request_id}' is labelled twice in one batch; "
                    "send each id once."
                )
            seen.add(label.request_id)
        return labels


def router(repository: ModelRepository) -> APIRouter:
    """The feedback route over the models of `repository`."""
    routes = APIRouter(tags=["feedback"])

    @routes.post(FEEDBACK_PATH)
    async def feedback(name: str, body: FeedbackRequest, request: Request) -> Response:
        repository.get(name)  # 404 for a model this server does not serve
        labels = body.labels()
        log = request_log_of(request)
        ids = {label.request_id for label in labels}
        found = await run_in_threadpool(
            find_predictions, name, ids, repository.recent, log.path if log else None
        )
        rows = join(labels, found, repository.options.log_redact)
        recorded = await run_in_threadpool(record_feedback, repository.workspace, rows, "http")
        return json_response({"recorded": recorded, "requests": len(labels)})

    return routes
