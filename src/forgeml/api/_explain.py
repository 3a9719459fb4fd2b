"""`POST /api/v1/models/{name}/versions/{version}/explain`: attributions for a few rows, as
`forgeml models explain --json` prints them (`forgeml.governance.explain.explain_model`).

Explanations are CPU-heavy (each row costs thousands of model rows), so a request explains
at most `MAX_API_ROWS` rows against at most `MAX_API_BACKGROUND` training rows, and one
explanation runs at a time per control plane; the others wait for it in their worker
threads. Reading a version is what it takes (models:read): the answer tells no more of the
model than its predictions, which a viewer may already see on the served model.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.core.errors import UsageError
from forgeml.serve.explain import DEFAULT_BACKGROUND, Method

router = CliRouter(prefix="/api/v1/models")
MAX_API_ROWS = 4  # rows one request explains
MAX_API_BACKGROUND = 200  # training rows a tabular row is explained against
_ONE_AT_A_TIME = threading.Lock()


class ExplainBody(BaseModel):
    """What `forgeml models explain` takes: rows (`--input`) or one text (`--text`)."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[Any] | None = Field(
        None,
        min_length=1,
        max_length=MAX_API_ROWS,
        description="Rows as the model's predict route takes them (records, or texts).",
    )
    text: str | None = Field(None, max_length=10_000, description="One text (text models).")
    top: PositiveInt | None = Field(None, description="Keep only the N largest attributions.")
    method: Method | None = Field(
        None, description="kernel_shap (tabular default) or integrated_gradients."
    )
    background: int = Field(
        DEFAULT_BACKGROUND,
        ge=1,
        le=MAX_API_BACKGROUND,
        description="Training rows a tabular model is explained against.",
    )

    def rows(self) -> list[Any]:
        """The rows to explain.

        Raises:
            UsageError: neither or both of `inputs` and `text`.
        """
        if (self.inputs is None) == (self.text is None):
            raise UsageError("Give the rows to explain as inputs or one text as text.")
        return [self.text] if self.text is not None else list(self.inputs or [])


@router.post(
    "/{name}/versions/{version}/explain", dependencies=[require("models:read", resource="model")]
)
def explain(request: Request, name: str, version: PositiveInt, body: ExplainBody) -> dict[str, Any]:
    """Per-feature (or per-word) attributions of the version's answer to each row, largest
    first (`models explain --json`): 404 for an unknown version, 422 for a row the model
    does not take or a method it cannot be explained with."""
    from forgeml.governance.explain import explain_model

    rows = body.rows()
    with _ONE_AT_A_TIME:
        found = explain_model(
            workspace(request), f"{name}@v{version}", rows, body.method, body.background
        )
    return found.to_dict(body.top)
