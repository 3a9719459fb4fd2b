"""Streaming ingest of delimited text (CSV / TSV) with whole-file type inference.

Also holds what every line-oriented reader shares: `TrackedReader` (one pass over the
source that hashes it, checks it is UTF-8 and counts its lines) and `BadRows`.

Two readers give the same rows, types and bytes. A file without quotes goes through
`ingest_plain` (polars' streaming reader; see the comment above it), which hands any other
file back. `ingest_arrow` reads everything: pass 1 parses the file with Arrow's streaming
CSV reader, every column as text, strips and nulls the fields and writes them to a
temporary Parquet file while tallying which type every value of each column parses as,
naming malformed rows by line; pass 2 casts each column to the type that held for the
WHOLE file and streams it to the canonical writer. Memory stays bounded whatever the
file size (a few blocks for Arrow's; polars' buffers, a few hundred MB at most).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import polars as pl

from forgeml.core.errors import BadRowsError, InvalidDataError
from forgeml.data._compression import is_compressed, open_source
from forgeml.data._parquet import sink_flat

if TYPE_CHECKING:  # pyarrow is imported by the Arrow path only: the fast path stays leaner
    import pyarrow as pa
    import pyarrow.csv as pa_csv

_T = TypeVar("_T")
SAMPLE_BYTES = 64 * 1024
MAX_LISTED_BAD_ROWS = 1000
_BLOCK_BYTES = 1024 * 1024
_SNIFF_DELIMITERS = ",\t;|"
_SNIFF_ROWS = 200
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# Tried in this order: a column is the first type that every non-null value parses as.
_CANDIDATES = ("Int64", "Float64", "Boolean")


@dataclass
class BadRows:
    """Malformed rows found while reading: 1-based line numbers (the first 1000) and a count."""

    lines: list[int] = field(default_factory=list)
    count: int = 0
    names: list[str] = field(default_factory=list)

    def add(self, line: int, name: str | None = None) -> None:
        """Record one bad row; `name` (a file's relative path) replaces the line in messages."""
        self.count += 1
        if len(self.lines) < MAX_LISTED_BAD_ROWS:
            self.lines.append(line)
            if name is not None:
                self.names.append(name)

    def check(self, source: Path, on_bad_rows: str, what: str) -> None:
        """Raise `BadRowsError` when rows were bad and the caller chose to fail on them."""
        if not self.count or on_bad_rows != "fail":
            return
        shown = self.names[:5] if self.names else [f"line {n}" for n in self.lines[:5]]
        more = ", ..." if self.count > len(shown) else ""
        raise BadRowsError(
            f"'{source}' has {self.count} {what} ({', '.join(shown)}{more}); fix them or set "
            "on_bad_rows to 'skip' (--on-bad-rows skip) to drop them.",
            list(self.lines),
        )


@dataclass
class Outcome:
    """What a format reader hands back to `ingest`."""

    rows: int
    digest: str
    bad: BadRows


class TrackedReader:
    """A binary file read once: hashed, checked to be UTF-8 and line-counted as bytes pass.

    A compressed file (`.gz`, `.zst`) is read, hashed and counted as its decompressed bytes.

    Arrow reads it through `read()`; an exception raised here reaches the caller wrapped by
    Arrow, so the clear one is also kept in `error`.
    """

    def __init__(self, path: Path, check_utf8: bool = True) -> None:
        self.path = path
        self.newlines = 0
        self.size = 0
        self.ends_with_newline = True
        self.error: InvalidDataError | None = None
        self.closed = False
        self._file = open_source(path)
        self._sha = hashlib.sha256()
        self._decoder = codecs.getincrementaldecoder("utf-8")() if check_utf8 else None

    def read(self, size: int = -1) -> bytes:
        """Read up to `size` bytes (all when negative), accounting for them."""
        try:
            data = self._file.read(size)
        except InvalidDataError as exc:  # a corrupt compressed file
            self.error = exc
            raise
        self._sha.update(data)
        if self._decoder is not None:
            self._check_utf8(self._decoder, data)
        self.newlines += data.count(b"\n")
        if data:
            self.size += len(data)
            self.ends_with_newline = data.endswith(b"\n")
        return data

    def _check_utf8(self, decoder: codecs.IncrementalDecoder, data: bytes) -> None:
        # A multi-byte character split across reads waits in the decoder: offsets count it.
        pending = len(decoder.getstate()[0])
        try:
            decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            offset = max(exc.start - pending, 0)
            line = self.newlines + data[:offset].count(b"\n") + 1
            self.error = InvalidDataError(
                f"'{self.path}' is not valid UTF-8 text at line {line}; re-save the file as UTF-8."
            )
            raise self.error from None

    @property
    def lines(self) -> int:
        """Physical lines read so far (a last line without a newline counts)."""
        return self.newlines + (0 if self.ends_with_newline else 1)

    def readable(self) -> bool:
        """Arrow's file adapter asks."""
        return True

    def finish(self) -> str:
        """Read whatever is left (so the digest covers the whole file) and return the digest."""
        while self.read(_BLOCK_BYTES):
            pass
        return self._sha.hexdigest()

    def close(self) -> None:
        """Close the file."""
        self._file.close()
        self.closed = True


def read_sample(path: Path) -> bytes:
    """The first ~64 KiB of `path`, cut after its last complete line when it has one."""
    with open_source(path) as handle:
        sample = handle.read(SAMPLE_BYTES)
    if len(sample) == SAMPLE_BYTES and b"\n" in sample:
        sample = sample[: sample.rfind(b"\n") + 1]
    return sample


def sniff_delimiter(sample: str) -> str | None:
    """The candidate (`, TAB ; |`) that most consistently splits rows into >1 fields.

    Each candidate parses the first 200 rows of the sample (quotes respected); its score is
    the share of rows having the most common field count, zero when that count is 1. Ties
    go to the earlier candidate; None when no candidate scores. `csv.Sniffer` is not used:
    its quote-guessing regular expression is quadratic (8 s on a 56 KB sample whose fields
    open quotes that never close).
    """
    best, best_score = None, 0.0
    for candidate in _SNIFF_DELIMITERS:
        widths = _row_widths(sample, candidate)
        if not widths:
            continue
        width, hits = Counter(widths).most_common(1)[0]
        score = hits / len(widths) if width > 1 else 0.0
        if score > best_score:
            best, best_score = candidate, score
    return best


def _row_widths(sample: str, delimiter: str) -> list[int]:
    rows = csv.reader(io.StringIO(sample), delimiter=delimiter, skipinitialspace=True)
    widths: list[int] = []
    try:
        for row in rows:
            if row:
                widths.append(len(row))
            if len(widths) >= _SNIFF_ROWS:
                break
    except csv.Error:
        pass  # a quote left open at the end of the sample: judge the rows before it
    return widths


def sniff_header(sample: str, delimiter: str) -> bool:
    """Whether the first row is a header: true unless one of its fields is a number.

    `csv.Sniffer.has_header` answers no for sst2's train.tsv and most all-text files,
    because it only votes on columns of one type or one length; a header of numbers is
    the rarer case, and the `header` option overrides it.
    """
    rows = csv.reader(io.StringIO(sample), delimiter=delimiter, skipinitialspace=True)
    first = next((row for row in rows if row), [])
    return not any(_NUMBER.fullmatch(value.strip()) for value in first)


def strips_spaces(delimiter: str) -> bool:
    """Fields lose leading spaces (`a, b` -> `b`) unless the delimiter is itself blank."""
    return delimiter not in (" ", "\t")


def ingest_delimited(
    source: Path,
    out_path: Path,
    delimiter: str,
    header: bool,
    on_bad_rows: str,
    names: list[str] | None = None,
) -> Outcome:
    """Read a delimited text file and write it canonically to `out_path`.

    Args:
        source: the file.
        out_path: where the canonical Parquet goes.
        delimiter: one character.
        header: whether the first row names the columns (it is skipped either way).
        on_bad_rows: "fail" or "skip" rows with the wrong number of fields.
        names: the column names, one per field; None takes the header's (or
            `column_1..N` without a header).

    Returns:
        Rows written, the source digest and the bad rows (1-based line numbers).

    Raises:
        InvalidDataError: undecodable text, no rows, duplicate column names, or `names`
            of another length than the first row.
        BadRowsError: malformed rows with `on_bad_rows="fail"`.
    """
    if names is not None:
        _check_names(source, names, _column_count(source, delimiter))
    fast = (
        None if is_compressed(source) else ingest_plain(source, out_path, delimiter, header, names)
    )
    if fast is not None:
        return fast
    return ingest_arrow(source, out_path, delimiter, header, on_bad_rows, names)


def _check_names(source: Path, names: list[str], width: int) -> None:
    if len(names) != width:
        raise InvalidDataError(
            f"names gives {len(names)} column names ({', '.join(names)}) but '{source}' has "
            f"{width} columns; give exactly one name per column."
        )


def ingest_arrow(
    source: Path,
    out_path: Path,
    delimiter: str,
    header: bool,
    on_bad_rows: str,
    names: list[str] | None = None,
) -> Outcome:
    """The general reader behind `ingest_delimited`: quotes, bad rows with line numbers."""
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".ingest-") as tmp:
        strings = Path(tmp) / "strings.parquet"
        staged = _stage_strings(source, strings, delimiter, header, names)
        if staged.records != staged.lines and staged.bad.lines:
            staged.bad.lines = _records_to_lines(source, delimiter, staged.bad.lines)
        staged.bad.check(source, on_bad_rows, "rows with the wrong number of fields")
        if staged.rows == 0:
            raise _no_rows(source, staged.bad.count)
        typed = _typed_strings(strings, staged.names, staged.tally.dtypes())
        pl.collect_all([sink_flat(typed, out_path)], engine="streaming")
    return Outcome(rows=staged.rows, digest=staged.digest, bad=staged.bad)


def _no_rows(source: Path, skipped: int) -> InvalidDataError:
    if skipped:
        return InvalidDataError(
            f"'{source}' has no rows left after skipping {skipped} malformed rows; check the "
            "delimiter and the header."
        )
    return InvalidDataError(f"'{source}' has no rows; add data rows below the header.")


class _TypeTally:
    """Which candidate types every non-null value of each column has parsed as so far."""

    def __init__(self, width: int) -> None:
        self.candidates = [list(_CANDIDATES) for _ in range(width)]
        self.non_null = [0] * width

    def update(self, frame: pl.DataFrame) -> None:
        exprs: list[pl.Expr] = []
        for i, name in enumerate(frame.columns):
            if self.candidates[i]:  # a column already known to be text costs nothing more
                exprs.append(pl.col(name).count().alias(f"n{i}"))
                exprs += [
                    _parses(pl.col(name), d).sum().alias(f"{d}{i}") for d in self.candidates[i]
                ]
        if not exprs:
            return
        counts = frame.select(exprs).row(0, named=True)
        for i, kept in enumerate(self.candidates):
            if kept:
                seen = counts[f"n{i}"]
                self.non_null[i] += seen
                self.candidates[i] = [d for d in kept if counts[f"{d}{i}"] == seen]

    def dtypes(self) -> list[str]:
        return [
            kept[0] if kept and seen else "String"
            for kept, seen in zip(self.candidates, self.non_null, strict=True)
        ]


def _parses(column: pl.Expr, dtype: str) -> pl.Expr:
    if dtype == "Boolean":
        return column.str.to_lowercase().is_in(["true", "false"])
    return column.cast(pl.Int64 if dtype == "Int64" else pl.Float64, strict=False).is_not_null()


def _cast(column: pl.Expr, dtype: str, strict: bool = True) -> pl.Expr:
    if dtype == "Boolean":
        if strict:  # fails on any other word, as the numeric casts do
            return column.str.to_lowercase().replace_strict(["true", "false"], [True, False])
        return column.str.to_lowercase() == "true"
    if dtype == "String":
        return column
    return column.cast(pl.Int64 if dtype == "Int64" else pl.Float64, strict=strict)


@dataclass
class _Staged:
    names: list[str]
    rows: int
    records: int
    lines: int
    digest: str
    bad: BadRows
    tally: _TypeTally


def _stage_strings(
    source: Path, strings: Path, delimiter: str, header: bool, names: list[str] | None
) -> _Staged:
    """Pass 1: parse every field as text, clean it, tally types, write it to `strings`."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    bad = BadRows()

    def on_invalid(row: pa_csv.InvalidRow) -> str:
        # Arrow numbers records (blank lines and quoted newlines not counted); mapped later.
        bad.add(row.number if row.number is not None else 0)
        return "skip"

    width = _column_count(source, delimiter)
    reader = TrackedReader(source)
    try:
        stream = pa_csv.open_csv(
            reader,
            read_options=pa_csv.ReadOptions(
                use_threads=False, block_size=_BLOCK_BYTES, autogenerate_column_names=True
            ),
            parse_options=_parse_options(delimiter, on_invalid),
            convert_options=pa_csv.ConvertOptions(
                column_types={f"f{i}": pa.large_string() for i in range(width)}
            ),
        )
        names, rows, tally = _write_strings(stream, strings, header, delimiter, source, names)
        digest = reader.finish()
    except pa.ArrowInvalid as exc:
        raise _arrow_error(source, exc, reader) from exc
    finally:
        reader.close()
    records = rows + bad.count + (1 if header else 0)
    return _Staged(names, rows, records, reader.lines, digest, bad, tally)


def _write_strings(
    stream: pa_csv.CSVStreamingReader,
    strings: Path,
    header: bool,
    delimiter: str,
    source: Path,
    given: list[str] | None,
) -> tuple[list[str], int, _TypeTally]:
    import pyarrow.parquet as pq

    strip = strips_spaces(delimiter)
    names: list[str] = []
    tally = _TypeTally(0)
    rows = 0
    writer: pq.ParquetWriter | None = None
    try:
        for batch in stream:
            if writer is None:
                names = given or _column_names(batch, header, source)
                tally = _TypeTally(len(names))
            frame = _clean(batch.slice(1) if header and writer is None else batch, strip)
            tally.update(frame)
            table = frame.to_arrow()
            if writer is None:
                # Staging only: plain pages without dictionaries or statistics write 3x faster.
                writer = pq.ParquetWriter(
                    strings,
                    table.schema,
                    compression="none",
                    use_dictionary=False,
                    write_statistics=False,
                )
            writer.write_table(table)
            rows += frame.height
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise InvalidDataError(f"'{source}' has no rows; add a header and data rows.")
    return names, rows, tally


def _clean(batch: pa.RecordBatch, strip: bool) -> pl.DataFrame:
    """Strip leading spaces (when the delimiter allows) and make empty fields null."""
    frame = pl.DataFrame(pl.from_arrow(batch))
    exprs = []
    for name in frame.columns:
        column = pl.col(name).str.strip_chars_start(" ") if strip else pl.col(name)
        exprs.append(column.replace("", None))
    return frame.select(exprs)


def _column_names(batch: pa.RecordBatch, header: bool, source: Path) -> list[str]:
    width = batch.num_columns
    if not header:
        return [f"column_{i + 1}" for i in range(width)]
    if batch.num_rows == 0:
        raise InvalidDataError(f"'{source}' has no rows; add a header and data rows.")
    return _header_names([batch.column(i)[0].as_py() or "" for i in range(width)], source)


def _header_names(raw: list[str], source: Path) -> list[str]:
    names = [value.strip() or f"column_{i + 1}" for i, value in enumerate(raw)]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise InvalidDataError(
                f"'{source}' has the column name '{name}' twice (columns {seen[name] + 1} and "
                f"{i + 1}); rename one, or set header to false to name columns column_1, ..."
            )
        seen[name] = i
    return names


def _typed_strings(strings: Path, names: list[str], dtypes: list[str]) -> pl.LazyFrame:
    """Pass 2: the staged text cast to the types that held over the whole file."""
    return pl.scan_parquet(strings).select(
        _cast(pl.col(f"f{i}"), dtype).alias(name)
        for i, (name, dtype) in enumerate(zip(names, dtypes, strict=True))
    )


def _parse_options(delimiter: str, handler: object = None) -> pa_csv.ParseOptions:
    import pyarrow.csv as pa_csv

    return pa_csv.ParseOptions(
        delimiter=delimiter,
        quote_char='"',
        double_quote=True,
        newlines_in_values=True,
        invalid_row_handler=handler,
    )


def _column_count(source: Path, delimiter: str) -> int:
    """How many fields Arrow finds in the first row (it fixes the width for the whole file)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    sample = read_sample(source)
    try:
        probe = pa_csv.open_csv(
            io.BytesIO(sample),
            read_options=pa_csv.ReadOptions(use_threads=False, autogenerate_column_names=True),
            parse_options=_parse_options(delimiter, lambda _row: "skip"),
        )
    except pa.ArrowInvalid as exc:
        raise _arrow_error(source, exc, None) from exc
    return len(probe.schema)


def _arrow_error(source: Path, exc: pa.ArrowInvalid, reader: TrackedReader | None) -> Exception:
    if reader is not None and reader.error is not None:
        return reader.error
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Empty CSV file" in detail:
        return InvalidDataError(f"'{source}' has no rows; add a header and data rows.")
    if "UTF8" in detail:
        return InvalidDataError(f"'{source}' is not valid UTF-8 text; re-save the file as UTF-8.")
    return InvalidDataError(f"'{source}' could not be parsed as delimited text ({detail}).")


def _records_to_lines(source: Path, delimiter: str, records: list[int]) -> list[int]:
    """Map Arrow's record numbers to physical line numbers (blank lines, quoted newlines).

    Only runs when the file has such lines AND bad rows: it reads the file a second time.
    """
    wanted = set(records)
    found: dict[int, int] = {}
    record = last_line = 0
    with io.TextIOWrapper(open_source(source), encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter=delimiter, quotechar='"', doublequote=True)
        try:
            for row in rows:
                start, last_line = last_line + 1, rows.line_num
                if not row:
                    continue
                record += 1
                if record in wanted:
                    found[record] = start
                    if len(found) == len(wanted):
                        break
        except csv.Error:
            pass  # e.g. a field over the csv module's size limit: keep record numbers
    return [found.get(number, number) for number in records]


# --- fast path: files without quotes ----------------------------------------------------
#
# Most delimited files quote nothing. For them, splitting at the delimiter and at newlines
# IS the parse, so polars' streaming reader (quotes off) gives exactly Arrow's rows, several
# times faster and in one pass: the Parquet is written with the types the first 64 KiB
# suggest, cast strictly, so that finishing proves every value of the file parses as its
# column's type (the sample already ruled the earlier candidate types out). A thread
# meanwhile hashes the bytes and counts delimiters, newlines, quotes, carriage returns and
# leading spaces; the result stands only when those counts prove that every line has exactly
# the header's field count (polars pads short rows with nulls silently, and fails on long
# ones), that nothing is quoted and that no leading space went unstripped. When a cast fails
# (a late `abc` in a numeric column), the file is read again, casting leniently while
# counting what parses as each type over the whole file (the first read does that when the
# sample left a column undecided: all null in it), and written once more if a type differs.
# Anything else (quotes, wrong field counts, blank lines, lone carriage returns, bad UTF-8)
# makes `ingest_plain` return None, and the Arrow path above reads the file with its full
# error reporting.

_RAW_BLOCK_BYTES = 2 * 1024 * 1024
_NEWLINE, _CARRIAGE_RETURN, _SPACE = 10, 13, 32


class _RawScan:
    """The digest of a file and the byte counts that prove a quote-free parse exact."""

    def __init__(self, delimiter: int, count_spaces: bool = True) -> None:
        self.delimiter = delimiter
        self.count_spaces = count_spaces
        self.delimiters = self.newlines = self.leading_spaces = 0
        self.carriage_returns = self.crlf = 0
        self.quotes = False
        self.last = _NEWLINE  # the file starts a line
        self.started = False
        self.error: BaseException | None = None
        self._sha = hashlib.sha256()

    @property
    def digest(self) -> str:
        """sha256 of the bytes read."""
        return self._sha.hexdigest()

    def lines(self) -> int:
        """Physical lines (a last line without a newline counts)."""
        return self.newlines + (0 if self.last == _NEWLINE else 1)

    def run(self, path: Path) -> None:
        """Read the whole file; an error is kept for the thread that waits on this one."""
        try:
            with path.open("rb", buffering=0) as handle:
                while block := handle.read(_RAW_BLOCK_BYTES):
                    self.feed(block)
        except BaseException as exc:  # re-raised by `ingest_plain`, after the join
            self.error = exc

    def feed(self, block: bytes) -> None:
        """Account for the next block of the file."""
        self._sha.update(block)
        data = np.frombuffer(block, dtype=np.uint8)
        self.delimiters += int(np.count_nonzero(data == self.delimiter))
        self.newlines += int(np.count_nonzero(data == _NEWLINE))
        self.quotes = self.quotes or b'"' in block
        if b"\r" in block:
            self.carriage_returns += block.count(b"\r")
            self.crlf += block.count(b"\r\n")
        if self.last == _CARRIAGE_RETURN and data[0] == _NEWLINE:
            self.crlf += 1
        if self.count_spaces:
            self.leading_spaces += self._leading_spaces(block, data)
        self.last = int(data[-1])
        self.started = True

    def _leading_spaces(self, block: bytes, data: np.ndarray) -> int:
        """Fields in `block` that start with a space (after a delimiter or a line start)."""
        starts = (data[:-1] == self.delimiter) | (data[:-1] == _NEWLINE)
        count = int(np.count_nonzero(starts & (data[1:] == _SPACE)))
        count += int(data[0] == _SPACE and self.last in (self.delimiter, _NEWLINE))
        if not self.started and block.startswith(codecs.BOM_UTF8 + b" "):
            count += 1  # the first field, after the byte order mark
        return count


@dataclass
class _Plan:
    """How the fast path reads a file: column names, stripping, and types per column."""

    names: list[str]
    strip: bool
    candidates: list[list[str]]  # per column, the types all its sample values parse as
    dtypes: list[str]  # per column, the type written
    decided: bool  # every column's type follows from the sample (no all-null column)

    @property
    def width(self) -> int:
        return len(self.names)


def ingest_plain(
    source: Path, out_path: Path, delimiter: str, header: bool, names: list[str] | None = None
) -> Outcome | None:
    """Read a delimited file without quotes the fast way (see the comment above).

    Returns:
        The outcome, or None when the file needs the Arrow reader; `out_path` may then
        hold a partial write, which the caller overwrites.

    Raises:
        InvalidDataError: the file is fine but has no data rows, or repeats a column name.
        OSError: the file cannot be read.
    """
    plan = _plan(source, read_sample(source), delimiter, header, names)
    if plan is None:
        return None
    raw = _RawScan(ord(delimiter), count_spaces=strips_spaces(delimiter) and not plan.strip)
    reader = threading.Thread(target=raw.run, args=(source,), name="forgeml-csv-scan")
    reader.start()
    base = pl.scan_csv(source, **_plain_options(plan, delimiter, header)).select(_cleaned(plan))
    # Counts by type, or {} when the strict write proved the guessed types; None: it failed.
    first = _write if plan.decided else _write_and_count
    try:
        counts = _try(lambda: first(base, plan, out_path))
    finally:
        reader.join()
    if raw.error is not None:
        raise raw.error
    if raw.quotes or raw.carriage_returns != raw.crlf or raw.leading_spaces:
        return None  # quotes, a lone CR (a line end for Arrow only), unstripped spaces
    if counts is None and plan.decided:  # a value that does not parse as its guessed type
        counts = _try(lambda: _write_and_count(base, plan, out_path))
    if counts is None:
        return None
    if counts and _final_dtypes(plan, counts) != plan.dtypes:
        plan.dtypes = _final_dtypes(plan, counts)
        _write(base, plan, out_path)
    rows = pl.scan_parquet(out_path).select(pl.len()).collect().item()
    if not _proven(raw, plan.width, rows, header):
        return None
    if rows == 0:
        raise _no_rows(source, 0)
    return Outcome(rows=rows, digest=raw.digest, bad=BadRows())


def _try(run: Callable[[], _T]) -> _T | None:
    """`run()`, or None when polars fails (a cast, bad UTF-8, a row with too many fields)."""
    try:
        return run()
    except pl.exceptions.PolarsError:
        return None


def _plan(
    source: Path, sample: bytes, delimiter: str, header: bool, given: list[str] | None
) -> _Plan | None:
    """Names, stripping and guessed types from the sample; None when it has quotes."""
    first, newline, _ = sample.partition(b"\n")
    if b'"' in sample or not delimiter.isascii() or not (newline or len(sample) < SAMPLE_BYTES):
        return None
    try:
        values = first.decode("utf-8").removeprefix("\ufeff").removesuffix("\r").split(delimiter)
    except UnicodeDecodeError:
        return None
    if len(values) < 2:  # a one-column file: no delimiter count can prove its rows
        return None
    if given is not None:
        names = given
    elif header:
        names = _header_names(values, source)
    else:
        names = [f"column_{i + 1}" for i in range(len(values))]
    scan = _RawScan(ord(delimiter))
    scan.feed(sample)
    plan = _Plan(names, strips_spaces(delimiter) and scan.leading_spaces > 0, [], [], True)
    rows = _try(lambda: pl.read_csv(sample, **_plain_options(plan, delimiter, header)))
    if rows is None:
        return None
    tally = _TypeTally(plan.width)
    tally.update(rows.select(_cleaned(plan)))
    plan.candidates, plan.dtypes = tally.candidates, tally.dtypes()
    # A column all null in the sample (still every candidate) is decided by the whole file.
    plan.decided = all(
        seen or not kept for kept, seen in zip(tally.candidates, tally.non_null, strict=True)
    )
    return plan


def _plain_options(plan: _Plan, delimiter: str, header: bool) -> dict[str, Any]:
    return {
        "has_header": False,
        "skip_rows": int(header),
        "separator": delimiter,
        "quote_char": None,
        "schema": {f"f{i}": pl.String for i in range(plan.width)},
    }


def _cleaned(plan: _Plan) -> list[pl.Expr]:
    """Each column as the Arrow path leaves it: leading spaces stripped, empty is null."""
    names = [f"f{i}" for i in range(plan.width)]
    if not plan.strip:
        return [pl.col(name) for name in names]  # polars reads an empty field as null
    return [pl.col(n).str.strip_chars_start(" ").replace("", None).alias(n) for n in names]


def _typed(base: pl.LazyFrame, plan: _Plan, strict: bool) -> pl.LazyFrame:
    """The rows cast to `plan.dtypes`; when not `strict`, a value that does not parse is null."""
    return base.select(
        _cast(pl.col(f"f{i}"), dtype, strict).alias(name)
        for i, (name, dtype) in enumerate(zip(plan.names, plan.dtypes, strict=True))
    )


def _write(base: pl.LazyFrame, plan: _Plan, out_path: Path) -> dict[str, int]:
    """Write the rows cast strictly to `plan.dtypes` (a value that does not parse fails)."""
    pl.collect_all([sink_flat(_typed(base, plan, strict=True), out_path)], engine="streaming")
    return {}


def _write_and_count(base: pl.LazyFrame, plan: _Plan, out_path: Path) -> dict[str, int]:
    """Write leniently cast rows while counting, per column in doubt, what parses as what."""
    exprs = [pl.len().alias("rows")]
    for i, kept in enumerate(plan.candidates):
        if kept:
            column = pl.col(f"f{i}")
            exprs.append(column.count().alias(f"n{i}"))
            exprs += [_parses(column, dtype).sum().alias(f"{dtype}{i}") for dtype in kept]
    sink = sink_flat(_typed(base, plan, strict=False), out_path)
    counts = pl.collect_all([sink, base.select(exprs)], engine="streaming")[1]
    return dict(counts.row(0, named=True))


def _final_dtypes(plan: _Plan, counts: dict[str, int]) -> list[str]:
    """The first type every value of a column parses as, over the whole file."""
    dtypes = []
    for i, kept in enumerate(plan.candidates):
        seen = counts.get(f"n{i}", 0)
        parsed = [dtype for dtype in kept if counts[f"{dtype}{i}"] == seen]
        dtypes.append(parsed[0] if parsed and seen else "String")
    return dtypes


def _proven(raw: _RawScan, width: int, rows: int, header: bool) -> bool:
    """Whether every line has exactly `width` fields, so that no row was padded or lost.

    Polars fails on a line with too many fields, so equal totals mean that every line
    (blank ones included) has exactly width - 1 delimiters.
    """
    lines = raw.lines()
    return raw.delimiters == lines * (width - 1) and rows == lines - int(header)
