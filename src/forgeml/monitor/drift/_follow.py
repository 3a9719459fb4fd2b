"""The online drift detector run live: a served model's request log followed from where it
was last read, each row fed to the detector of the model version that answered it.

    watch = OnlineWatch(home, OnlineDriftConfig(run_length=100_000), reference)
    for version, watched in watch.follow("adult", log).items():  # rows logged since last call
        watched.rows, watched.alarms, watched.last_alarm, watched.statistics()

A version's detector is built from its reference (`OnlineDriftDetector.from_profile`) the
first time one of its rows arrives, so a new model version starts afresh; its calibration
is kept under FORGEML_HOME/monitor/online/calibrations/ by reference and config, so neither
a restart nor a second served name with the same version simulates it again. A version
whose reference cannot be had (no dataset recorded, no numeric feature) is marked
unwatched once: its rows are read and counted, never fed.

One JSON file per served name, FORGEML_HOME/monitor/online/served/NAME.json, holds the read
position (byte offset past the last whole line, and the log's inode: a replaced or
truncated log is read from its start) and every version's detector (`to_json`), written
atomically after each read. A server killed at any point resumes from the last file
written: every row is fed exactly once, in the order the log holds them. A line still
being written is left for the next read; a read takes at most `MAX_READ_BYTES`, so a long
backlog is caught up over several calls.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ForgemlError, InvalidDataError
from forgeml.monitor.drift._live import _rows
from forgeml.monitor.drift._online import Direction, OnlineDriftDetector, OnlineDriftState
from forgeml.monitor.drift._online_config import OnlineDriftConfig
from forgeml.monitor.drift._reference import ReferenceProfile

FORMAT = 1  # bump when the JSON shape changes
MAX_READ_BYTES = 32 * 1024 * 1024
_log = logging.getLogger(__name__)


class LastAlarm(BaseModel):
    """A version's latest alarm: its row (counted over the version's rows), feature,
    direction, and when that row's request was logged."""

    row: int
    feature: str
    direction: Direction
    time: float | None


class WatchedVersion(BaseModel):
    """One model version's detector and what it has seen."""

    model_config = ConfigDict(extra="forbid")

    detector: OnlineDriftState | None = None
    unwatched: str | None = Field(None, description="Why its rows are read but not fed.")
    rows: int = Field(0, description="Rows fed, over every detector the version had.")
    skipped: int = Field(0, description="Rows read but not fed (an unwatched version).")
    alarms: dict[str, int] = Field(default_factory=dict, description="Alarms by feature.")
    last_alarm: LastAlarm | None = None

    def statistics(self) -> dict[str, float]:
        """Each feature's CUSUM statistic (the higher side) over the threshold: 1 alarms."""
        if self.detector is None:
            return {}
        state = self.detector
        return {
            name: max(up, down) / state.threshold
            for name, up, down in zip(state.features, state.upper, state.lower, strict=True)
        }


class WatchState(BaseModel):
    """A served name's read position in its log and its versions' detectors."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    inode: int = 0
    offset: int = 0
    versions: dict[str, WatchedVersion] = Field(default_factory=dict)


class OnlineWatch:
    """Feeds each served model's newly logged rows to its versions' online detectors.

    Args:
        home: FORGEML_HOME; state and calibrations are kept under monitor/online/.
        config: the detectors' options (the run length between false alarms).
        reference: the reference profile of a model version (NAME@vN).
        max_read_bytes: the most of a log one `follow` reads.
    """

    def __init__(
        self,
        home: Path,
        config: OnlineDriftConfig,
        reference: Callable[[str], ReferenceProfile],
        max_read_bytes: int = MAX_READ_BYTES,
    ) -> None:
        self.folder = Path(home) / "monitor" / "online"
        self.config = config
        self.reference = reference
        self.max_read_bytes = max_read_bytes

    def state_path(self, served: str) -> Path:
        return self.folder / "served" / f"{served}.json"

    def load(self, served: str) -> WatchState:
        """The kept state of `served` (a fresh one when none is kept).

        Raises:
            InvalidDataError: the kept file is not a watch state of this format.
        """
        path = self.state_path(served)
        if not path.is_file():
            return WatchState()
        try:
            state = WatchState.model_validate_json(path.read_bytes())
        except ValidationError as error:
            raise InvalidDataError(
                f"{path} is not an online drift watch's state ({error.errors()[0]['msg']}); "
                f"delete it to watch '{served}' from the start of its log."
            ) from None
        return state

    def follow(self, served: str, log: Path) -> dict[str, WatchedVersion]:
        """Feed the rows `served` logged since the last call; every version's figures.

        Raises:
            InvalidDataError: the kept state is damaged.
        """
        state = self.load(served)
        if not log.is_file():
            return state.versions
        data, state.inode, start = _read_new(log, state, self.max_read_bytes)
        if not data:
            return state.versions
        for version, (rows, times) in _rows_by_version(data, served).items():
            watched = state.versions.setdefault(version, WatchedVersion())
            self._feed(served, version, watched, rows, times)
        state.offset = start + len(data)
        atomic_write_text(self.state_path(served), state.model_dump_json())
        return state.versions

    def _feed(
        self,
        served: str,
        version: str,
        watched: WatchedVersion,
        rows: list[dict[str, Any]],
        times: list[float | None],
    ) -> None:
        detector = self._detector(version, watched)
        if detector is None:
            watched.skipped += len(rows)
            return
        before = detector.state.rows
        for alarm in detector.update(_matrix(rows, detector.features)):
            at = alarm.row - before
            watched.alarms[alarm.feature] = watched.alarms.get(alarm.feature, 0) + 1
            watched.last_alarm = LastAlarm(
                row=watched.rows + at,
                feature=alarm.feature,
                direction=alarm.direction,
                time=times[at],
            )
            _log.info(
                "online drift: %s (%s) feature %s moved %s at row %d",
                served, version, alarm.feature, alarm.direction, watched.rows + at,
            )  # fmt: skip
        watched.rows += len(rows)
        detector.to_json()  # writes the CUSUM statistics back into detector.state
        watched.detector = detector.state

    def _detector(self, version: str, watched: WatchedVersion) -> OnlineDriftDetector | None:
        """The version's detector: kept, else built from its reference (None: unwatched)."""
        if watched.unwatched is not None:
            return None
        if watched.detector is not None and watched.detector.config == self.config:
            return OnlineDriftDetector(watched.detector)
        try:
            profile = self.reference(version)
            detector = OnlineDriftDetector.from_profile(
                profile, self.config, self.folder / "calibrations"
            )
        except ForgemlError as error:  # no dataset recorded, no numeric feature, no version
            watched.unwatched = str(error)
            _log.info("online drift: %s is not watched: %s", version, error)
            return None
        # a changed config (a new run length) starts the detector again; the counts go on
        watched.detector = detector.state
        return detector


def _read_new(log: Path, state: WatchState, limit: int) -> tuple[bytes, int, int]:
    """The whole lines past the kept offset (at most `limit` bytes), the log's inode, and
    where they start."""
    with log.open("rb") as file:
        found = os.fstat(file.fileno())
        replaced = found.st_ino != state.inode or found.st_size < state.offset
        start = 0 if replaced else state.offset
        file.seek(start)
        data = file.read(limit)
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) == limit:
        end = len(data)  # one line longer than a read: skipped (it cannot parse), not stuck
    return data[:end], found.st_ino, start


def _rows_by_version(
    data: bytes, served: str
) -> dict[str, tuple[list[dict[str, Any]], list[float | None]]]:
    """`served`'s rows in `data` (JSON lines) by the version that answered, in log order."""
    found: dict[str, tuple[list[dict[str, Any]], list[float | None]]] = {}
    for line in data.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict) or entry.get("model") != served:
            continue
        version = entry.get("version")
        if not isinstance(version, str):
            continue
        stamp = entry.get("ts")
        rows, times = found.setdefault(version, ([], []))
        for row in _rows(entry):
            rows.append(row)
            times.append(float(stamp) if isinstance(stamp, int | float) else None)
    return found


def _number(value: Any) -> float:
    """A logged value as a float; anything else (missing, redacted, text) is NaN."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return math.nan
    if not isinstance(value, int | float):
        return math.nan
    number = float(value)
    return number if math.isfinite(number) else math.nan


def _matrix(rows: list[dict[str, Any]], features: list[str]) -> np.ndarray:
    values = [[_number(row.get(name)) for name in features] for row in rows]
    return np.asarray(values, dtype=np.float64).reshape(len(rows), len(features))
