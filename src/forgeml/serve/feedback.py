"""Labels that arrive later, joined to the predictions they judge and recorded durably.

A caller labels a prediction by its request id (`forgeml.serve.request_ids`):
`POST /v2/models/NAME/feedback` on the model server (`protocols/feedback.py`), or
`forgeml monitor feedback FILE` offline. Both join each label to what the server
answered and record the rows in the store's `feedback` table in one transaction: every
id of a batch is known, or nothing is recorded.

How a replica knows the ids. Each server keeps its latest `feedback_window` requests in
memory (`predictions.RecentPredictions`: references to what the answer already built,
so the request path pays one dict insert). An id it does not hold there is looked up in
the request log. Every replica of a deployment serves under the deployment's name and so
appends to the same log, FORGEML_HOME/logs/requests/NAME.jsonl: that file is the shared
record, so feedback sent through `forgeml gateway` to any replica finds a request another
replica answered, as long as that request was logged (`--log-sample-rate 1` logs them
all; with sampling, only the sampled ones and the replica's own recent ones are known).
The offline command reads the same log. The store, not a second log, keeps the labels:
the accuracy monitor and the server's gauges query them by model and window, a batch is
all-or-nothing in one transaction, and it works the same on PostgreSQL across machines.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from forgeml.core.errors import InvalidDataError, NotFoundError
from forgeml.serve.predictions import Prediction, RecentPredictions, row_predictions
from forgeml.serve.request_log import redact

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

FEEDBACK_SUFFIX = "/feedback"
FEEDBACK_PATH = "/v2/models/{name}" + FEEDBACK_SUFFIX
_ID_KEY = b'"id":"'
_IDS_PER_QUERY = 500  # under every database's limit on bound parameters


@dataclass(frozen=True)
class Label:
    """A label for the request `request_id`: one value, or a list with one per row."""

    request_id: str
    label: Any


@dataclass(frozen=True)
class FeedbackRow:
    """One labelled row, joined to its prediction and features."""

    request_id: str
    row: int
    model: str
    model_ref: str
    predicted_at: float
    features: dict[str, Any]
    prediction: dict[str, Any]
    label: Any


def predictions_in_log(log: Path, model: str, ids: set[str]) -> dict[str, Prediction]:
    """The logged requests to served model `model` whose ids are in `ids` (latest wins).

    A missing log holds none. Only lines carrying a wanted id are parsed.
    """
    found: dict[str, Prediction] = {}
    if not ids or not log.is_file():
        return found
    with log.open("rb") as lines:
        for line in lines:
            start = line.find(_ID_KEY)
            if start < 0:
                continue
            start += len(_ID_KEY)
            request_id = line[start : line.find(b'"', start)].decode("ascii", "replace")
            if request_id not in ids:
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the last line may be half-written
            if entry.get("model") != model:
                continue
            found[request_id] = Prediction(
                request_id,
                model,
                entry.get("version", ""),
                entry.get("instances") or [],
                entry.get("outputs"),
                float(entry.get("ts", 0.0)),
            )
    return found


def find_predictions(
    model: str, ids: set[str], recent: RecentPredictions | None, log: Path | None
) -> dict[str, Prediction]:
    """The predictions `ids` name: from `recent` first, then from the request log.

    Raises:
        NotFoundError: an id is in neither (its message names it); nothing is returned.
    """
    found: dict[str, Prediction] = {}
    for request_id in ids:
        kept = recent.get(request_id) if recent is not None else None
        if kept is not None and kept.model == model:
            found[request_id] = kept
    missing = ids - set(found)
    if missing and log is not None:
        found.update(predictions_in_log(log, model, missing))
        missing = ids - set(found)
    if missing:
        names = ", ".join(f"'{name}'" for name in sorted(missing)[:3])
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise NotFoundError(
            f"No prediction of model '{model}' has request id {names}{more}: an id must name "
            "a request this server answered lately or its request log holds; nothing was "
            "recorded."
        )
    return found


def join(
    labels: list[Label], found: dict[str, Prediction], redacted: Iterable[str] = ()
) -> list[FeedbackRow]:
    """Each label joined to its prediction's rows (features redacted as the log does).

    Raises:
        InvalidDataError: a label is null, or a list whose length is not the request's rows.
    """
    fields = frozenset(redacted)
    joined: list[FeedbackRow] = []
    for item in labels:
        prediction = found[item.request_id]
        count = len(prediction.rows)
        values = item.label if isinstance(item.label, list) else [item.label]
        if len(values) != count:
            raise InvalidDataError(
                f"Request '{item.request_id}' had {count} rows but its feedback gives "
                f"{len(values)} labels; send one label, or a list of one per row."
            )
        if any(value is None for value in values):
            raise InvalidDataError(f"The label of request '{item.request_id}' is null.")
        outputs = row_predictions(prediction.outputs, count)
        for row, (features, output, value) in enumerate(
            zip(prediction.rows, outputs, values, strict=True)
        ):
            plain = features if isinstance(features, dict) else {"text": features}
            joined.append(
                FeedbackRow(
                    item.request_id,
                    row,
                    prediction.model,
                    prediction.model_ref,
                    prediction.ts,
                    redact(plain, fields),
                    output,
                    value,
                )
            )
    return joined


def record_feedback(workspace: Workspace, rows: list[FeedbackRow], source: str) -> int:
    """Record `rows` in one transaction (a row labelled again gets the new label).

    Returns the number of rows recorded.
    """
    from sqlalchemy import select

    from forgeml.core.ids import new_id
    from forgeml.core.store import FeedbackRecord

    with workspace.store.session() as session:
        ids = sorted({row.request_id for row in rows})
        existing = {
            (record.model, record.request_id, record.row): record
            for start in range(0, len(ids), _IDS_PER_QUERY)
            for record in session.scalars(
                select(FeedbackRecord).where(
                    FeedbackRecord.model.in_({row.model for row in rows}),
                    FeedbackRecord.request_id.in_(ids[start : start + _IDS_PER_QUERY]),
                )
            )
        }
        now = dt.datetime.now(dt.UTC)
        for row in rows:
            found = existing.get((row.model, row.request_id, row.row))
            record = found or FeedbackRecord(
                id=new_id(), model=row.model, request_id=row.request_id, row=row.row
            )
            record.model_ref = row.model_ref
            record.predicted_at = dt.datetime.fromtimestamp(row.predicted_at, dt.UTC)
            record.features = row.features
            record.prediction = row.prediction
            record.label = row.label
            record.source = source
            record.created_at = now
            if found is None:
                session.add(record)
        models = sorted({row.model for row in rows})
        workspace.audit(
            session,
            "feedback.record",
            ",".join(models),
            {"rows": len(rows), "requests": len({r.request_id for r in rows}), "source": source},
        )
    return len(rows)
