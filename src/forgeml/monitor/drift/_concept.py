"""Concept drift from labels: a Bernoulli CUSUM on the stream of prediction errors.

    detector = ErrorRateDetector(ConceptDriftConfig(run_length=50_000))
    for alarm in detector.update(errors):     # 0/1 per labelled prediction, as labels arrive
        alarm.index, alarm.rate

After a warm-up of `warmup` predictions estimates the in-control error rate p0, the
detector accumulates the log-likelihood ratio of "the odds of an error rose by
`odds_ratio`" against p0 (the Bernoulli CUSUM of Reynolds and Stoumbos, "A CUSUM chart for
monitoring a proportion when inspecting continuously", J. Quality Technology 1999), and
alarms when it reaches the threshold. The two log-likelihood steps are rounded to integer
weights (the larger one 40), which makes the CUSUM a finite Markov chain whose ARL
is solved exactly (Brook and Evans, Biometrika 1972): the threshold is the least one whose
ARL reaches the one set, with no simulation. p0 is re-estimated (and the threshold with
it) at 2x, 4x, 8x ... the warm-up, since a rate estimated from 1,000 predictions is off
by a few percent, and the ARL of a Bernoulli CUSUM is sensitive to it. After an alarm
the detector warms up again on the new concept.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from forgeml.core.errors import InvalidDataError
from forgeml.monitor.drift._cusum import cusum_paths
from forgeml.monitor.drift._online_config import ConceptDriftConfig

FORMAT = 1
_WEIGHT = 40  # the larger of the two integer step weights (the chain has ~40 h / LLR states)


class ConceptAlarm(BaseModel):
    """Where the error rate rose: the prediction's index (from the first one seen), the
    in-control rate it was judged against and the rate since the last (re)start."""

    model_config = ConfigDict(frozen=True)

    index: int
    in_control_rate: float
    rate: float


class ConceptDriftState(BaseModel):
    """The detector's state as JSON, so a restarted server resumes it."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    config: ConceptDriftConfig
    seen: int = 0
    count: int = 0  # predictions since the last (re)start
    errors: int = 0  # errors among them
    rate: float | None = None  # the in-control rate, None while warming up
    up: int = 0
    down: int = 0
    threshold: int = 0
    statistic: int = 0
    next_estimate: int = 0
    alarms: int = 0


@functools.lru_cache(maxsize=256)
def _weights(rate: float, odds_ratio: float) -> tuple[int, int, float]:
    """Integer weights of an error and a correct prediction, and the LLR one unit is."""
    shifted = odds_ratio * rate / (1 - rate + odds_ratio * rate)
    error_step = math.log(shifted / rate)
    correct_step = math.log((1 - rate) / (1 - shifted))
    unit = max(error_step, correct_step) / _WEIGHT
    return max(1, round(error_step / unit)), max(1, round(correct_step / unit)), unit


def markov_arl(rate: float, up: int, down: int, threshold: int) -> float:
    """The exact ARL, from zero, of the integer CUSUM S = max(0, S + up) on an error
    (probability `rate`) and max(0, S - down) otherwise, alarming at S >= threshold."""
    from scipy.linalg import solve_banded

    states = threshold
    bands = np.zeros((up + down + 1, states))  # solve_banded's layout: ab[up + i - j, j]
    bands[up] = 1.0
    rows = np.arange(states)
    climb = rows + up < states
    bands[0, (rows + up)[climb]] -= rate
    falls = np.maximum(rows - down, 0)
    np.add.at(bands, (up + rows - falls, falls), -(1 - rate))
    return float(solve_banded((down, up), bands, np.ones(states))[0])


@functools.lru_cache(maxsize=256)
def concept_threshold(rate: float, up: int, down: int, run_length: int) -> int:
    """The least integer threshold whose ARL at `rate` reaches `run_length`."""
    low, high = 1, max(up, 2)
    while markov_arl(rate, up, down, high) < run_length:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if markov_arl(rate, up, down, middle) < run_length:
            low = middle
        else:
            high = middle
    return high


class ErrorRateDetector:
    """A self-starting Bernoulli CUSUM on 0/1 errors, calibrated to an expected run length."""

    def __init__(
        self, config: ConceptDriftConfig | None = None, state: ConceptDriftState | None = None
    ) -> None:
        if state is None:
            if config is None:
                raise ValueError("Give a config or a saved state.")
            state = ConceptDriftState(config=config, next_estimate=config.warmup)
        self.state = state

    def update(self, errors: np.ndarray | list[int] | list[bool]) -> list[ConceptAlarm]:
        """Feed 0/1 errors in arrival order; the alarms they raised, in order.

        Raises:
            InvalidDataError: a value is neither 0 nor 1.
        """
        values = np.asarray(errors)
        if values.size and not np.isin(values, (0, 1)).all():
            raise InvalidDataError("Errors for the concept-drift detector are 0 or 1 only.")
        values = values.astype(np.int64).ravel()
        alarms: list[ConceptAlarm] = []
        begin = 0
        while begin < values.size:
            begin += self._step(values[begin:], alarms)
        return alarms

    def _step(self, values: np.ndarray, alarms: list[ConceptAlarm]) -> int:
        """Consume `values` up to the next re-estimate or alarm; the number consumed."""
        state = self.state
        part = values[: state.next_estimate - state.count]
        if state.rate is not None:
            increments = np.where(part == 1, state.up, -state.down)
            path = cusum_paths(increments, np.asarray(state.statistic, dtype=np.int64))
            over = np.nonzero(path >= state.threshold)[0]
            if over.size:
                at = int(over[0])
                self._count(part[: at + 1])
                alarms.append(
                    ConceptAlarm(
                        index=state.seen - 1,
                        in_control_rate=state.rate,
                        rate=state.errors / state.count,
                    )
                )
                self._restart()
                return at + 1
            state.statistic = int(path[-1])
        self._count(part)
        if state.count == state.next_estimate:
            self._estimate()
        return len(part)

    def _count(self, part: np.ndarray) -> None:
        self.state.seen += len(part)
        self.state.count += len(part)
        self.state.errors += int(part.sum())

    def _estimate(self) -> None:
        """(Re-)estimate the in-control rate; carry the statistic over in LLR units."""
        state = self.state
        rate = (state.errors + 1) / (state.count + 2)
        rate = float(f"{rate:.3g}")  # a handful of rates, so the calibration cache hits
        up, down, unit = _weights(rate, state.config.odds_ratio)
        if state.rate is not None:
            old_unit = _weights(state.rate, state.config.odds_ratio)[2]
            state.statistic = round(state.statistic * old_unit / unit)
        state.rate, state.up, state.down = rate, up, down
        state.threshold = concept_threshold(rate, up, down, state.config.run_length)
        state.next_estimate = state.count * 2

    def _restart(self) -> None:
        state = self.state
        state.alarms += 1
        state.count = state.errors = state.statistic = 0
        state.rate = None
        state.next_estimate = state.config.warmup

    def to_json(self) -> str:
        return self.state.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> ErrorRateDetector:
        """Resume a detector saved by `to_json`.

        Raises:
            InvalidDataError: the text is not a concept-drift detector's state.
        """
        try:
            state = ConceptDriftState.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            raise InvalidDataError(
                f"Not a concept-drift detector's state: {where}: {first['msg']}."
            ) from None
        return cls(state=state)
