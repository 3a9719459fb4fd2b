from __future__ import annotations

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
