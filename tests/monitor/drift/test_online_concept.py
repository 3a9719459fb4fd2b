"""The concept-drift detector: a Bernoulli CUSUM on prediction errors."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from forgeml.core.errors import InvalidDataError
from forgeml.monitor.drift import ConceptDriftConfig, ErrorRateDetector, markov_arl
from forgeml.monitor.drift._concept import _weights, concept_threshold
from forgeml.monitor.drift._cusum import cusum_paths


def _errors(rate: float, count: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(count) < rate).astype(np.int64)


def test_the_markov_chain_arl_equals_a_simulation_of_the_same_cusum() -> None:
    up, down, _ = _weights(0.1, 2.0)
    threshold = concept_threshold(0.1, up, down, 300)
    rng = np.random.default_rng(0)
    steps = np.where(rng.random((2000, 2000)) < 0.1, up, -down)  # (time, run)

    paths = cusum_paths(steps, np.zeros(2000, dtype=np.int64))
    crossed = paths >= threshold
    lengths = np.where(crossed.any(axis=0), crossed.argmax(axis=0) + 1, 2000)

    assert markov_arl(0.1, up, down, threshold) >= 300 > markov_arl(0.1, up, down, threshold - 1)
    assert lengths.mean() == pytest.approx(markov_arl(0.1, up, down, threshold), rel=0.06)


def test_false_alarms_come_at_the_run_length_set_with_an_estimated_rate() -> None:
    config = ConceptDriftConfig(run_length=1000, warmup=1000)
    detector = ErrorRateDetector(config)
    count = 300_000

    alarms = detector.update(_errors(0.1, count, seed=1))

    watched = count - len(alarms) * config.warmup  # no alarm while warming up
    assert 0.75 * 1000 <= watched / len(alarms) <= 1.25 * 1000


def test_a_rise_in_the_error_rate_is_caught_and_nothing_before_it() -> None:
    detector = ErrorRateDetector(ConceptDriftConfig(run_length=20_000, warmup=1000))
    stream = np.concatenate([_errors(0.1, 8000, seed=2), _errors(0.25, 2000, seed=3)])

    alarms = detector.update(stream)

    assert len(alarms) == 1
    assert 8000 <= alarms[0].index < 8400
    assert alarms[0].in_control_rate == pytest.approx(0.1, abs=0.02)


def test_the_state_round_trips_through_json_mid_stream() -> None:
    config = ConceptDriftConfig(run_length=500, warmup=200)
    stream = np.concatenate([_errors(0.1, 5000, seed=4), _errors(0.3, 3000, seed=5)])
    whole = ErrorRateDetector(config)
    first = ErrorRateDetector(config)

    expected = whole.update(stream)
    alarms = first.update(stream[:4321])
    resumed = ErrorRateDetector.from_json(first.to_json())
    alarms += resumed.update(stream[4321:])

    assert len(expected) >= 2
    assert alarms == expected
    assert resumed.to_json() == whole.to_json()


def test_one_error_at_a_time_equals_a_batch() -> None:
    config = ConceptDriftConfig(run_length=300, warmup=100)
    stream = np.concatenate([_errors(0.2, 3000, seed=6), _errors(0.5, 1000, seed=7)])
    batch, single = ErrorRateDetector(config), ErrorRateDetector(config)

    expected = batch.update(stream)
    found = [alarm for value in stream for alarm in single.update([int(value)])]

    assert found == expected
    assert len(found) >= 2


def test_bad_errors_and_configs_are_refused() -> None:
    detector = ErrorRateDetector(ConceptDriftConfig(run_length=100))

    with pytest.raises(InvalidDataError, match="0 or 1 only"):
        detector.update([0, 1, 2])
    with pytest.raises(InvalidDataError, match="Not a concept-drift detector's state: config"):
        ErrorRateDetector.from_json("{}")
    with pytest.raises(ValidationError, match="greater than 1"):
        ConceptDriftConfig(run_length=100, odds_ratio=1.0)
    with pytest.raises(ValidationError, match="greater than or equal to 30"):
        ConceptDriftConfig(run_length=100, warmup=5)
