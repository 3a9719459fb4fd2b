"""SMOTE oversampling of the classes of a label column, among train rows only.

"SMOTE: Synthetic Minority Over-sampling Technique" (Chawla et al., JAIR 2002), with the
SMOTE-NC distance of its section 6.1 for mixed data. For each row to make: pick a base
row of the class uniformly, one of its `k_neighbors` nearest rows of the same class
uniformly, and a gap g uniform in [0, 1); then

- numeric (integer or float) columns: `base + g * (neighbour - base)`; integer columns
  are rounded to the nearest integer and keep their type;
- every other column (strings, booleans, dates ...): copied from the nearer parent, the
  base when g < 0.5 and the neighbour otherwise, so a synthetic row never mixes
  categories of two rows;
- a numeric value missing (null or NaN) in either parent: copied from the nearer parent.

Distance: numeric columns are standardised over the train rows (a missing value counts
as the mean, i.e. 0), and each categorical column on which two rows differ adds the
squared median of the class's numeric standard deviations (1 when that median is 0 or
there are no numeric columns). Neighbours are found by chunked brute force in numpy.
Rows with a null label are neither counted nor used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import require_columns, user_columns

if TYPE_CHECKING:
    from forgeml.data.augment import TabularAugmentParams

# distance entries computed at once per chunk: bounds memory at ~32 MB of float64
_CHUNK_CELLS = 4_000_000


def oversample(
    sources: pl.DataFrame, params: TabularAugmentParams, rng: np.random.Generator
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Make synthetic rows so each class reaches its target count.

    Args:
        sources: the train rows; only they are bases and neighbours.
        params: the tabular section of the recipe.
        rng: the section's generator.

    Returns:
        The new rows (class by class in sorted class order) and the section's report,
        with rows before / added / after per class.

    Raises:
        MissingColumnError: the label column is not in the data.
        InvalidDataError: the label has fewer than two classes, the target names an
            unknown class, or a class to oversample has no more rows than k_neighbors.
    """
    label = params.label
    require_columns(sources, [label], "the tabular section of the recipe")
    classes = sources[label].drop_nulls().unique().sort()
    _check_classes(classes, label)
    members = {value: _rows_of(sources[label], value) for value in classes.to_list()}
    counts = {value: len(rows) for value, rows in members.items()}
    added = _rows_to_add(counts, params.target, label)
    _check_class_sizes(counts, added, params.k_neighbors, label)
    numeric, categorical = _feature_columns(sources, label)
    features = _Features.build(sources, numeric, categorical)
    parts = [
        _synthesise(sources, members[value], added[value], features, params.k_neighbors, rng)
        for value in members
        if added[value] > 0
    ]
    rows = pl.concat(parts, how="vertical") if parts else sources.clear()
    report = {
        "label": label,
        "strategy": params.strategy,
        "k_neighbors": params.k_neighbors,
        "rows_added": rows.height,
        "null_label_rows_skipped": int(sources[label].null_count()),
        "numeric_columns": numeric,
        "categorical_columns": categorical,
        "per_class": {
            str(value): {
                "before": counts[value],
                "added": added[value],
                "after": counts[value] + added[value],
            }
            for value in members
        },
    }
    return rows, report


class _Features:
    """The distance space: standardised numerics and integer codes of the other columns."""

    def __init__(self, numeric: list[str], standard: np.ndarray, codes: np.ndarray) -> None:
        self.numeric = numeric
        self.standard = standard
        self.codes = codes

    @classmethod
    def build(cls, frame: pl.DataFrame, numeric: list[str], categorical: list[str]) -> _Features:
        values = _as_float(frame, numeric)
        mean, std = _mean_and_std(frame, numeric)
        std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
        standard = np.nan_to_num((values - np.nan_to_num(mean)) / std, nan=0.0)
        # a stable hash gives each distinct value (null included) one code, whatever its type
        codes = np.column_stack(
            [
                np.unique(frame[name].hash(seed=0).to_numpy(), return_inverse=True)[1]
                for name in categorical
            ]
            or [np.zeros((frame.height, 0), dtype=np.int64)]
        )
        return cls(numeric, standard, codes.reshape(frame.height, len(categorical)))


def _synthesise(
    sources: pl.DataFrame,
    rows: np.ndarray,
    count: int,
    features: _Features,
    k: int,
    rng: np.random.Generator,
) -> pl.DataFrame:
    base = rng.integers(len(rows), size=count)
    choice = rng.integers(k, size=count)
    gap = rng.random(count)
    needed = np.unique(base)
    neighbours = np.empty((len(rows), k), dtype=np.int64)
    neighbours[needed] = _nearest(features.standard[rows], features.codes[rows], needed, k)
    partner = neighbours[base, choice]
    nearer = np.where(gap < 0.5, base, partner)
    out = sources[rows[nearer]]
    base_values = _as_float(sources[rows[base]], features.numeric)
    partner_values = _as_float(sources[rows[partner]], features.numeric)
    mixed = base_values + gap[:, None] * (partner_values - base_values)
    updates = []
    for position, name in enumerate(features.numeric):
        dtype = sources.schema[name]
        column = mixed[:, position]
        missing = pl.Series(np.isnan(column))
        filled = np.rint(column) if dtype.is_integer() else column
        new = pl.Series(name, np.nan_to_num(filled)).cast(dtype)
        updates.append(pl.when(missing).then(pl.col(name)).otherwise(new).alias(name))
    return out.with_columns(updates) if updates else out


def _nearest(standard: np.ndarray, codes: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The k nearest other rows (indices into the class) of each query row, nearest first."""
    count = len(standard)
    spread = np.median(standard.std(axis=0)) if standard.shape[1] else 1.0
    penalty = float(spread) ** 2 if spread > 0 else 1.0
    squares = (standard**2).sum(axis=1)
    chunk = max(1, _CHUNK_CELLS // max(count, 1))
    found = []
    for start in range(0, len(queries), chunk):
        block = queries[start : start + chunk]
        # |a|^2 is the same along a row, so it is left out: the ranking does not change
        distance = squares[None, :] - 2.0 * (standard[block] @ standard.T)
        if codes.shape[1]:
            # count mismatches in small integers, then scale once (a float op per column is slow)
            mismatches = np.zeros(distance.shape, dtype=np.int16)
            for column in range(codes.shape[1]):
                mismatches += codes[block, column, None] != codes[None, :, column]
            distance += penalty * mismatches
        distance[np.arange(len(block)), block] = np.inf
        nearest = np.argpartition(distance, k - 1, axis=1)[:, :k]
        # order the k by (distance, index): which of them is drawn must not hang on partition order
        picked = np.take_along_axis(distance, nearest, axis=1)
        order = np.lexsort((nearest, picked), axis=1)
        found.append(np.take_along_axis(nearest, order, axis=1))
    return np.concatenate(found) if found else np.empty((0, k), dtype=np.int64)


def _feature_columns(frame: pl.DataFrame, label: str) -> tuple[list[str], list[str]]:
    names = [name for name in user_columns(frame) if name != label]
    numeric = [n for n in names if frame.schema[n].is_integer() or frame.schema[n].is_float()]
    return numeric, [name for name in names if name not in numeric]


def _mean_and_std(frame: pl.DataFrame, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    if not names:
        return np.zeros(0), np.ones(0)
    # polars skips missing values without numpy's all-NaN warnings; a None result is NaN
    floats = [pl.col(name).cast(pl.Float64).fill_nan(None) for name in names]
    mean = frame.select(value.mean() for value in floats).row(0)
    std = frame.select(value.std(ddof=0) for value in floats).row(0)
    return np.array(mean, dtype=np.float64), np.array(std, dtype=np.float64)


def _as_float(frame: pl.DataFrame, names: list[str]) -> np.ndarray:
    if not names:
        return np.zeros((frame.height, 0))
    floats = frame.select(pl.col(name).cast(pl.Float64).fill_null(float("nan")) for name in names)
    return floats.to_numpy().reshape(frame.height, len(names))


def _rows_of(labels: pl.Series, value: Any) -> np.ndarray:
    return np.flatnonzero((labels == value).fill_null(False).to_numpy())


def _check_classes(classes: pl.Series, label: str) -> None:
    if classes.len() < 2:
        found = f"a single class ({classes[0]!r})" if classes.len() else "no values"
        raise InvalidDataError(
            f"label '{label}' has {found} among the train rows; "
            "oversampling needs at least two classes."
        )


def _rows_to_add(
    counts: dict[Any, int], target: str | dict[str, int], label: str
) -> dict[Any, int]:
    if not isinstance(target, dict):  # "balance", the only other value the model allows
        most = max(counts.values())
        return {value: most - count for value, count in counts.items()}
    by_name = {str(value): value for value in counts}
    for name in target:
        if name not in by_name:
            known = ", ".join(by_name)
            raise InvalidDataError(
                f"the tabular target names class '{name}', which label '{label}' does not have "
                f"among the train rows (classes: {known})."
            )
    wanted = {by_name[name]: count for name, count in target.items()}
    return {value: max(0, wanted.get(value, 0) - count) for value, count in counts.items()}


def _check_class_sizes(counts: dict[Any, int], added: dict[Any, int], k: int, label: str) -> None:
    for value, count in counts.items():
        if added[value] > 0 and count <= k:
            raise InvalidDataError(
                f"class {value!r} of label '{label}' has {count} train rows, too few for "
                f"k_neighbors={k} (it needs at least {k + 1}); lower k_neighbors."
            )
