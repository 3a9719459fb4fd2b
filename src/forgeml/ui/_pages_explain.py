"""A model version's "Predict and explain" form: a JSON row in, the version's prediction
and its attributions out (an ECharts bar chart from a JSON block, and a table), through the
API's explain route function under its permission. The form's first row is a row of the
version's training split (its label left out), read when the model page is drawn."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import PositiveInt

from forgeml.api import _explain
from forgeml.api._context import workspace
from forgeml.core.errors import ForgemlError, UsageError
from forgeml.data._frame import SPLIT_COLUMN
from forgeml.ui._authz import same_as
from forgeml.ui._render import render
from forgeml.ui._security import csrf_checked, form_fields

router = APIRouter()
EXPLAIN = _explain.router, _explain.explain
MAX_ROW_CHARS = 20_000  # one record, or one text


def example_row(request: Request, ref: str) -> str:
    """A row of `ref`'s training split without its label, as indented JSON; "" when the
    version records no training data (an imported model) or it cannot be read."""
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    try:
        record = get_model_version(workspace(request), ref)
        if record.dataset_version is None:
            return ""
        data = (record.run.config if record.run is not None else {}).get("data") or {}
        frame = catalog.read_frame(workspace(request), record.dataset_version,
                                   data.get("train_split", "train")).head(1)  # fmt: skip
    except ForgemlError:
        return ""
    left_out = {data.get("target"), SPLIT_COLUMN}  # the label, and the split's own column
    rows = frame.drop([column for column in frame.columns if column in left_out]).to_dicts()
    return json.dumps(rows[0], indent=1, default=str) if rows else ""


def parse_row(text: str) -> Any:
    """The one row the form holds: a JSON record (a text for a text model).

    Raises:
        UsageError: it is not JSON, or it is a list.
    """
    if len(text) > MAX_ROW_CHARS:
        raise UsageError(f"The row is over {MAX_ROW_CHARS} characters; give one row.")
    try:
        row = json.loads(text)
    except json.JSONDecodeError:
        raise UsageError(
            'The row is not JSON; give one JSON record such as {"age": 39, ...}.'
        ) from None
    if isinstance(row, list):
        raise UsageError("Give one row (a JSON record), not a list of rows.")
    return row


@router.post(
    "/models/{name}/versions/{version}/explain",
    dependencies=[Depends(csrf_checked), same_as(*EXPLAIN)],
)
async def explain(request: Request, name: str, version: PositiveInt) -> HTMLResponse:
    """The prediction and attributions of the form's row (`row`), as the API answers them;
    a refusal is the fragment with its one sentence, under the error's status."""
    from starlette.concurrency import run_in_threadpool

    fields = await form_fields(request)
    try:
        body = _explain.ExplainBody(inputs=[parse_row(fields.get("row", ""))])
        answer = await run_in_threadpool(_explain.explain, request, name, version, body)
    except ForgemlError as error:
        return render(request, "explain_result.html", status_code=error.http_status,
                      error=str(error), answer=None, chart=None)  # fmt: skip
    found = answer["explanations"][0]
    chart = {"features": [a["feature"] for a in found["attributions"]][::-1],
             "values": [a["value"] for a in found["attributions"]][::-1]}  # fmt: skip
    return render(request, "explain_result.html", error=None, answer=answer, chart=chart)
