"""Assign rows to train / validation / test: `forgeml data split REF --ratios 0.8,0.1,0.1`.

Rows are split by GROUP, never one by one, so nothing leaks between splits:
- without `--group`, identical records (all user columns equal) form one group, so a
  duplicated row can never be in train and in test at once;
- with `--group COL`, all rows sharing a value of COL (nulls included) form one group.

Assignment does not depend on polars' hash values (they change between polars versions):
groups are numbered in order of first appearance, shuffled by a seeded numpy permutation and
walked in that order, each group going to the split its cumulative row midpoint falls in, so
`--ratios` apply to ROWS with an error of about one group. With `--stratify COL` the walk runs
separately inside each class (a group's class is its most frequent one), so every split keeps
the class proportions of the whole. Hashing is only used to find equal rows, and every
collision is checked against the rows themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import (
    AUGMENTED_COLUMN,
    SPLIT_COLUMN,
    SPLIT_NAMES,
    TransformOutput,
    require_columns,
    user_columns,
)

# Past this many classes a per-split balance table is noise, and a large report.
_MAX_REPORTED_CLASSES = 100


class SplitParams(BaseModel):
    """Parameters of `forgeml data split`."""

    model_config = ConfigDict(extra="forbid")

    ratios: list[float] = Field(
        default_factory=lambda: [0.8, 0.1, 0.1],
        description="Row shares of train,test or train,validation,test; positive, summing to 1.",
    )
    stratify: str | None = Field(
        default=None, description="Column whose class proportions every split keeps."
    )
    group: str | None = Field(
        default=None, description="Column whose rows with one value always share a split."
    )
    seed: int = Field(default=0, ge=0, description="Seed of the shuffle; same seed, same split.")

    @field_validator("ratios", mode="before")
    @classmethod
    def _parse_ratio_text(cls, value: Any) -> Any:
        # The CLI hands over "0.8,0.1,0.1"; YAML recipes a list.
        if isinstance(value, str):
            return [part.strip() for part in value.split(",")]
        return value

    @field_validator("ratios")
    @classmethod
    def _check_ratios(cls, value: list[float]) -> list[float]:
        if len(value) not in (2, 3):
            raise ValueError(
                f"give 2 ratios (train,test) or 3 (train,validation,test), not {len(value)}"
            )
        if any(not ratio > 0 for ratio in value):
            raise ValueError(f"every ratio must be above 0, got {value}")
        if abs(sum(value) - 1.0) > 1e-6:
            raise ValueError(f"ratios must sum to 1, but {value} sums to {sum(value):.6g}")
        return value

    def split_names(self) -> tuple[str, ...]:
        """The split names in order: train,test or train,validation,test."""
        return SPLIT_NAMES if len(self.ratios) == 3 else (SPLIT_NAMES[0], SPLIT_NAMES[2])


def _exact_ids(keys: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Like `_first_appearance_ids`, without hashing: slower, used after a hash collision."""
    ranks = keys.select(pl.struct(keys.columns).rank("dense")).to_series().to_numpy()
    _, first_rows, inverse = np.unique(ranks, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first_rows, kind="stable")
    renumber = np.empty_like(by_appearance)
    renumber[by_appearance] = np.arange(by_appearance.size)
    return renumber[inverse.reshape(-1)], first_rows[by_appearance]


def _rows_equal(keys: pl.DataFrame, rows: np.ndarray, others: np.ndarray) -> bool:
    left, right = keys[rows], keys[others]
    return all(bool(left[name].eq_missing(right[name]).all()) for name in keys.columns)


def _first_appearance_ids(keys: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct rows of `keys` in order of first appearance.

    Returns:
        Each row's id, and the index of the first row of each id.
    """
    hashes = keys.hash_rows(seed=0)
    is_first = hashes.is_first_distinct()
    first_rows = np.flatnonzero(is_first.to_numpy())
    ids = np.cumsum(is_first.to_numpy()) - 1
    repeats = np.flatnonzero(~is_first.to_numpy())
    if repeats.size == 0:
        return ids, first_rows
    # Hash values only find candidate equal rows (and numbering never depends on them).
    firsts = hashes.filter(is_first).alias("hash").to_frame().with_row_index("id")
    found = (
        hashes.gather(repeats)
        .alias("hash")
        .to_frame()
        .join(firsts, on="hash", how="left", maintain_order="left")
        .get_column("id")
        .to_numpy()
        .astype(np.int64)
    )
    if not _rows_equal(keys, repeats, first_rows[found]):
        return _exact_ids(keys)  # a real collision: about 1 in 10^8 for a million rows
    ids[repeats] = found
    return ids, first_rows


def _group_classes(group_ids: np.ndarray, class_ids: np.ndarray) -> np.ndarray:
    """Each group's most frequent class; ties go to the class seen first in the data."""
    n_classes = int(class_ids.max()) + 1
    pairs, counts = np.unique(group_ids * n_classes + class_ids, return_counts=True)
    pair_groups = pairs // n_classes
    # By group, then count descending; the stable sort keeps ties in class order.
    order = np.lexsort((-counts, pair_groups))
    is_first = np.r_[True, pair_groups[order][1:] != pair_groups[order][:-1]]
    return (pairs[order] % n_classes)[is_first]


@dataclass(frozen=True)
class _Classes:
    row_ids: np.ndarray  # class id of each row
    group_classes: np.ndarray  # class id of each group
    labels: list[str]  # class value of each id, as text for the report


def _classes(data: pl.DataFrame, params: SplitParams, group_ids: np.ndarray) -> _Classes:
    column = str(params.stratify)
    row_ids, first_rows = _first_appearance_ids(data.select(column))
    values = data.get_column(column).gather(first_rows).to_list()
    labels = ["null" if value is None else str(value) for value in values]
    if params.group is None:
        # Groups are identical records, so every row of a group has the same class.
        group_classes = np.empty(int(group_ids.max()) + 1, dtype=np.int64)
        group_classes[group_ids] = row_ids
    else:
        group_classes = _group_classes(group_ids, row_ids)
    return _Classes(row_ids, group_classes, labels)


def _assign_groups(
    sizes: np.ndarray, strata: np.ndarray, ratios: list[float], seed: int
) -> np.ndarray:
    """The split index of each group: shuffled, then cut at the ratios inside each stratum."""
    order = np.random.default_rng(seed).permutation(sizes.size)
    if strata.any():
        # Strata together, still shuffled inside each; small unsigned keys get a radix sort.
        key_type = np.uint16 if strata.max() < 2**16 else np.int64
        order = order[np.argsort(strata[order].astype(key_type), kind="stable")]
    sorted_sizes, sorted_strata = sizes[order], strata[order]
    starts = np.cumsum(sorted_sizes) - sorted_sizes
    stratum_totals = np.bincount(sorted_strata, weights=sorted_sizes)
    # Rows of all earlier strata, so that each stratum's walk starts at zero.
    stratum_offsets = np.concatenate(([0.0], np.cumsum(stratum_totals)[:-1]))
    within = starts - stratum_offsets[sorted_strata] + sorted_sizes / 2
    midpoints = within / stratum_totals[sorted_strata]
    assignment = np.empty(sizes.size, dtype=np.int64)
    assignment[order] = np.searchsorted(np.cumsum(ratios)[:-1], midpoints, side="right")
    return assignment


def _check_input(frame: pl.DataFrame, params: SplitParams) -> None:
    if frame.height == 0:
        raise InvalidDataError("cannot split an empty dataset: it has no rows.")
    if not user_columns(frame):
        raise InvalidDataError("cannot split a dataset that has only reserved columns.")
    if AUGMENTED_COLUMN in frame.columns and frame.get_column(AUGMENTED_COLUMN).any():
        raise InvalidDataError(
            "split before augmenting: this version has augmented rows, which must stay in "
            "train; split the version it was augmented from, then augment the train split."
        )
    named = [name for name in (params.stratify, params.group) if name is not None]
    require_columns(frame, named, "split")


def _class_report(
    split_rows: np.ndarray, classes: _Classes, names: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    n_classes = len(classes.labels)
    flat = np.bincount(split_rows * n_classes + classes.row_ids, minlength=len(names) * n_classes)
    table = flat.reshape(len(names), n_classes)
    balance: dict[str, dict[str, float]] = {}
    for title, counts in [("all", table.sum(axis=0)), *zip(names, table, strict=True)]:
        total = int(counts.sum())
        balance[title] = {
            label: round(int(n) / total, 4) if total else 0.0
            for label, n in zip(classes.labels, counts, strict=True)
        }
    return balance


def _stratify_report(
    split_rows: np.ndarray, classes: _Classes, column: str, names: tuple[str, ...]
) -> tuple[dict[str, dict[str, float]] | None, list[str]]:
    """The class balance (row share of each class per split) and warnings about classes."""
    balance, warnings = None, []
    n_classes = len(classes.labels)
    if n_classes <= _MAX_REPORTED_CLASSES:
        balance = _class_report(split_rows, classes, names)
    else:
        warnings.append(
            f"'{column}' has {n_classes} classes, too many to report their balance; "
            "stratify on a column with few distinct values."
        )
    groups_per_class = np.bincount(classes.group_classes, minlength=n_classes)
    small = [(classes.labels[i], int(n)) for i, n in enumerate(groups_per_class) if n < len(names)]
    if small:
        examples = ", ".join(f"'{label}' ({n})" for label, n in small[:5])
        warnings.append(
            f"{len(small)} class(es) of '{column}' have fewer groups than the {len(names)} "
            f"splits, so some splits get none of their rows: {examples}."
        )
    return balance, warnings


def _per_split(names: tuple[str, ...], split_indices: np.ndarray) -> dict[str, int]:
    counts = np.bincount(split_indices, minlength=len(names)).tolist()
    return dict(zip(names, counts, strict=True))


def apply(frame: pl.DataFrame, params: SplitParams) -> TransformOutput:
    """Add the `__split__` column, keeping groups and identical records in one split.

    Args:
        frame: the rows of a dataset version (an existing `__split__` is replaced).
        params: ratios, optional stratify and group columns, and the seed.

    Returns:
        The frame with `__split__` (String, a name from `params.split_names()`) as its last
        column, rows ordered train, validation, test and in their original order inside each;
        and a report with rows and groups per split, class balance per split when
        stratified, whether an earlier split was replaced, and warnings.

    Raises:
        InvalidDataError: the frame is empty, or has augmented rows.
        MissingColumnError: the stratify or group column does not exist.
    """
    _check_input(frame, params)
    names = params.split_names()
    resplit = SPLIT_COLUMN in frame.columns
    data = frame.drop(SPLIT_COLUMN) if resplit else frame
    group_keys = [params.group] if params.group is not None else user_columns(data)
    group_ids, first_rows = _first_appearance_ids(data.select(group_keys))
    classes = None
    if params.stratify is not None:
        classes = _classes(data, params, group_ids)
    strata = (
        classes.group_classes if classes is not None else np.zeros(first_rows.size, dtype=np.int64)
    )
    group_splits = _assign_groups(np.bincount(group_ids), strata, params.ratios, params.seed)
    split_rows = group_splits[group_ids]
    order = np.argsort(split_rows.astype(np.uint8), kind="stable")  # radix sort: O(rows)
    split_column = pl.Series(SPLIT_COLUMN, names, dtype=pl.String).gather(split_rows[order])
    warnings = (
        [f"the input already had '{SPLIT_COLUMN}'; this split replaces it."] if resplit else []
    )
    report: dict[str, Any] = {
        "ratios": dict(zip(names, params.ratios, strict=True)),
        "seed": params.seed,
        "group_by": params.group if params.group is not None else "identical records",
        "stratify": params.stratify,
        "rows": _per_split(names, split_rows),
        "groups": _per_split(names, group_splits),
        "resplit": resplit,
    }
    if classes is not None:
        balance, class_warnings = _stratify_report(split_rows, classes, str(params.stratify), names)
        report["class_balance"] = balance
        warnings += class_warnings
    report["warnings"] = warnings
    return TransformOutput(frame=data[order].with_columns(split_column), report=report)
