"""What a model server answered lately, by request id, for labels that arrive later.

`RecentPredictions` keeps the last `capacity` requests (references to the rows and
outputs the answer already built: nothing is copied or serialised on the request path).
`row_predictions` turns a request's outputs, as either protocol answered them, into one
prediction per row: `{"label", "confidence"}` for a classifier (confidence: the highest
class probability, None if the caller asked for no probabilities), `{"value"}` for a
regressor, the row's outputs otherwise.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs more per request
class Prediction:
    """One answered request: its served model name, the version used, rows and outputs."""

    request_id: str
    model: str
    model_ref: str
    rows: list[Any]
    outputs: Any
    ts: float = field(default_factory=time.time)


class RecentPredictions:
    """The latest `capacity` predictions by request id (an id sent twice: the latest)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # an OrderedDict: a plain dict's oldest key is found by skipping every deleted
        # slot before it (next(iter(d)) grew to ~15 us at 10k entries); popitem is O(1)
        self._by_id: OrderedDict[str, Prediction] = OrderedDict()

    def add(
        self, request_id: str, model: str, model_ref: str, rows: list[Any], outputs: Any
    ) -> None:
        """Keep one answered request, forgetting the oldest beyond `capacity`."""
        if self.capacity == 0:
            return
        by_id = self._by_id
        by_id.pop(request_id, None)  # re-inserted last: an id reused is as new as its last use
        by_id[request_id] = Prediction(request_id, model, model_ref, rows, outputs)
        if len(by_id) > self.capacity:
            by_id.popitem(last=False)

    def get(self, request_id: str) -> Prediction | None:
        """The prediction answered under `request_id`, if still kept."""
        return self._by_id.get(request_id)

    def __len__(self) -> int:
        return len(self._by_id)


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _confidence(probabilities: Any) -> float | None:
    values = _plain(probabilities)
    if isinstance(values, dict):
        values = list(values.values())
    return float(max(values)) if isinstance(values, list) and values else None


def row_predictions(outputs: Any, rows: int) -> list[dict[str, Any]]:
    """One prediction per row of a request whose answer was `outputs`.

    `outputs` is a v2 answer by output name (`{"label": [...], "probabilities": [[...]]}`,
    `{"prediction": [...]}`) or a `:predict` answer, one entry per row (`{"label",
    "probabilities": {class: p}}` or a number), as served or as read back from the log.
    """
    if isinstance(outputs, dict):
        columns = {name: _plain(values) for name, values in outputs.items()}
        per_row = [{name: values[i] for name, values in columns.items()} for i in range(rows)]
    else:
        per_row = list(_plain(outputs))
    return [_one(item) for item in per_row]


def _one(item: Any) -> dict[str, Any]:
    if isinstance(item, int | float) and not isinstance(item, bool):
        return {"value": float(item)}
    if not isinstance(item, dict):
        return {"output": item}
    if "label" in item:
        return {"label": str(item["label"]), "confidence": _confidence(item.get("probabilities"))}
    if "prediction" in item:
        return {"value": float(_plain(item["prediction"]))}
    return {name: _plain(value) for name, value in item.items()}
