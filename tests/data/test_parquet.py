from __future__ import annotations

import datetime as dt
import io
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.data._parquet import ROW_GROUP_ROWS, sink_flat, write_canonical, write_frame

ROWS = 2 * ROW_GROUP_ROWS + 12_345  # three row groups, the last one partial


@pytest.fixture(scope="module")
def mixed() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    n = ROWS
    words = np.array(["alpha", "beta", "", "ünïcode", "gamma delta"])
    frame = pl.DataFrame(
        {
            "i": rng.integers(0, 10**6, n),
            "f": rng.normal(size=n),
            "s": words[rng.integers(0, len(words), n)],
            "free": rng.integers(0, 10**9, n).astype(str),
            "b": rng.random(n) < 0.5,
            "bin": [bytes([i % 256]) * (i % 5) for i in range(n)],
        }
    )
    return frame.with_columns(
        pl.when(pl.col("i") % 7 == 0).then(None).otherwise(pl.col("s")).alias("s"),
        pl.when(pl.col("i") % 11 == 0).then(float("nan")).otherwise(pl.col("f")).alias("f"),
        l=pl.concat_list(pl.col("i") % 5, pl.col("i") % 3),
        st=pl.struct(x=pl.col("i") % 4, y=pl.col("s")),
        d=pl.date(2020, 1, 1) + pl.duration(days=pl.col("i") % 1000),
        ls=pl.concat_list(pl.col("s"), pl.col("free")),
        sl=pl.struct(k=pl.concat_list(pl.col("i") % 9), v=pl.col("f")),
        arr=pl.concat_list(pl.col("i") % 2, pl.col("i") % 6).list.to_array(2),
    )


def chunked(frame: pl.DataFrame, cuts: list[int]) -> pl.DataFrame:
    bounds = [0, *cuts, frame.height]
    parts = [frame.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    return pl.concat(parts, rechunk=False)


def batches(frame: pl.DataFrame, size: int) -> Iterator[pa.RecordBatch]:
    yield from frame.to_arrow().to_batches(max_chunksize=size)


@pytest.mark.parametrize(
    "cuts",
    [[], [1], [ROW_GROUP_ROWS], [1000, 150_000, 150_001, 260_000], list(range(9_999, ROWS, 9_999))],
)
def test_same_rows_in_any_chunking_give_identical_bytes(
    tmp_path: Path, mixed: pl.DataFrame, cuts: list[int]
) -> None:
    write_frame(mixed, tmp_path / "one.parquet")
    assert write_frame(chunked(mixed, cuts), tmp_path / "chunked.parquet") == ROWS
    expected = (tmp_path / "one.parquet").read_bytes()
    assert (tmp_path / "chunked.parquet").read_bytes() == expected
    assert pl.read_parquet(tmp_path / "one.parquet").equals(mixed)


@pytest.mark.parametrize("size", [1_000, 7_777, ROW_GROUP_ROWS, 200_000])
def test_streamed_batches_match_write_frame(tmp_path: Path, mixed: pl.DataFrame, size: int) -> None:
    part = mixed.head(50_000) if size < 5_000 else mixed
    write_frame(part, tmp_path / "frame.parquet")
    source = batches(part, size)
    assert write_canonical(source, tmp_path / "stream.parquet", part.to_arrow().schema) == len(part)
    assert (tmp_path / "stream.parquet").read_bytes() == (tmp_path / "frame.parquet").read_bytes()


def test_flat_streaming_sink_matches_write_frame(tmp_path: Path, mixed: pl.DataFrame) -> None:
    flat = mixed.select("i", "f", "s", "free", "b", "bin", "d")
    write_frame(flat, tmp_path / "frame.parquet")
    query = chunked(flat, [5, 100_000]).lazy().filter(pl.lit(True))
    pl.collect_all([sink_flat(query, tmp_path / "sink.parquet")], engine="streaming")
    assert (tmp_path / "sink.parquet").read_bytes() == (tmp_path / "frame.parquet").read_bytes()
    with pytest.raises(TypeError, match="flat columns"):
        sink_flat(mixed.lazy(), tmp_path / "nested.parquet")


def test_a_slice_writes_like_a_copy(tmp_path: Path, mixed: pl.DataFrame) -> None:
    part = mixed.slice(ROW_GROUP_ROWS - 5, ROW_GROUP_ROWS)
    write_frame(part, tmp_path / "slice.parquet")
    buffer = io.BytesIO()
    part.write_ipc(buffer)  # read back, the rows own compact buffers
    buffer.seek(0)
    write_frame(pl.read_ipc(buffer), tmp_path / "copy.parquet")
    assert (tmp_path / "slice.parquet").read_bytes() == (tmp_path / "copy.parquet").read_bytes()


def test_types_are_normalised(tmp_path: Path) -> None:
    categorical = pl.DataFrame(
        {"c": ["a", "b", "a"], "l": [["x"], [], None]},
        schema={"c": pl.Categorical(), "l": pl.List(pl.Categorical())},
    )
    plain = categorical.cast({"c": pl.String, "l": pl.List(pl.String)})
    write_frame(categorical, tmp_path / "cat.parquet")
    write_frame(plain, tmp_path / "plain.parquet")
    assert (tmp_path / "cat.parquet").read_bytes() == (tmp_path / "plain.parquet").read_bytes()
    dictionary = pa.table({"c": pa.array(["a", "b", "a"]).dictionary_encode()})
    schema = pa.schema([("c", pa.large_string())])
    large = pa.table({"c": pa.array(["a", "b", "a"], type=pa.large_string())}, schema=schema)
    write_canonical([dictionary], tmp_path / "dict.parquet", dictionary.schema)
    write_canonical([large], tmp_path / "large.parquet", schema)
    write_frame(plain.select("c"), tmp_path / "c.parquet")
    expected = (tmp_path / "c.parquet").read_bytes()
    assert (tmp_path / "dict.parquet").read_bytes() == expected
    assert (tmp_path / "large.parquet").read_bytes() == expected


def test_no_rows_keep_the_schema(tmp_path: Path) -> None:
    schema = {"a": pl.Int64(), "d": pl.Date(), "l": pl.List(pl.String())}
    assert write_canonical([], tmp_path / "empty.parquet", schema) == 0
    assert pl.read_parquet_schema(tmp_path / "empty.parquet") == schema
    write_frame(pl.DataFrame(schema=schema), tmp_path / "frame.parquet")
    assert (tmp_path / "frame.parquet").read_bytes() == (tmp_path / "empty.parquet").read_bytes()


def test_a_producer_error_reaches_the_caller_unchanged(tmp_path: Path) -> None:
    def failing() -> Iterator[pl.DataFrame]:
        yield pl.DataFrame({"a": [1, 2]})
        raise InvalidDataError("The third row is broken; fix it.")

    with pytest.raises(InvalidDataError, match="third row is broken") as caught:
        write_canonical(failing(), tmp_path / "out.parquet", {"a": pl.Int64()})
    assert type(caught.value) is InvalidDataError


def test_dates_and_times_round_trip(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "d": [dt.date(2024, 2, 29), None],
            "t": [dt.datetime(2024, 1, 1, 12, 30), dt.datetime(1999, 12, 31)],
            "x": [dt.timedelta(seconds=5), None],
        }
    )
    write_frame(frame, tmp_path / "t.parquet")
    assert pl.read_parquet(tmp_path / "t.parquet").equals(frame)
