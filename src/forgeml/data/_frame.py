"""Reserved columns and the shape every transform returns.

A dataset version is one Parquet file. Two reserved columns may appear in it:
`__split__` (train / validation / test, written by `data split`) and `__augmented__`
(true for rows made by `data augment`). Transforms keep them unless they own them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

SPLIT_COLUMN = "__split__"
AUGMENTED_COLUMN = "__augmented__"
RESERVED_COLUMNS = (SPLIT_COLUMN, AUGMENTED_COLUMN)
SPLIT_NAMES = ("train", "validation", "test")


@dataclass
class TransformOutput:
    """What a transform hands back to the version store.

    Attributes:
        frame: the rows of the new version.
        report: a JSON-serialisable summary shown to the user and kept with the version.
        side_frames: extra versions to record (e.g. `{"quarantine": rows_that_failed}`),
            each stored as its own dataset `<name>-<key>` with the same lineage.
        artifacts: named JSON-serialisable documents to store next to the version
            (e.g. `{"feature_spec": {...}}`).
    """

    frame: pl.DataFrame
    report: dict[str, Any] = field(default_factory=dict)
    side_frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)


def user_columns(frame: pl.DataFrame | pl.LazyFrame) -> list[str]:
    """The columns that hold user data, reserved ones left out."""
    names = frame.collect_schema().names() if isinstance(frame, pl.LazyFrame) else frame.columns
    return [name for name in names if name not in RESERVED_COLUMNS]


def require_columns(frame: pl.DataFrame, columns: list[str], what: str) -> None:
    """Raise `MissingColumnError` naming the first column of `columns` the frame lacks."""
    from forgeml.core.errors import MissingColumnError

    for column in columns:
        if column not in frame.columns:
            available = ", ".join(user_columns(frame))
            raise MissingColumnError(
                f"{what} names column '{column}', which the data does not have "
                f"(columns: {available})."
            )
