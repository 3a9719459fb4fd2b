"""The online feature-drift detector: rows in as they arrive, an alarm as soon as a numeric
feature's mean moves, at a false-alarm rate set as the expected run length (ARL).

    detector = OnlineDriftDetector.fit(train_frame, OnlineDriftConfig(run_length=10_000))
    for alarm in detector.update(batch):          # any number of rows at a time
        alarm.row, alarm.feature, alarm.direction
    saved = detector.to_json()                    # a restart resumes from this
    detector = OnlineDriftDetector.from_json(saved)

Each feature is standardised by the reference: centred on its Huber M-estimate of
location and divided by 1.4826 x its median absolute deviation (its standard deviation
where half the values are equal, 1 where it is constant), then clipped to +-clip; the
Huber centre is the one whose clipped standardised values average zero, so a skewed
feature does not drift by construction. Every feature has a two-sided CUSUM tuned to a
shift of `shift` deviations; the detector alarms when any statistic passes the threshold,
then starts again from zero. The threshold is calibrated by simulating the whole detector
on the reference's own standardised values (`_cusum.calibrate`), so the ARL set holds for
data drawn like the reference (with the reference's centre known to about 1/sqrt(rows)
deviations: a small reference shortens it a little). Missing values count as the centre.

Calibrating simulates up to 20M values (seconds; with `calibration_cache`, once per
reference and config); a longer ARL is extrapolated (`_cusum.calibrate`). `forgeml server`
runs a detector per served model version over its request log (`_follow.OnlineWatch`). Measured in
benchmarks/drift_online.py: 10 features, ARL set to 10,000, 10,773 +- 714 over 200 runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import InvalidDataError
from forgeml.monitor.drift._cusum import calibrate, cusum_paths
from forgeml.monitor.drift._online_config import OnlineDriftConfig

if TYPE_CHECKING:
    import polars as pl

    from forgeml.monitor.drift._reference import ReferenceProfile

FORMAT = 1  # bump when the JSON shape changes
_POOL = 10_000  # reference values per feature the calibration draws from
_SEGMENT = 4_096  # rows updated at once (after an alarm the rest of a segment is redone)
Direction = Literal["up", "down"]


class OnlineAlarm(BaseModel):
    """Where the detector alarmed: the row (counted from the first row it saw), the feature
    whose statistic was highest, and which way its mean moved."""

    model_config = ConfigDict(frozen=True)

    row: int
    feature: str
    direction: Direction
    statistic: float


class OnlineDriftState(BaseModel):
    """Everything the detector is: JSON, so a restarted server resumes where it stopped."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    config: OnlineDriftConfig
    features: list[str]
    center: list[float]
    scale: list[float]
    threshold: float = Field(description="Alarm when a CUSUM statistic passes this.")
    calibrated_arl: float = Field(description="The simulated ARL at the threshold.")
    calibration_alarms: int = Field(description="Simulated runs that alarmed (precision).")
    upper: list[float]
    lower: list[float]
    rows: int = 0
    alarms: int = 0


@dataclass
class _Standardiser:
    center: np.ndarray
    scale: np.ndarray


def _robust_scale(values: np.ndarray) -> float:
    median = float(np.median(values))
    mad = 1.4826 * float(np.median(np.abs(values - median)))
    if mad > 0:
        return mad
    std = float(values.std())
    return std if std > 0 else 1.0


def _huber_center(values: np.ndarray, scale: float, clip: float) -> float:
    """The location whose clipped standardised values average zero (Huber, 1964)."""
    center = float(np.median(values))
    for _ in range(100):
        step = scale * float(np.clip((values - center) / scale, -clip, clip).mean())
        center += step
        if abs(step) < 1e-9 * scale:
            break
    return center


def _pool(values: np.ndarray, center: float, scale: float, clip: float, seed: int) -> np.ndarray:
    if values.size > _POOL:
        values = np.random.default_rng(seed).choice(values, _POOL, replace=False)
    return np.clip((values - center) / scale, -clip, clip)


def _calibration_key(pools: list[np.ndarray], config: OnlineDriftConfig) -> str:
    digest = hashlib.sha256(config.model_dump_json().encode())
    for values in pools:
        digest.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:32]


class OnlineDriftDetector:
    """A two-sided CUSUM per numeric feature, calibrated to an expected run length."""

    def __init__(self, state: OnlineDriftState) -> None:
        self.state = state
        self._center = np.asarray(state.center, dtype=np.float64)
        self._scale = np.asarray(state.scale, dtype=np.float64)
        self._upper = np.asarray(state.upper, dtype=np.float64)
        self._lower = np.asarray(state.lower, dtype=np.float64)

    @property
    def features(self) -> list[str]:
        return self.state.features

    @property
    def threshold(self) -> float:
        return self.state.threshold

    @classmethod
    def fit(
        cls,
        reference: pl.DataFrame | dict[str, np.ndarray],
        config: OnlineDriftConfig,
        calibration_cache: Path | None = None,
    ) -> OnlineDriftDetector:
        """A detector for the numeric columns of `reference` (missing values left out).

        Args:
            reference: the reference rows (a frame, or arrays by feature name).
            config: the ARL and the shift to catch.
            calibration_cache: a folder keeping calibrated thresholds by reference and
                config, so the same reference is simulated once.

        Raises:
            InvalidDataError: no numeric feature, or one with no finite value.
        """
        columns = _numeric_arrays(reference)
        if not columns:
            raise InvalidDataError(
                "The online drift detector watches numeric features, and the reference has none."
            )
        empty = [name for name, values in columns.items() if values.size == 0]
        if empty:
            raise InvalidDataError(
                f"The reference feature '{empty[0]}' has no finite value to standardise by."
            )
        scales = [_robust_scale(values) for values in columns.values()]
        centers = [
            _huber_center(values, scale, config.clip)
            for values, scale in zip(columns.values(), scales, strict=True)
        ]
        pools = [
            _pool(values, center, scale, config.clip, config.seed + i)
            for i, (values, center, scale) in enumerate(
                zip(columns.values(), centers, scales, strict=True)
            )
        ]
        found = _calibrated(pools, config, calibration_cache)
        zeros = [0.0] * len(columns)
        return cls(
            OnlineDriftState(
                config=config,
                features=list(columns),
                center=centers,
                scale=scales,
                threshold=found[0],
                calibrated_arl=found[1],
                calibration_alarms=found[2],
                upper=zeros,
                lower=zeros,
            )
        )

    @classmethod
    def from_profile(
        cls,
        profile: ReferenceProfile,
        config: OnlineDriftConfig,
        calibration_cache: Path | None = None,
    ) -> OnlineDriftDetector:
        """A detector for the numeric features of a reference profile, from its quantile
        sketch (equally weighted points of each distribution)."""
        samples = {
            name: np.asarray(column.quantiles, dtype=np.float64)
            for name, column in profile.columns.items()
            if column.kind == "numeric" and name in profile.features
        }
        return cls.fit(samples, config, calibration_cache)

    def update(self, rows: pl.DataFrame | np.ndarray) -> list[OnlineAlarm]:
        """Feed rows in arrival order; the alarms they raised, in order.

        `rows` is a frame holding every feature (other columns are ignored) or an array
        of shape (rows, features) in `features` order.

        Raises:
            InvalidDataError: a feature is missing from `rows`, or the shape is wrong.
        """
        values = self._matrix(rows)
        clip = self.state.config.clip
        z = np.clip((values - self._center) / self._scale, -clip, clip)
        z[np.isnan(z)] = 0.0  # a missing value counts as the centre
        alarms: list[OnlineAlarm] = []
        begin, size = 0, _SEGMENT
        while begin < len(z):
            seen = self._update_segment(z[begin : begin + size], alarms)
            begin += seen
            # after an alarm the rest of a segment is computed again: while alarms come
            # often, take segments about twice the gap between them
            size = _SEGMENT if seen == size else min(_SEGMENT, max(64, 2 * seen))
        return alarms

    def _update_segment(self, z: np.ndarray, alarms: list[OnlineAlarm]) -> int:
        """Update over `z` up to and including its first alarm; the rows consumed."""
        k, h = self.state.config.shift / 2, self.state.threshold
        up = cusum_paths(z - k, self._upper)
        down = cusum_paths(-z - k, self._lower)
        over = np.maximum(up, down).max(axis=1) > h
        if not over.any():
            self._upper, self._lower = up[-1].copy(), down[-1].copy()
            self.state.rows += len(z)
            return len(z)
        at = int(np.argmax(over))
        highest = np.maximum(up[at], down[at])
        feature = int(np.argmax(highest))
        direction: Direction = "up" if up[at, feature] >= down[at, feature] else "down"
        alarms.append(
            OnlineAlarm(
                row=self.state.rows + at,
                feature=self.state.features[feature],
                direction=direction,
                statistic=float(highest[feature]),
            )
        )
        self._upper = np.zeros_like(self._upper)  # start again after an alarm
        self._lower = np.zeros_like(self._lower)
        self.state.rows += at + 1
        self.state.alarms += 1
        return at + 1

    def _matrix(self, rows: pl.DataFrame | np.ndarray) -> np.ndarray:
        features = self.state.features
        if isinstance(rows, np.ndarray):
            if rows.ndim != 2 or rows.shape[1] != len(features):
                raise InvalidDataError(
                    f"Rows for the online detector have {len(features)} columns "
                    f"({', '.join(features)}); got an array of shape {rows.shape}."
                )
            return rows.astype(np.float64, copy=False)
        missing = [name for name in features if name not in rows.columns]
        if missing:
            raise InvalidDataError(
                f"The rows lack the feature '{missing[0]}' the online detector watches."
            )
        import polars as pl

        from forgeml.monitor.drift._reference import finite

        try:
            clean = rows.select(finite(name) for name in features)
        except pl.exceptions.PolarsError:
            raise InvalidDataError(
                "A feature the online detector watches holds values that are not numbers."
            ) from None
        return clean.to_numpy().astype(np.float64)

    def to_json(self) -> str:
        """The detector's whole state as JSON (`from_json` resumes it)."""
        self.state.upper = self._upper.tolist()
        self.state.lower = self._lower.tolist()
        return self.state.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> OnlineDriftDetector:
        """Resume a detector saved by `to_json`.

        Raises:
            InvalidDataError: the text is not an online detector's state.
        """
        try:
            state = OnlineDriftState.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            raise InvalidDataError(
                f"Not an online drift detector's state: {where}: {first['msg']}."
            ) from None
        sizes = {len(state.center), len(state.scale), len(state.upper), len(state.lower)}
        if sizes != {len(state.features)}:
            raise InvalidDataError(
                "Not an online drift detector's state: its per-feature lists differ in length."
            )
        return cls(state)


def _numeric_arrays(reference: pl.DataFrame | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if isinstance(reference, dict):
        arrays = {name: np.asarray(values, dtype=np.float64) for name, values in reference.items()}
    else:
        from forgeml.data._frame import user_columns

        arrays = {
            name: reference.get_column(name).cast(float).to_numpy()
            for name in user_columns(reference)
            if reference.schema[name].is_numeric()
        }
    return {name: values[np.isfinite(values)] for name, values in arrays.items()}


def _calibrated(
    pools: list[np.ndarray], config: OnlineDriftConfig, cache: Path | None
) -> tuple[float, float, int]:
    key = _calibration_key(pools, config)
    path = cache / f"{key}.json" if cache is not None else None
    if path is not None and path.is_file():
        import orjson

        saved = orjson.loads(path.read_bytes())
        return float(saved["threshold"]), float(saved["arl"]), int(saved["alarms"])
    found = calibrate(
        pools, config.shift / 2, config.run_length, config.calibration_runs, config.seed
    )
    if path is not None:
        import orjson

        body = {"threshold": found.threshold, "arl": found.arl, "alarms": found.alarms}
        atomic_write_text(path, orjson.dumps(body).decode())
    return found.threshold, found.arl, found.alarms
