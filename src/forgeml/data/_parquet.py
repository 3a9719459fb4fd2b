"""The one way a dataset version is written to Parquet.

A version's digest is the sha256 of its Parquet bytes, so the writer must turn the same
rows into the same bytes whatever path produced them: fixed row-group size, fixed
compression, normalised Arrow types and no producer metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import polars as pl

ROW_GROUP_ROWS = 131_072
_COMPRESSION = "zstd"
_COMPRESSION_LEVEL = 1


def canonical_type(data_type: pa.DataType) -> pa.DataType:
    """Map equivalent Arrow types (string / large_string / string_view ...) to one of each."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return pa.large_string()
    if pa.types.is_string_view(data_type):
        return pa.large_string()
    if pa.types.is_binary(data_type) or pa.types.is_binary_view(data_type):
        return pa.large_binary()
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.large_list(canonical_type(data_type.value_type))
    if pa.types.is_list_view(data_type) or pa.types.is_large_list_view(data_type):
        return pa.large_list(canonical_type(data_type.value_type))
    if pa.types.is_dictionary(data_type):
        return canonical_type(data_type.value_type)
    return data_type


def canonical_schema(schema: pa.Schema) -> pa.Schema:
    """The schema with canonical types and no metadata."""
    fields = [pa.field(f.name, canonical_type(f.type), nullable=True) for f in schema]
    return pa.schema(fields)


def write_canonical(
    batches: Iterable[pa.RecordBatch | pa.Table], path: str | Path, schema: pa.Schema
) -> int:
    """Write `batches` (all of `schema`) to `path` in canonical form.

    Args:
        batches: the rows, in order, as record batches or tables of any chunking.
        path: the file to write; the caller owns atomicity (write to a temp path).
        schema: the schema of every batch.

    Returns:
        The number of rows written.
    """
    target = canonical_schema(schema)
    pending: list[pa.Table] = []
    pending_rows = 0
    total = 0
    with pq.ParquetWriter(
        str(path),
        target,
        compression=_COMPRESSION,
        compression_level=_COMPRESSION_LEVEL,
        write_statistics=True,
        store_schema=False,
    ) as writer:
        for batch in batches:
            table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            if table.num_rows == 0:
                continue
            pending.append(table.cast(target))
            pending_rows += table.num_rows
            while pending_rows >= ROW_GROUP_ROWS:
                merged = pa.concat_tables(pending)
                writer.write_table(merged.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                rest = merged.slice(ROW_GROUP_ROWS)
                pending, pending_rows = ([rest] if rest.num_rows else []), rest.num_rows
                total += ROW_GROUP_ROWS
        if pending_rows:
            writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
            total += pending_rows
    return total


def write_frame(frame: pl.DataFrame, path: str | Path) -> int:
    """Write a polars DataFrame canonically (see `write_canonical`)."""
    table = frame.to_arrow()
    return write_canonical(table.to_batches(max_chunksize=ROW_GROUP_ROWS), path, table.schema)
