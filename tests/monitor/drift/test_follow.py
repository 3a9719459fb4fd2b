"""The online detector run live over request logs the real writer wrote: every row fed
exactly once across restarts, half-written lines and replaced logs, one detector per
version, calibrated once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.monitor.drift import (
    OnlineDriftConfig,
    OnlineDriftDetector,
    OnlineWatch,
    ReferenceProfile,
    build_reference,
    read_log,
)
from forgeml.monitor.drift import _online as online_module
from forgeml.serve.request_log import RequestLog
from tests.monitor.drift.conftest import mixed_frame

CONFIG = OnlineDriftConfig(run_length=500, calibration_runs=100)
CHUNK = 25  # rows per logged request


@pytest.fixture(scope="module")
def profile() -> ReferenceProfile:
    return build_reference(mixed_frame(5000, seed=0))


def _log(path: Path, frame: pl.DataFrame, version: str = "m@v1", model: str = "m") -> None:
    """Append `frame` to the request log at `path` as the model server does."""
    log = RequestLog(path, 1.0, [], seed=0)
    for start in range(0, frame.height, CHUNK):
        rows = frame.slice(start, CHUNK).to_dicts()
        log.record(model, version, "v2", rows, [0] * len(rows))
    log.close()


def _watch(home: Path, profile: ReferenceProfile, **kwargs: object) -> OnlineWatch:
    return OnlineWatch(home, kwargs.pop("config", CONFIG), lambda _: profile, **kwargs)  # type: ignore[arg-type]


def _whole(profile: ReferenceProfile, log: Path, model: str = "m") -> OnlineDriftDetector:
    """One detector fed the whole log at once, as `forgeml monitor online` replays it."""
    detector = OnlineDriftDetector.from_profile(profile, CONFIG)
    detector.update(read_log(log, model).rows)
    detector.to_json()
    return detector


def test_rows_are_fed_once_across_restarts_and_half_written_lines(
    tmp_path: Path, profile: ReferenceProfile
) -> None:
    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(1000, seed=1))
    first = _watch(tmp_path, profile).follow("m", log)["m@v1"]
    assert first.rows == 1000 and first.detector is not None

    _log(log, mixed_frame(1500, seed=2, shift=0.6))
    complete = log.read_bytes()
    cut = complete.rindex(b"\n", 0, len(complete) - 1) + 40  # the last line half-written
    log.write_bytes(complete[:cut])
    partial = _watch(tmp_path, profile).follow("m", log)["m@v1"]  # a restarted server
    assert partial.rows == 2500 - CHUNK
    log.write_bytes(complete)  # the writer finishes its line
    resumed = _watch(tmp_path, profile).follow("m", log)["m@v1"]
    again = _watch(tmp_path, profile).follow("m", log)["m@v1"]  # nothing new: nothing fed

    whole = _whole(profile, log)
    assert resumed.rows == again.rows == 2500 == whole.state.rows
    assert resumed.detector is not None and resumed.detector.rows == whole.state.rows
    assert resumed.detector.upper == pytest.approx(whole.state.upper)
    assert resumed.detector.lower == pytest.approx(whole.state.lower)
    assert sum(resumed.alarms.values()) == whole.state.alarms > 0
    assert max(resumed.alarms, key=lambda feature: resumed.alarms[feature]) == "x"
    assert resumed.last_alarm is not None
    assert resumed.last_alarm.row >= 1000 and resumed.last_alarm.time is not None


def test_small_reads_catch_up_to_the_same_state(tmp_path: Path, profile: ReferenceProfile) -> None:
    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(2000, seed=3, shift=0.5))
    watch = _watch(tmp_path, profile, max_read_bytes=10_000)
    reads = 0
    while (watched := watch.follow("m", log)["m@v1"]).rows < 2000:
        reads += 1
        assert reads < 1000

    whole = _whole(profile, log)
    assert reads > 5 and watched.rows == 2000
    assert watched.detector is not None and watched.detector.upper == pytest.approx(
        whole.state.upper
    )


def test_each_version_has_its_own_detector_and_other_models_are_ignored(
    tmp_path: Path, profile: ReferenceProfile
) -> None:
    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(600, seed=4), version="m@v1")
    _log(log, mixed_frame(400, seed=5), version="other@v7", model="other")
    _log(log, mixed_frame(300, seed=6), version="m@v2")
    _log(log, mixed_frame(100, seed=7), version="m@v1")

    versions = _watch(tmp_path, profile).follow("m", log)

    assert {name: v.rows for name, v in versions.items()} == {"m@v1": 700, "m@v2": 300}
    second = versions["m@v2"].detector
    assert second is not None and second.rows == 300  # a fresh detector for the new version


def test_a_replaced_log_is_read_from_its_start(tmp_path: Path, profile: ReferenceProfile) -> None:
    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(500, seed=8))
    watch = _watch(tmp_path, profile)
    watch.follow("m", log)
    log.rename(tmp_path / "m.jsonl.1")  # rotated: a new file in its place
    _log(log, mixed_frame(200, seed=9))

    assert watch.follow("m", log)["m@v1"].rows == 700


def test_a_version_without_a_reference_is_counted_not_fed_and_asked_once(tmp_path: Path) -> None:
    asked: list[str] = []

    def reference(version: str) -> ReferenceProfile:
        asked.append(version)
        raise ConfigError(f"{version} records no dataset version.")

    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(100, seed=1))
    watch = OnlineWatch(tmp_path, CONFIG, reference)
    watch.follow("m", log)
    _log(log, mixed_frame(100, seed=2))
    watched = watch.follow("m", log)["m@v1"]

    assert asked == ["m@v1"]
    assert (watched.rows, watched.skipped, watched.detector) == (0, 200, None)
    assert watched.unwatched == "m@v1 records no dataset version."


def test_the_calibration_is_simulated_once_per_reference_and_config(
    tmp_path: Path, profile: ReferenceProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = online_module.calibrate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(online_module, "calibrate", counted)
    for served in ("a", "b"):  # two served names of one version, two "restarts"
        log = tmp_path / f"{served}.jsonl"
        _log(log, mixed_frame(100, seed=1), model=served)
        _watch(tmp_path, profile).follow(served, log)
    assert len(calls) == 1

    # a new run length starts the detector again (calibrated anew); the counts go on
    _log(log, mixed_frame(100, seed=2), model="b")
    longer = OnlineDriftConfig(run_length=2000, calibration_runs=100)
    watched = _watch(tmp_path, profile, config=longer).follow("b", log)["m@v1"]
    assert len(calls) == 2
    assert watched.rows == 200 and watched.detector is not None
    assert (watched.detector.config, watched.detector.rows) == (longer, 100)


def test_a_damaged_state_is_one_sentence(tmp_path: Path, profile: ReferenceProfile) -> None:
    watch = _watch(tmp_path, profile)
    watch.state_path("m").parent.mkdir(parents=True)
    watch.state_path("m").write_text('{"offset": "far"}')
    log = tmp_path / "m.jsonl"
    _log(log, mixed_frame(10, seed=1))

    with pytest.raises(InvalidDataError, match=r"^\S+m\.json is not an online drift watch's") as e:
        watch.follow("m", log)
    assert str(e.value).count(". ") == 0 and "\n" not in str(e.value)


def test_unreadable_values_count_as_the_centre(tmp_path: Path, profile: ReferenceProfile) -> None:
    frame = mixed_frame(50, seed=1).with_columns(
        pl.when(pl.int_range(50) % 2 == 0)
        .then(pl.lit("[REDACTED]"))
        .otherwise(pl.col("x").cast(str))
        .alias("x")
    )
    log = tmp_path / "m.jsonl"
    _log(log, frame)
    watched = _watch(tmp_path, profile).follow("m", log)["m@v1"]
    assert watched.rows == 50 and np.isfinite(watched.detector.upper).all()  # type: ignore[union-attr]
