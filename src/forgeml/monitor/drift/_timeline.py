"""Drift over time: consecutive windows of a request log, each scored per feature, and a plot.

A feature's score in a window is its effect size over that effect's threshold (the effect
`detect_drift` chose: the one nearest or furthest past its threshold), so every feature
reads on one scale where 1 is the threshold. The plot (matplotlib, Agg backend: no display
needed) draws one line per feature across the windows and the threshold; the windows it
drew are written into the PNG's `Description` text chunk as JSON, so a reader can check
them against the log.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.errors import ForgemlError
from forgeml.monitor.drift._config import DriftConfig
from forgeml.monitor.drift._detect import detect_drift
from forgeml.monitor.drift._live import LoggedRequests
from forgeml.monitor.drift._reference import ReferenceProfile
from forgeml.monitor.drift._report import ColumnDrift

PNG_KEY = "Description"  # the PNG text chunk that holds the windows as JSON


class WindowScores(BaseModel):
    """One window of the log and its features' scores (effect size / threshold)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="Position of the window's first row among the log's rows.")
    rows: int
    start: float = Field(description="Time of the window's first row (epoch seconds).")
    end: float = Field(description="Time of its last row.")
    scores: dict[str, float | None]
    drifted: list[str]


def _score(result: ColumnDrift, config: DriftConfig) -> float | None:
    thresholds = {
        "psi": config.psi_threshold,
        "wasserstein": config.wasserstein_threshold,
        "js": config.js_threshold,
    }
    if result.effect is None or result.effect_size is None:
        return None
    return result.effect_size / thresholds[result.effect]


def drift_over_time(
    reference: ReferenceProfile,
    requests: LoggedRequests,
    window: int,
    columns: list[str],
    config: DriftConfig | None = None,
) -> list[WindowScores]:
    """Score consecutive windows of `window` rows (the last one may be shorter), oldest first.

    Raises:
        EmptyWindowError, MissingColumnError, InvalidDataError: as `detect_drift`.
    """
    config = config or DriftConfig()
    found = []
    for start in range(0, requests.frame.height, window):
        rows = requests.frame.slice(start, window)
        report = detect_drift(reference, rows, config, columns)
        found.append(
            WindowScores(
                index=start,
                rows=rows.height,
                start=requests.times[start],
                end=requests.times[start + rows.height - 1],
                scores={r.column: _score(r, config) for r in report.columns},
                drifted=report.drifted_columns,
            )
        )
    return found


def latest_windows(
    reference: ReferenceProfile,
    requests: LoggedRequests,
    window: int,
    count: int,
    columns: list[str],
    config: DriftConfig | None = None,
) -> list[WindowScores]:
    """The latest `count` windows of `window` rows, oldest first, each keeping its place in
    the log (`index` counts from the log's first row; the last window may be shorter).

    Raises:
        EmptyWindowError, MissingColumnError, InvalidDataError: as `detect_drift`.
    """
    total = -(-requests.frame.height // window)  # windows in the whole log, the last short
    start = max(0, total - count) * window  # windows keep their place in the log
    tail = replace(requests, frame=requests.frame.slice(start), times=requests.times[start:])
    found = drift_over_time(reference, tail, window, columns, config)
    return [w.model_copy(update={"index": w.index + start}) for w in found]


def _label(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%m-%d %H:%M:%S")


def plot_drift(windows: list[WindowScores], path: Path, title: str) -> None:
    """Draw each feature's score across `windows` into the PNG at `path`.

    Raises:
        ForgemlError: the file cannot be written (nothing is left behind).
    """
    import matplotlib

    matplotlib.use("Agg")  # no display: a server, a CI job
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 5), layout="constrained")
    axes = figure.add_subplot()
    positions = list(range(len(windows)))
    names = list(dict.fromkeys(name for w in windows for name in w.scores))
    for name in names:
        values = [w.scores.get(name) for w in windows]
        axes.plot(
            positions, [float("nan") if v is None else v for v in values], marker="o", label=name
        )
    axes.axhline(1.0, color="black", linestyle="--", linewidth=1, label="threshold")
    axes.set_xticks(positions, [_label(w.end) for w in windows], rotation=45, ha="right")
    axes.set_xlabel(f"window end (UTC), {windows[0].rows if windows else 0} rows each")
    axes.set_ylabel("effect size / threshold")
    axes.set_title(title)
    axes.legend(fontsize="small", ncols=2, loc="upper left")
    described = orjson.dumps([w.model_dump(mode="json") for w in windows]).decode()
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(temporary, format="png", dpi=100, metadata={PNG_KEY: described})
        temporary.replace(path)  # atomic: never a half-drawn file under the asked name
    except OSError as error:
        with contextlib.suppress(OSError):  # its folder may be what failed
            temporary.unlink(missing_ok=True)
        raise ForgemlError(
            f"Cannot write the plot to {path} ({error.strerror or error}); name a file in a "
            "writable folder."
        ) from None
