from __future__ import annotations

import functools

import numpy as np
import polars as pl

CATEGORIES = ["a", "b", "c", "d"]
MIX = [0.4, 0.3, 0.2, 0.1]


def mixed_frame(
    rows: int,
    seed: int,
    shift: float = 0.0,
    mix: list[float] | None = None,
) -> pl.DataFrame:
    """Numeric (normal, skewed, small integers) and categorical columns; `shift` moves `x`."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "x": rng.normal(shift, 1.0, rows),
            "skewed": rng.lognormal(0.0, 1.0, rows),
            "count": rng.poisson(3, rows),
            "color": rng.choice(CATEGORIES, rows, p=mix or MIX),
            "flag": rng.random(rows) < 0.3,
        }
    )


@functools.cache
def adult_frame() -> pl.DataFrame:
    """Adult's training file as typed columns without the label, rows in a seeded order."""
    from tests.conftest import SHARED_DATA

    frame = pl.read_csv(SHARED_DATA / "adult" / "adult.data", infer_schema=False)
    frame = frame.rename({name: name.strip() for name in frame.columns})
    frame = frame.with_columns(pl.all().str.strip_chars().replace("?", None))
    numbers = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    frame = frame.with_columns(pl.col(numbers).cast(pl.Int64)).drop("Y")
    return frame.sample(fraction=1.0, shuffle=True, seed=0)
