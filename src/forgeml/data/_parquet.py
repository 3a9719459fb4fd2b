"""The one way a dataset version is written to Parquet.

A version's digest is the sha256 of its Parquet bytes, so the writer must turn the same
rows into the same bytes whatever path produced them. Every writer here goes through
polars' Parquet sink with the same fixed options (row-group size, page size, zstd level,
statistics) after normalising types (categoricals become strings), and that sink's output
depends only on the rows, never on how they were chunked, with one exception it does not
handle itself: the pages of a nested column (list, array, struct) depend on its memory
layout, when a row group spans two chunks or is a slice of a longer array. So rows with
nested columns are always written as row groups cut and copied into one compact chunk each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa
    from polars._typing import PolarsDataType

ROW_GROUP_ROWS = 131_072
# Fixed for good: changing any of them changes every digest.
_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 1,
    "statistics": True,
    "row_group_size": ROW_GROUP_ROWS,
    "data_page_size": 1024 * 1024,
}


def canonical_dtype(dtype: PolarsDataType) -> pl.DataType:
    """The type a column is stored as: categoricals as strings, nested types recursively."""
    kind: pl.DataType = dtype if isinstance(dtype, pl.DataType) else dtype()  # pl.Int64 -> ()
    if isinstance(kind, pl.Categorical | pl.Enum):
        return pl.String()
    if isinstance(kind, pl.List):
        return pl.List(canonical_dtype(kind.inner))
    if isinstance(kind, pl.Array):
        return pl.Array(canonical_dtype(kind.inner), kind.shape)
    if isinstance(kind, pl.Struct):
        return pl.Struct({f.name: canonical_dtype(f.dtype) for f in kind.fields})
    return kind


def canonical_schema(schema: pa.Schema | Mapping[str, PolarsDataType]) -> pl.Schema:
    """A polars schema (Arrow schemas converted) with canonical types."""
    if not isinstance(schema, Mapping):  # an Arrow schema (pyarrow is imported only if used)
        schema = pl.DataFrame(pl.from_arrow(schema.empty_table())).schema
    return pl.Schema({name: canonical_dtype(dtype) for name, dtype in schema.items()})


def is_nested(schema: Mapping[str, PolarsDataType]) -> bool:
    """Whether any column is a list, array or struct."""
    return any(dtype.is_nested() for dtype in schema.values())


def write_frame(frame: pl.DataFrame, path: str | Path) -> int:
    """Write a polars DataFrame canonically.

    Args:
        frame: the rows.
        path: the file to write; the caller owns atomicity (write to a temp path).

    Returns:
        The number of rows written.
    """
    target = canonical_schema(frame.schema)
    if is_nested(target):
        return write_canonical([frame], path, target)
    if target != frame.schema:
        frame = frame.cast(target)
    frame.write_parquet(path, **_OPTIONS)
    return frame.height


def sink_flat(query: pl.LazyFrame, path: str | Path) -> pl.LazyFrame:
    """The canonical Parquet sink of a streaming query, to run with `pl.collect_all`.

    Only for queries without nested columns: the streaming engine chunks rows as it likes,
    which changes nested columns' bytes (see the module docstring).

    Raises:
        TypeError: the query has a nested column (use `write_canonical`).
    """
    schema = query.collect_schema()
    if is_nested(schema):
        raise TypeError("sink_flat needs flat columns; stream nested ones via write_canonical")
    target = canonical_schema(schema)
    if target != schema:
        query = query.cast(target)
    sink = query.sink_parquet(path, lazy=True, **_OPTIONS)
    if sink is None:  # lazy=True returns the unexecuted sink; None would mean it already ran
        raise RuntimeError("polars ran a lazy Parquet sink eagerly")
    return sink


def write_canonical(
    batches: Iterable[pa.RecordBatch | pa.Table | pl.DataFrame],
    path: str | Path,
    schema: pa.Schema | Mapping[str, PolarsDataType],
) -> int:
    """Stream `batches` (all of `schema`) to `path` in canonical form, in bounded memory.

    Args:
        batches: the rows, in order, as Arrow record batches or tables or polars frames
            of any chunking.
        path: the file to write; the caller owns atomicity (write to a temp path).
        schema: the schema of every batch.

    Returns:
        The number of rows written.
    """
    from polars.io.plugins import register_io_source

    target = canonical_schema(schema)
    state = _Stream(batches, target)

    def source(
        with_columns: list[str] | None, _predicate: Any, _n_rows: Any, _batch_size: Any
    ) -> Iterator[pl.DataFrame]:
        for frame in state.frames():
            yield frame if with_columns is None else frame.select(with_columns)

    lazy = register_io_source(source, schema=target)
    try:
        lazy.sink_parquet(path, **_OPTIONS)
    except Exception:
        # An error raised by a batch producer (bad file, undecodable text) is the real one.
        if state.error is not None:
            raise state.error from None
        raise
    return state.rows


class _Stream:
    """The batches as polars frames of the target schema, counted as they pass.

    Flat frames pass as they come: the sink holds several in memory, so small ones keep
    it lean. Nested ones are re-cut into compact row groups (see the module docstring).
    """

    def __init__(
        self, batches: Iterable[pa.RecordBatch | pa.Table | pl.DataFrame], target: pl.Schema
    ) -> None:
        self.batches = batches
        self.target = target
        self.rows = 0
        self.error: Exception | None = None

    def frames(self) -> Iterator[pl.DataFrame]:
        try:
            source = self._converted()
            yield from _row_groups(source) if is_nested(self.target) else source
        except Exception as exc:
            self.error = exc
            raise

    def _converted(self) -> Iterator[pl.DataFrame]:
        for batch in self.batches:
            frame = batch if isinstance(batch, pl.DataFrame) else pl.DataFrame(pl.from_arrow(batch))
            if frame.height:
                self.rows += frame.height
                yield frame if frame.schema == self.target else frame.cast(self.target)


def _row_groups(frames: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    pending: list[pl.DataFrame] = []
    pending_rows = 0
    for frame in frames:
        pending.append(frame)
        pending_rows += frame.height
        while pending_rows >= ROW_GROUP_ROWS:
            merged = pl.concat(pending, rechunk=False)
            yield _compact(merged.slice(0, ROW_GROUP_ROWS))
            rest = merged.slice(ROW_GROUP_ROWS)
            pending, pending_rows = ([rest] if rest.height else []), rest.height
    if pending_rows:
        yield _compact(pl.concat(pending, rechunk=False))


def _compact(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` in one chunk of its own (`rechunk` keeps a sliced array's buffers)."""
    return frame.select(pl.all().gather(pl.int_range(pl.len())))
