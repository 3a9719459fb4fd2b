"""Curve previews: a run's metric curves LTTB-downsampled once, when forgeml ends the run, and
kept in forgeml's store, so a chart's first view reads `MAX_POINTS` points a curve in one
query instead of every logged value from MLflow's table (100 runs of 10,000 steps are a
million rows; issue 16).

A preview is a cache of MLflow's curve, never the record. Each keeps the metric's latest
value as MLflow kept it (`latest_metrics`: step, timestamp, value, is_nan) when it was made,
read before the curve, so a curve holds at least what its key says. A reader uses it only
while MLflow's latest value is still that one: a value logged past it (a later step) makes
the chart read MLflow again, as the UI's in-memory cache of curves does. A value logged
behind it (an earlier step, into a run that ended) moves no latest value and is not seen
here; forgeml logs only into running runs, so only MLflow's own client, used on an ended
run, logs so. A tracking server (`http://...`) keeps no latest values forgeml can read, so
its runs get no previews.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select

from forgeml.core.store import CurvePreviewRecord
from forgeml.tracking.history import latest_metrics, metric_arrays
from forgeml.tracking.lttb import MAX_POINTS

if TYPE_CHECKING:
    import numpy as np

    from forgeml.core.workspace import Workspace

# how a preview's arrays are kept as bytes, whatever the machine's byte order
STEP_DTYPE, VALUE_DTYPE = "<i8", "<f8"
# MLflow's latest value of a metric, normalised: (step, timestamp, value, is_nan)
Latest = tuple[int, int, float, bool]


@dataclass(frozen=True)
class CurvePreview:
    """One metric's stored preview: at most `points` of its `length` logged values."""

    latest: Latest
    points: int
    length: int
    steps: np.ndarray
    values: np.ndarray

    def serves(self, points: int) -> bool:
        """Whether a chart of `points` points a curve may be drawn from this preview: it
        holds the whole curve, or was cut to `points` or more (a smaller chart downsamples
        the preview again)."""
        return self.length <= self.points or points <= self.points


def latest_of(row: tuple[Any, ...]) -> Latest:
    """MLflow's latest value `(step, timestamp, value, is_nan)` as the database driver gives
    it, in the types a preview keeps it (SQLite gives is_nan as 0/1, PostgreSQL a bool).
    A missing value becomes NaN, which equals nothing: such a preview is never used."""
    step, timestamp, value, is_nan = row
    return int(step), int(timestamp), math.nan if value is None else float(value), bool(is_nan)


def store_curve_previews(workspace: Workspace, run_ids: list[str], points: int = MAX_POINTS) -> int:
    """Store the previews of every metric of the runs (replacing any they had), each curve
    LTTB-downsampled to `points` (`lttb_many.lttb_arrays`); what forgeml calls as it ends a
    run (`runs.finish_run`, `runs.reap_expired`).

    Args:
        workspace: whose MLflow holds the curves and whose store keeps the previews.
        run_ids: the runs, each with a row in forgeml's `runs` table.
        points: the most points a preview keeps of a curve (at least 3).

    Returns:
        How many previews were stored (0 for a tracking server's runs).
    """
    from forgeml.tracking.lttb_many import lttb_arrays

    if not run_ids:
        return 0
    latest = latest_metrics(workspace, run_ids)
    if latest is None:
        return 0
    # read after `latest`: a value logged in between leaves the preview at least as new as
    # its key says, and moves MLflow's latest value past the key (the preview is unused)
    curves = metric_arrays(workspace, run_ids)
    todo = [
        (run_id, key, curve)
        for run_id in run_ids
        for key, curve in curves[run_id].items()
        if key in latest[run_id] and not math.isnan(latest_of(latest[run_id][key])[2])
    ]
    downsampled = lttb_arrays([curve for _, _, curve in todo], points)
    records = []
    for (run_id, key, curve), (steps, values) in zip(todo, downsampled, strict=True):
        step, timestamp, value, is_nan = latest_of(latest[run_id][key])
        records.append(
            CurvePreviewRecord(
                run_id=run_id,
                key=key,
                step=step,
                timestamp=timestamp,
                value=value,
                is_nan=is_nan,
                points=points,
                length=len(curve[0]),
                steps=steps.astype(STEP_DTYPE).tobytes(),
                values=values.astype(VALUE_DTYPE).tobytes(),
            )
        )
    with workspace.store.session(write=True) as session:
        session.execute(delete(CurvePreviewRecord).where(CurvePreviewRecord.run_id.in_(run_ids)))
        session.add_all(records)
    return len(records)


def read_curve_previews(
    workspace: Workspace, run_ids: list[str]
) -> dict[str, dict[str, CurvePreview]]:
    """The stored previews of the runs, in one query: {run_id: {key: preview}}; a run
    without any maps to {}."""
    import numpy as np

    found: dict[str, dict[str, CurvePreview]] = {run_id: {} for run_id in run_ids}
    if not run_ids:
        return found
    record = CurvePreviewRecord
    # plain rows, not an ORM object each (a chart of 100 runs of 50 metrics reads 5,000)
    query = select(
        record.run_id, record.key, record.step, record.timestamp, record.value,
        record.is_nan, record.points, record.length, record.steps, record.values,
    ).where(record.run_id.in_(run_ids))  # fmt: skip
    with workspace.store.read_session() as session:
        for row in session.execute(query):
            found[row.run_id][row.key] = CurvePreview(
                latest=latest_of((row.step, row.timestamp, row.value, row.is_nan)),
                points=row.points,
                length=row.length,
                steps=np.frombuffer(row.steps, dtype=STEP_DTYPE),
                values=np.frombuffer(row.values, dtype=VALUE_DTYPE),
            )
    return found
