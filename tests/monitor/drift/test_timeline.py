from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from PIL import Image

from forgeml.core.errors import ForgemlError
from forgeml.monitor.drift import (
    PNG_KEY,
    LoggedRequests,
    build_reference,
    drift_over_time,
    latest_windows,
    plot_drift,
)
from tests.monitor.drift.conftest import mixed_frame


def _requests() -> LoggedRequests:
    calm, shifted = mixed_frame(1_600, seed=1), mixed_frame(900, seed=2, shift=1.0)
    frame = pl.concat([calm, shifted])
    return LoggedRequests(frame, None, [1_700_000_000.0 + k for k in range(frame.height)])


def test_consecutive_windows_are_scored_and_the_shift_shows_in_the_last() -> None:
    reference = build_reference(mixed_frame(20_000, seed=0))

    windows = drift_over_time(reference, _requests(), 800, ["x", "color"])

    assert [(w.index, w.rows) for w in windows] == [(0, 800), (800, 800), (1600, 800), (2400, 100)]
    assert [w.start for w in windows] == [1_700_000_000.0 + i for i in (0, 800, 1600, 2400)]
    assert windows[-1].end == 1_700_000_000.0 + 2_499
    assert [w.drifted for w in windows] == [[], [], ["x"], ["x"]]
    for window in windows:
        assert set(window.scores) == {"x", "color"}
    assert windows[0].scores["x"] < 1 < windows[-1].scores["x"]  # type: ignore[operator]


def test_the_latest_windows_are_at_most_as_many_as_asked_and_keep_their_place() -> None:
    reference = build_reference(mixed_frame(5_000, seed=0))
    everything = drift_over_time(reference, _requests(), 400, ["x"])

    latest = latest_windows(reference, _requests(), 400, 2, ["x"])

    # 2500 rows: windows at 0, 400, ..., 2400 (100 rows); the latest two are the last two
    assert [(w.index, w.rows) for w in latest] == [(2000, 400), (2400, 100)]
    assert latest == everything[-2:]
    assert latest_windows(reference, _requests(), 400, 99, ["x"]) == everything


def test_the_plot_is_a_png_that_carries_its_windows(tmp_path: Path) -> None:
    reference = build_reference(mixed_frame(5_000, seed=0))
    windows = drift_over_time(reference, _requests(), 500, ["x", "skewed", "color"])
    path = tmp_path / "plots" / "drift.png"

    plot_drift(windows, path, "drift of x")

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.size == (1000, 500)
        carried = orjson.loads(image.text[PNG_KEY])  # type: ignore[attr-defined]
    assert carried == [w.model_dump(mode="json") for w in windows]
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_a_plot_that_cannot_be_written_is_one_sentence_and_leaves_nothing(tmp_path: Path) -> None:
    reference = build_reference(mixed_frame(2_000, seed=0))
    windows = drift_over_time(reference, _requests(), 1_000, ["x"])
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    with pytest.raises(ForgemlError, match=r"^Cannot write the plot to .*; name a file in a"):
        plot_drift(windows, blocker / "drift.png", "drift")

    assert list(tmp_path.iterdir()) == [blocker]
