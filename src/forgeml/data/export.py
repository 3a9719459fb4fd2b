"""Write a version's rows out as CSV, Parquet or JSONL (atomically)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from forgeml.core.errors import UsageError

FORMATS = ("csv", "parquet", "jsonl")


def check_format(path: Path, file_format: str | None = None) -> str:
    """The format to write `path` in: `file_format`, else its extension, else parquet.

    Raises:
        UsageError: neither names one of `FORMATS`.
    """
    chosen = file_format or path.suffix.lstrip(".").lower() or "parquet"
    if chosen == "ndjson":
        chosen = "jsonl"
    if chosen not in FORMATS:
        raise UsageError(
            f"Cannot export to '{path.name}': choose a format of {', '.join(FORMATS)} "
            "(--format or the file extension)."
        )
    return chosen


def export_frame(frame: pl.DataFrame, path: Path, file_format: str | None = None) -> str:
    """Write `frame` to `path`; the format defaults to the file extension.

    Returns:
        The format written.
    """
    chosen = check_format(path, file_format)
    binary = [name for name, dtype in frame.schema.items() if dtype == pl.Binary]
    if chosen == "csv" and binary:
        raise UsageError(f"Cannot export binary column(s) {', '.join(binary)} to CSV; use parquet.")
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.part")
    try:
        if chosen == "csv":
            frame.write_csv(temp)
        elif chosen == "jsonl":
            frame.write_ndjson(temp)
        else:
            frame.write_parquet(temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return chosen
