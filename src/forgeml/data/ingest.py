"""Turn a raw source (file or folder) into the canonical Parquet of a first dataset version.

Formats: CSV / TSV (delimiter and header sniffed), JSON Lines, Parquet, a folder of
images (one sub-folder per class) and a folder of text files. CSV, TSV and JSON Lines may be
compressed (`.gz`, `.bz2`, `.zst`): they are decompressed as they are read. Every reader streams, so
memory stays bounded whatever the source size, and the same source always gives the same
bytes. Values are kept as written (`?`, `NA` stay strings): turning markers into nulls is
the job of `data clean`, not of ingest.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data import _folders
from forgeml.data._compression import inner_suffix, is_compressed
from forgeml.data._csv import (
    BadRows,
    Outcome,
    TrackedReader,
    ingest_delimited,
    read_sample,
    sniff_delimiter,
    sniff_header,
)
from forgeml.data._parquet import ROW_GROUP_ROWS, write_canonical

_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_FOLDER_FORMATS = ("images", "text")
_JSONL_CHUNK_BYTES = 16 * 1024 * 1024
_FORMATS_HINT = "set format to one of csv, tsv, jsonl, parquet, images or text"


class IngestOptions(BaseModel):
    """How to read a source; `IngestResult.resolved` holds the detected values for replay."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["auto", "csv", "tsv", "jsonl", "parquet", "images", "text"] = Field(
        "auto",
        description="Source format; 'auto' decides from the file extension, then the content "
        "(a folder is 'images' or 'text').",
    )
    delimiter: str | None = Field(
        None,
        description="Field delimiter of CSV/TSV, one character; empty to sniff it "
        "(TSV defaults to a tab).",
    )
    header: bool | None = Field(
        None,
        description="Whether the first CSV/TSV row names the columns; empty to sniff it "
        "(a first row without numbers is taken as a header; with `names`, no header).",
    )
    names: list[str] | None = Field(
        None,
        description="CSV/TSV column names, one per column in order (a comma-separated list "
        "such as 'label,text'); they replace column_1..N, or the header's when header is true.",
    )
    on_bad_rows: Literal["fail", "skip"] = Field(
        "fail",
        description="What to do with malformed rows (wrong field count, invalid JSON line, "
        "undecodable image): 'fail' stops naming their line numbers, 'skip' drops and reports "
        "them.",
    )

    @field_validator("names", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        return [part.strip() for part in value.split(",")] if isinstance(value, str) else value

    @field_validator("names")
    @classmethod
    def _distinct_names(cls, names: list[str] | None) -> list[str] | None:
        if names is None:
            return None
        if not names or any(not name.strip() for name in names):
            raise ValueError("every column name must be non-empty")
        repeated = next((name for name in names if names.count(name) > 1), None)
        if repeated is not None:
            raise ValueError(f"the column name '{repeated}' is given twice; names must differ")
        return names


@dataclass
class IngestResult:
    """What `ingest` wrote.

    Attributes:
        rows: rows written.
        columns: column name -> polars dtype string (e.g. "Int64"), in column order.
        format: the format read.
        resolved: the options with format, delimiter and header as detected, so that
            ingesting again with them reads the source the same way.
        source_digest: sha256 of the source bytes (for folders: each file's relative path,
            size and bytes, in sorted order).
        bad_rows: 1-based line numbers of skipped rows (index in sorted order for folder
            files), the first 1000.
        bad_row_count: how many rows were skipped in all.
    """

    rows: int
    columns: dict[str, str]
    format: str
    resolved: IngestOptions
    source_digest: str
    bad_rows: list[int]
    bad_row_count: int


def ingest(source: Path, out_path: Path, options: IngestOptions) -> IngestResult:
    """Read `source` and write its rows as canonical Parquet to `out_path`.

    Args:
        source: a file (CSV, TSV, JSONL, Parquet) or a folder (images, text files).
        out_path: the file to write; the caller owns temp path, rename and deletion on error.
        options: how to read it.

    Returns:
        Row count, column types, the resolved options, source digest and skipped rows.

    Raises:
        InvalidDataError: the source is missing, empty, of unknown format or undecodable,
            or the options do not fit it (one sentence saying what and how to fix it).
        BadRowsError: malformed rows were found and `on_bad_rows` is "fail".
    """
    source, out_path = Path(source), Path(out_path)
    _check_delimiter(options.delimiter)
    if not source.exists():
        raise InvalidDataError(f"The source '{source}' does not exist; check the path.")
    if source.is_file() and (
        source.stat().st_size == 0 or (is_compressed(source) and not read_sample(source))
    ):
        raise InvalidDataError(f"'{source}' has no rows: the file is empty.")
    fmt = _detect_format(source) if options.format == "auto" else options.format
    _check_kind(source, fmt)
    _check_options(source, fmt, options)
    resolved = options.model_copy(update={"format": fmt, "delimiter": None, "header": None})
    if fmt in ("csv", "tsv"):
        delimiter, header = _resolve_dialect(source, fmt, options)
        resolved = resolved.model_copy(update={"delimiter": delimiter, "header": header})
        outcome = ingest_delimited(
            source, out_path, delimiter, header, options.on_bad_rows, options.names
        )
    elif fmt == "jsonl":
        outcome = _ingest_jsonl(source, out_path, options.on_bad_rows)
    elif fmt == "parquet":
        outcome = _ingest_parquet(source, out_path)
    elif fmt == "images":
        outcome = _folders.ingest_images(source, out_path, options.on_bad_rows)
    else:
        outcome = _folders.ingest_texts(source, out_path)
    columns = {name: str(dtype) for name, dtype in pl.read_parquet_schema(out_path).items()}
    return IngestResult(
        rows=outcome.rows,
        columns=columns,
        format=fmt,
        resolved=resolved,
        source_digest=outcome.digest,
        bad_rows=list(outcome.bad.lines),
        bad_row_count=outcome.bad.count,
    )


def _check_delimiter(delimiter: str | None) -> None:
    if delimiter is not None and (len(delimiter) != 1 or delimiter in '"\r\n'):
        raise InvalidDataError(
            f"The delimiter {delimiter!r} is not a single character other than a quote or a "
            "newline; pass one character such as ',' or '\\t', or leave it empty to sniff it."
        )


def _check_options(source: Path, fmt: str, options: IngestOptions) -> None:
    if options.names is not None and fmt not in ("csv", "tsv"):
        raise InvalidDataError(
            f"names only applies to CSV/TSV files, and '{source}' is read as {fmt}; rename its "
            "columns with a clean recipe's `rename` instead."
        )
    if is_compressed(source) and fmt not in ("csv", "tsv", "jsonl"):
        raise InvalidDataError(
            f"'{source}' is compressed, and only CSV, TSV and JSON Lines are read compressed; "
            "decompress it first."
        )


def _check_kind(source: Path, fmt: str) -> None:
    if fmt in _FOLDER_FORMATS and not source.is_dir():
        raise InvalidDataError(
            f"'{source}' is a file, but format '{fmt}' reads a folder; pass the folder."
        )
    if fmt not in _FOLDER_FORMATS and source.is_dir():
        raise InvalidDataError(
            f"'{source}' is a folder, but format '{fmt}' reads one file; pass a file or set "
            "format to 'images' or 'text'."
        )


def _detect_format(source: Path) -> str:
    """The format from the extension, else from the first 64 KiB of content."""
    if source.is_dir():
        return _folders.detect_folder_format(source)
    by_suffix = _SUFFIX_FORMATS.get(inner_suffix(source))
    if by_suffix is not None:
        return by_suffix
    sample = read_sample(source)
    if sample.startswith(b"PAR1"):
        return "parquet"
    text = sample.decode("utf-8", errors="replace")
    # A NUL byte or many undecodable bytes: not text (one bad byte is reported by line later).
    if b"\0" in sample or text.count("\ufffd") > len(text) // 100:
        raise InvalidDataError(f"'{source}' is a binary file of unknown format; {_FORMATS_HINT}.")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.startswith("{"):
        return "jsonl"
    delimiter = sniff_delimiter(text)
    if delimiter is None:
        raise InvalidDataError(
            f"'{source}' is text with no recognisable delimiter or JSON objects; {_FORMATS_HINT}."
        )
    return "tsv" if delimiter == "\t" else "csv"


def _resolve_dialect(source: Path, fmt: str, options: IngestOptions) -> tuple[str, bool]:
    sample = read_sample(source).decode("utf-8", errors="replace")
    delimiter = options.delimiter
    if delimiter is None:
        delimiter = "\t" if fmt == "tsv" else (sniff_delimiter(sample) or ",")
    header = options.header
    if header is None:
        # given names stand for a header the file does not have (as pandas' read_csv reads)
        header = False if options.names is not None else sniff_header(sample, delimiter)
    return delimiter, header


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_JSONL_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _ingest_parquet(source: Path, out_path: Path) -> Outcome:
    """Copy a Parquet file row group by row group into canonical form."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    digest = _file_digest(source)
    try:
        parquet = pq.ParquetFile(source, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidDataError(
            f"'{source}' could not be read as Parquet ({_first_line(exc)}); check the file or "
            "set the right format."
        ) from exc
    names = parquet.schema_arrow.names
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise InvalidDataError(
            f"'{source}' has the column name '{duplicate}' more than once; rename the copies."
        )
    batches = parquet.iter_batches(batch_size=ROW_GROUP_ROWS, use_threads=False)
    try:
        rows = write_canonical(batches, out_path, parquet.schema_arrow)
    except pa.ArrowInvalid as exc:
        raise InvalidDataError(
            f"'{source}' has a corrupt part ({_first_line(exc)}); re-export the file."
        ) from exc
    except pl.exceptions.PolarsError as exc:
        raise InvalidDataError(
            f"'{source}' has a column type forgeml cannot store ({_first_line(exc)}); convert "
            "it to a plain type (number, text, date, list, struct) and export again."
        ) from exc
    if rows == 0:
        raise InvalidDataError(f"'{source}' has no rows; export it again with its data.")
    return Outcome(rows=rows, digest=digest, bad=BadRows())


def _ingest_jsonl(source: Path, out_path: Path, on_bad_rows: str) -> Outcome:
    """Read JSON Lines in chunks; each chunk's types widen to one schema for the file.

    Every chunk is parsed whole by polars (all rows inferred); only a chunk that fails is
    looked at line by line, to name its bad lines. Chunks are staged as Parquet so that the
    final schema (e.g. int in one chunk, float in a later one -> Float64) is known before
    anything is written.
    """
    bad = BadRows()
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".ingest-") as tmp:
        parts: list[tuple[Path, int]] = []
        reader = TrackedReader(source)
        try:
            for chunk, first_line in _line_chunks(reader):
                frame = _parse_jsonl_chunk(source, chunk, first_line, bad)
                if frame.height and frame.width:
                    part = Path(tmp) / f"part-{len(parts):06d}.parquet"
                    frame.write_parquet(part, compression="uncompressed")
                    parts.append((part, first_line))
            digest = reader.finish()
        finally:
            reader.close()
        bad.check(source, on_bad_rows, "lines that are not JSON objects")
        if not parts:
            raise InvalidDataError(f"'{source}' has no rows; add one JSON object per line.")
        unified = _unify_schemas(source, parts)
        batches = _aligned_batches(parts, unified)
        rows = write_canonical(batches, out_path, unified.schema)
    return Outcome(rows=rows, digest=digest, bad=bad)


def _line_chunks(reader: TrackedReader) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines, each with the 1-based line number it starts at."""
    rest = b""
    line = 1
    while data := reader.read(_JSONL_CHUNK_BYTES):
        data = rest + data
        cut = data.rfind(b"\n") + 1
        chunk, rest = data[:cut], data[cut:]
        if chunk:
            yield chunk, line
            line += chunk.count(b"\n")
    if rest:
        yield rest, line


def _parse_jsonl_chunk(source: Path, chunk: bytes, first_line: int, bad: BadRows) -> pl.DataFrame:
    try:
        return pl.read_ndjson(io.BytesIO(chunk), infer_schema_length=None)
    except pl.exceptions.PolarsError:
        pass  # a bad line or a type clash: find which below
    good: list[tuple[int, bytes]] = []
    for offset, line in enumerate(chunk.split(b"\n")):
        if line.strip():
            if _is_json_object(line):
                good.append((first_line + offset, line))
            else:
                bad.add(first_line + offset)
    if not good:
        return pl.DataFrame()
    try:
        return _read_lines([line for _, line in good])
    except pl.exceptions.PolarsError as exc:
        number = _first_clash(good)
        raise InvalidDataError(
            f"'{source}' line {number} gives a field a JSON type that does not combine with "
            f"the lines before it ({_first_line(exc)}); make each field one type."
        ) from exc


def _is_json_object(line: bytes) -> bool:
    import orjson

    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def _read_lines(lines: list[bytes]) -> pl.DataFrame:
    return pl.read_ndjson(io.BytesIO(b"\n".join(lines)), infer_schema_length=None)


def _first_clash(good: list[tuple[int, bytes]]) -> int:
    """The line of the shortest prefix polars cannot read (reading a prefix is monotone)."""
    low, high = 1, len(good)
    while low < high:
        middle = (low + high) // 2
        try:
            _read_lines([line for _, line in good[:middle]])
            low = middle + 1
        except pl.exceptions.PolarsError:
            high = middle
    return good[low - 1][0]


def _unify_schemas(source: Path, parts: list[tuple[Path, int]]) -> pl.DataFrame:
    """An empty frame whose schema every chunk widens to (int + float -> Float64, ...)."""
    unified = pl.DataFrame()
    for part, first_line in parts:
        empty = pl.DataFrame(schema=pl.read_parquet_schema(part))
        try:
            unified = pl.concat([unified, empty], how="diagonal_relaxed")
        except pl.exceptions.PolarsError as exc:
            raise InvalidDataError(
                f"'{source}' gives a field a JSON type at or after line {first_line} that does "
                f"not combine with earlier lines ({_first_line(exc)}); make each field one type."
            ) from exc
    return unified


def _aligned_batches(
    parts: list[tuple[Path, int]], unified: pl.DataFrame
) -> Iterator[pl.DataFrame]:
    for part, _ in parts:
        yield pl.concat([unified, pl.read_parquet(part)], how="diagonal_relaxed")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__
