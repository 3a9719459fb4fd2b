"""A model version's "Predict and explain" form: a JSON row in (with the method, top-k and
background size `forgeml models explain` takes), the version's prediction and its
attributions out (an ECharts bar chart from a JSON block, and a table), through the
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
from forgeml.core.errors import ForgemlError, InvalidRequestError, UsageError
from forgeml.data._frame import SPLIT_COLUMN
from forgeml.serve.explain import METHODS
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


def explain_methods(request: Request, ref: str) -> list[str]:
    """The methods the form offers for `ref`: a text model's only explainer is integrated
    gradients over its tokens; a tabular one has Kernel SHAP (its default) and integrated
    gradients. A version without a training run is offered both (the API refuses a
    method its model cannot take, with its sentence)."""
    from forgeml.tracking import get_model_version

    try:
        record = get_model_version(workspace(request), ref)
    except ForgemlError:
        return list(METHODS)
    data = (record.run.config if record.run is not None else {}).get("data") or {}
    return ["integrated_gradients"] if data.get("text_column") else list(METHODS)


def parse_options(fields: dict[str, str]) -> dict[str, Any]:
    """The form's method, top-k and background size as `ExplainBody` takes them (what
    `forgeml models explain` takes as --method, --top and --background); a field left
    empty is the API's default.

    Raises:
        InvalidRequestError: a method the API does not know, or a number out of its range.
    """
    options: dict[str, Any] = {}
    method = fields.get("method", "").strip()
    if method:
        if method not in METHODS:
            raise InvalidRequestError(f"Unknown method '{method}': use {' or '.join(METHODS)}.")
        options["method"] = method
    for field, low, high, what in (
        ("top", 1, None, "Top must be a whole number of 1 or more"),
        ("background", 1, _explain.MAX_API_BACKGROUND,
         f"Background must be a whole number of 1 to {_explain.MAX_API_BACKGROUND} rows"),
    ):  # fmt: skip
        text = fields.get(field, "").strip()
        if not text:
            continue
        value = int(text) if text.isdigit() else 0
        if value < low or (high is not None and value > high):
            raise InvalidRequestError(f"{what}, not '{text}'.")
        options[field] = value
    return options


@router.post(
    "/models/{name}/versions/{version}/explain",
    dependencies=[Depends(csrf_checked), same_as(*EXPLAIN)],
)
async def explain(request: Request, name: str, version: PositiveInt) -> HTMLResponse:
    """The prediction and attributions of the form's row (`row`), explained by its method,
    keeping its top-k, against its background size, as the API answers them; a refusal is
    the fragment with its one sentence, under the error's status."""
    from starlette.concurrency import run_in_threadpool

    fields = await form_fields(request)
    try:
        row = parse_row(fields.get("row", ""))
        body = _explain.ExplainBody(inputs=[row], **parse_options(fields))
        answer = await run_in_threadpool(_explain.explain, request, name, version, body)
    except ForgemlError as error:
        return render(request, "explain_result.html", status_code=error.http_status,
                      error=str(error), answer=None, chart=None)  # fmt: skip
    found = answer["explanations"][0]
    chart = {"features": [a["feature"] for a in found["attributions"]][::-1],
             "values": [a["value"] for a in found["attributions"]][::-1]}  # fmt: skip
    return render(request, "explain_result.html", error=None, answer=answer, chart=chart)
