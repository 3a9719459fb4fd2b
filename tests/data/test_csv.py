from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from forgeml.core.errors import BadRowsError, InvalidDataError
from forgeml.data._csv import SAMPLE_BYTES, ingest_arrow, ingest_plain

# Enough rows that the last one lies beyond the 64 KiB sample the fast path guesses from.
FILLER_ROWS = 20_000


def filler(row: str = "{i},x{i},{f}") -> str:
    lines = "".join(row.format(i=i, f=i / 4) + "\n" for i in range(FILLER_ROWS))
    assert len(lines) > SAMPLE_BYTES
    return lines


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def both_ways(
    tmp_path: Path, content: str | bytes, delimiter: str = ",", header: bool = True
) -> tuple[bool, bytes, pl.DataFrame]:
    source = write(tmp_path / "in.csv", content)
    arrow = ingest_arrow(source, tmp_path / "arrow.parquet", delimiter, header, "fail")
    fast = ingest_plain(source, tmp_path / "fast.parquet", delimiter, header)
    expected = (tmp_path / "arrow.parquet").read_bytes()
    if fast is not None:
        assert (fast.rows, fast.digest, fast.bad.count) == (arrow.rows, arrow.digest, 0)
        assert (tmp_path / "fast.parquet").read_bytes() == expected
    return fast is not None, expected, pl.read_parquet(tmp_path / "arrow.parquet")


@pytest.mark.parametrize(
    ("content", "dtypes"),
    [
        ("a,b,c\n1,x,0.5\n2,y,1\n", ["Int64", "String", "Float64"]),
        ("a,b\r\n1,x\r\n2,\r\n", ["Int64", "String"]),
        ("a,b\n1,x\n2,y", ["Int64", "String"]),
        ("a, b, c\n1, x y,  \n 2,, z\n", ["Int64", "String", "String"]),
        ("a,b\nTrue,1\nfalse,2\n", ["Boolean", "Int64"]),
        ("a,b\n,1\n,2\n", ["String", "Int64"]),
        ("\ufeffa,b\n1,2\n", ["Int64", "Int64"]),
        ("a,a b,\n1,2,3\n", ["Int64", "Int64", "Int64"]),
        ("a,b\nnan,inf\n1e3,-2\n", ["Float64", "Float64"]),
        ("a,b\n" + filler("{i},{i}"), ["Int64", "Int64"]),
        ("a,b,c\n" + filler() + "1.5,x,abc\n", ["Float64", "String", "String"]),
        ("a,b,c\n" + filler() + "abc,x,1\n", ["String", "String", "Float64"]),
        ("a,b\n" + filler("{i},") + "1,7\n", ["Int64", "Int64"]),
        ("a,b\n" + filler("{i},true") + "1,maybe\n", ["Int64", "String"]),
    ],
    ids=[
        "types",
        "crlf",
        "no final newline",
        "leading spaces",
        "booleans",
        "empty column",
        "byte order mark",
        "header names",
        "special floats",
        "large",
        "late float and text",
        "late text",
        "late first value",
        "late non-boolean",
    ],
)
def test_fast_path_writes_the_same_bytes_as_arrow(
    tmp_path: Path, content: str, dtypes: list[str]
) -> None:
    fast, _, frame = both_ways(tmp_path, content)
    assert fast
    assert [str(dtype) for dtype in frame.dtypes] == dtypes


@pytest.mark.parametrize(
    ("content", "delimiter", "header"),
    [
        ("1;a\n2;b\n", ";", False),
        ("\ufeff1;a\n2;b\n", ";", False),
        ("x\ty\n a\t b\n", "\t", True),
        ("x|y\n a| b\n", "|", True),
    ],
)
def test_fast_path_dialects(tmp_path: Path, content: str, delimiter: str, header: bool) -> None:
    fast, _, _ = both_ways(tmp_path, content, delimiter, header)
    assert fast


@pytest.mark.parametrize(
    "content",
    [
        'a,b\n1,"x,y"\n',
        "a,b\n" + filler("{i},x") + '3,"q"\n',
        "a,b\n" + filler("{i},x") + "3\n",
        "a,b\n" + filler("{i},x") + "\n4,y\n",
        "a,b\n" + filler("{i},x") + "3,x\r4,y\n",
        "a,b\n" + filler("{i},x") + "2, y\n",
        "a\n1\n2\n",
        "a,b\n\n1,2\n",
    ],
    ids=[
        "quotes",
        "late quotes",
        "late short row",
        "late blank line",
        "lone carriage return",
        "late leading space",
        "one column",
        "blank line",
    ],
)
def test_fast_path_leaves_other_files_to_arrow(tmp_path: Path, content: str) -> None:
    source = write(tmp_path / "in.csv", content)
    assert ingest_plain(source, tmp_path / "fast.parquet", ",", True) is None


@pytest.mark.parametrize(("tail", "line"), [("3\n", FILLER_ROWS + 2), ("3,4,5\n", FILLER_ROWS + 2)])
def test_late_bad_rows_keep_their_line_numbers(tmp_path: Path, tail: str, line: int) -> None:
    from forgeml.data._csv import ingest_delimited

    source = write(tmp_path / "in.csv", "a,b\n" + filler("{i},x") + tail + "9,z\n")
    with pytest.raises(BadRowsError) as caught:
        ingest_delimited(source, tmp_path / "out.parquet", ",", True, "fail")
    assert caught.value.line_numbers == [line]
    outcome = ingest_delimited(source, tmp_path / "out.parquet", ",", True, "skip")
    assert (outcome.rows, outcome.bad.lines) == (FILLER_ROWS + 1, [line])


def test_late_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    from forgeml.data._csv import ingest_delimited

    source = write(tmp_path / "in.csv", b"a,b\n" + filler("{i},x").encode() + b"1,\xff\n")
    with pytest.raises(InvalidDataError) as caught:
        ingest_delimited(source, tmp_path / "out.parquet", ",", True, "fail")
    message = str(caught.value)
    assert f"not valid UTF-8 text at line {FILLER_ROWS + 2};" in message
    assert message.endswith(".") and re.search(r"\.\s+[A-Z]", message) is None


def test_fast_path_header_errors(tmp_path: Path) -> None:
    source = write(tmp_path / "in.csv", "a,b,a\n1,2,3\n")
    with pytest.raises(InvalidDataError, match=r"column name 'a' twice \(columns 1 and 3\)"):
        ingest_plain(source, tmp_path / "out.parquet", ",", True)
    empty = write(tmp_path / "h.csv", "a,b\n")
    with pytest.raises(InvalidDataError, match="has no rows; add data rows below the header"):
        ingest_plain(empty, tmp_path / "out.parquet", ",", True)
