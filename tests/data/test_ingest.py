from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

import forgeml
from forgeml.core.errors import BadRowsError, InvalidDataError
from forgeml.data.ingest import IngestOptions, IngestResult, ingest


def run(tmp_path: Path, source: Path, **options: object) -> tuple[IngestResult, pl.DataFrame]:
    out = tmp_path / "out.parquet"
    result = ingest(source, out, IngestOptions.model_validate(options))
    return result, pl.read_parquet(out)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def assert_one_sentence(message: str) -> None:
    assert message.endswith("."), message
    assert "\n" not in message, message
    assert re.search(r"\.\s+[A-Z]", message) is None, message


def make_images(root: Path) -> dict[str, tuple[int, int]]:
    sizes = {"cat/1.png": (4, 3), "cat/2.png": (5, 5), "dog/a.png": (2, 7)}
    for relative, size in sizes.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, (200, 10, 10)).save(root / relative)
    return sizes


# --- real data ---------------------------------------------------------------------------


def test_adult_data_types_and_markers(tmp_path: Path, shared_data: Path) -> None:
    result, frame = run(tmp_path, shared_data / "adult" / "adult.data")
    assert (result.rows, frame.height, frame.width) == (32_561, 32_561, 15)
    assert result.format == "csv"
    assert (result.resolved.delimiter, result.resolved.header) == (",", True)
    assert result.columns["age"] == "Int64"
    assert result.columns["fnlwgt"] == "Int64"
    assert result.columns["workclass"] == "String"
    assert frame.columns[:3] == ["age", "workclass", "fnlwgt"]
    assert "?" in frame["workclass"].to_list()
    assert frame.row(0)[:4] == (39, "State-gov", 77516, "Bachelors")
    assert set(frame["Y"].unique()) == {"<=50K", ">50K"}
    data = (shared_data / "adult" / "adult.data").read_bytes()
    assert result.source_digest == hashlib.sha256(data).hexdigest()
    assert result.bad_row_count == 0


@pytest.mark.parametrize("name", ["adult.data", "adult.test"])
def test_the_shipped_adult_files_hold_the_shared_data(
    tmp_path: Path, shared_data: Path, name: str
) -> None:
    shipped = Path(forgeml.__file__).parent / "data" / "demo" / f"{name}.gz"

    ingested, _ = run(tmp_path, shipped)

    original = hashlib.sha256((shared_data / "adult" / name).read_bytes()).hexdigest()
    assert ingested.source_digest == original


def test_adult_test_file(tmp_path: Path, shared_data: Path) -> None:
    result, frame = run(tmp_path, shared_data / "adult" / "adult.test")
    assert result.rows == 16_281
    assert result.columns["age"] == "Int64"
    assert set(frame["Y"].unique()) == {"<=50K.", ">50K."}


@pytest.mark.parametrize(
    ("name", "rows", "columns"),
    [("train.tsv", 67_349, ["label", "sentence"]), ("dev.tsv", 872, ["label", "content"])],
)
def test_sst2_every_row_survives(
    tmp_path: Path, shared_data: Path, name: str, rows: int, columns: list[str]
) -> None:
    source = shared_data / "sst2" / name
    result, frame = run(tmp_path, source)
    assert (result.rows, frame.columns, result.format) == (rows, columns, "tsv")
    assert result.columns == {columns[0]: "Int64", columns[1]: "String"}
    lines = source.read_text(encoding="utf-8").splitlines()[1:]
    assert frame[columns[1]].to_list() == [line.split("\t", 1)[1] for line in lines]
    assert frame[columns[0]].to_list() == [int(line.split("\t", 1)[0]) for line in lines]


def test_replaying_resolved_options_gives_identical_bytes(
    tmp_path: Path, shared_data: Path
) -> None:
    source = shared_data / "adult" / "adult.data"
    first = ingest(source, tmp_path / "a.parquet", IngestOptions())
    again = ingest(source, tmp_path / "b.parquet", first.resolved)
    assert again.resolved == first.resolved
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


# --- CSV / TSV ---------------------------------------------------------------------------


def test_csv_types_nulls_and_spaces(tmp_path: Path) -> None:
    source = write(
        tmp_path / "t.csv",
        "i, f, b, s, empty, marker\n1, 1.5, true, x, , ?\n-2, 3, False, y z, , NA\n",
    )
    result, frame = run(tmp_path, source)
    assert result.columns == {
        "i": "Int64",
        "f": "Float64",
        "b": "Boolean",
        "s": "String",
        "empty": "String",
        "marker": "String",
    }
    assert frame.rows() == [(1, 1.5, True, "x", None, "?"), (-2, 3.0, False, "y z", None, "NA")]


@pytest.mark.parametrize(
    ("late", "dtype", "first", "last"),
    [("abc", "String", "0", "abc"), ("1.5", "Float64", 0.0, 1.5), ("7", "Int64", 0, 7)],
)
def test_type_inference_covers_the_whole_file(
    tmp_path: Path, late: str, dtype: str, first: object, last: object
) -> None:
    lines = [f"{i},{i % 7}" for i in range(150_000)]
    source = write(tmp_path / "late.csv", "n,m\n" + "\n".join(lines) + f"\n{late},1\n")
    result, frame = run(tmp_path, source)
    assert result.columns == {"n": dtype, "m": "Int64"}
    assert frame.height == 150_001
    assert (frame["n"][0], frame["n"][-1]) == (first, last)


def test_tsv_keeps_quotes_inside_fields(tmp_path: Path) -> None:
    source = write(
        tmp_path / "q.tsv",
        'label\ttext\n1\tit \'s "good" , fine\n0\t"quoted\tfield"\n1\ta, b; c\n',
    )
    _, frame = run(tmp_path, source)
    assert frame["text"].to_list() == ['it \'s "good" , fine', "quoted\tfield", "a, b; c"]


def test_sniffs_semicolons_and_headerless_files(tmp_path: Path) -> None:
    source = write(tmp_path / "s.csv", "1;alpha\n2;beta\n")
    result, frame = run(tmp_path, source)
    assert (result.resolved.delimiter, result.resolved.header) == (";", False)
    assert frame.columns == ["column_1", "column_2"]
    assert frame.rows() == [(1, "alpha"), (2, "beta")]


def test_delimiter_and_header_overrides(tmp_path: Path) -> None:
    source = write(tmp_path / "p.txt", "a|b\nx|1\n")
    result, frame = run(tmp_path, source, format="csv", delimiter="|", header=False)
    assert (result.resolved.format, result.resolved.delimiter) == ("csv", "|")
    assert frame.rows() == [("a", "b"), ("x", "1")]


def test_empty_header_name_and_bom(tmp_path: Path) -> None:
    source = write(tmp_path / "b.csv", b"\xef\xbb\xbf,name\n0,x\n")
    _, frame = run(tmp_path, source)
    assert frame.columns == ["column_1", "name"]


def test_bad_rows_fail_names_lines_and_count(tmp_path: Path) -> None:
    source = write(tmp_path / "bad.csv", "a,b\n1,2\n3\n4,5\n6,7,8\n9,10\n")
    with pytest.raises(BadRowsError) as caught:
        run(tmp_path, source)
    assert caught.value.line_numbers == [3, 5]
    assert "2 rows with the wrong number of fields (line 3, line 5)" in str(caught.value)
    assert_one_sentence(str(caught.value))


def test_bad_rows_skip_reports_physical_lines(tmp_path: Path) -> None:
    source = write(tmp_path / "bad.csv", 'a,b\n\n1,"two\nlines"\n3\n\n4,5\n6,7,8\n9,10\n')
    result, frame = run(tmp_path, source, on_bad_rows="skip")
    assert (result.bad_rows, result.bad_row_count) == ([5, 8], 2)
    assert frame.rows() == [(1, "two\nlines"), (4, "5"), (9, "10")]


def test_bad_rows_list_is_capped(tmp_path: Path) -> None:
    source = write(tmp_path / "many.csv", "a,b\n" + "1\n" * 1200 + "1,2\n")
    result, frame = run(tmp_path, source, on_bad_rows="skip")
    assert result.bad_row_count == 1200
    assert result.bad_rows == list(range(2, 1002))
    assert frame.height == 1


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    source = write(tmp_path / "enc.csv", b"a,b\n1,x\n2,y\n3,\xff\n4,z\n")
    with pytest.raises(InvalidDataError, match="not valid UTF-8 text at line 4") as caught:
        run(tmp_path, source)
    assert_one_sentence(str(caught.value))


def test_csv_digest_is_sha256_of_the_file(tmp_path: Path) -> None:
    source = write(tmp_path / "d.csv", "a\n1\n2\n")
    result, _ = run(tmp_path, source)
    assert result.source_digest == hashlib.sha256(source.read_bytes()).hexdigest()


# --- column names ----------------------------------------------------------------------

QUOTED_HEADERLESS = 'positive,"a fine, warm film"\nnegative,"dull"\n'  # read by the Arrow path


@pytest.mark.parametrize(
    "content", ["positive,a fine film\nnegative,dull\n", QUOTED_HEADERLESS], ids=["fast", "arrow"]
)
def test_names_name_the_columns_of_a_headerless_file(tmp_path: Path, content: str) -> None:
    # all text, so the first row would be sniffed as a header: names say there is none
    source = write(tmp_path / "reviews.csv", content)

    result, frame = run(tmp_path, source, names="label,text")

    assert frame.columns == ["label", "text"]
    assert frame["label"].to_list() == ["positive", "negative"]
    assert (result.resolved.header, result.resolved.names) == (False, ["label", "text"])


def test_names_with_header_replace_the_header(tmp_path: Path) -> None:
    source = write(tmp_path / "h.csv", "a,a\n1,2\n")  # a repeated header name is no matter

    result, frame = run(tmp_path, source, names=["x", "y"], header=True)

    assert frame.columns == ["x", "y"]
    assert frame.rows() == [(1, 2)]
    assert result.rows == 1


def test_named_ingest_replays_to_identical_bytes(tmp_path: Path) -> None:
    source = write(tmp_path / "n.tsv", "1\tgood\n0\tbad\n")
    first, _ = run(tmp_path, source, names=["label", "text"])

    again = ingest(source, tmp_path / "again.parquet", first.resolved)

    assert again.columns == {"label": "Int64", "text": "String"}
    assert (tmp_path / "again.parquet").read_bytes() == (tmp_path / "out.parquet").read_bytes()


@pytest.mark.parametrize(
    ("names", "pattern"),
    [
        ("a,b,c", "names gives 3 column names \\(a, b, c\\) but '.*' has 2 columns"),
        ("a", "names gives 1 column names"),
    ],
)
def test_names_of_another_count_are_one_sentence(tmp_path: Path, names: str, pattern: str) -> None:
    source = write(tmp_path / "two.csv", "1,x\n2,y\n")
    with pytest.raises(InvalidDataError, match=pattern) as caught:
        run(tmp_path, source, names=names)
    assert_one_sentence(str(caught.value))
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize(
    ("names", "message"),
    [("a,a", "'a' is given twice"), ("a,,b", "non-empty"), ([], "non-empty")],
)
def test_names_must_be_distinct_and_non_empty(names: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IngestOptions.model_validate({"names": names})


def test_names_apply_to_delimited_files_only(tmp_path: Path) -> None:
    source = write(tmp_path / "r.jsonl", '{"a": 1}\n')
    with pytest.raises(InvalidDataError, match="names only applies to CSV/TSV") as caught:
        run(tmp_path, source, names="x")
    assert_one_sentence(str(caught.value))


# --- compressed files --------------------------------------------------------------------


def _compress(path: Path, codec: str) -> Path:
    import pyarrow as pa

    suffix = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}[codec]
    target = path.with_name(path.name + suffix)
    with pa.output_stream(str(target), compression=codec) as stream:
        stream.write(path.read_bytes())
    return target


CSV_WITH_QUOTES = 'id,name,score\n1,"Smith, J",0.5\n2,Lee,?\n' + "".join(
    f"{i},n{i},{i / 8}\n" for i in range(3, 20_000)
)


@pytest.mark.parametrize("codec", ["gzip", "zstd", "bz2"])
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("plain.csv", "a,b\n" + "".join(f"{i},x{i}\n" for i in range(30_000))),
        ("quoted.csv", CSV_WITH_QUOTES),
        ("noext.data", "a\tb\n1\t2\n"),
        ("rows.jsonl", "".join(f'{{"i": {i}, "s": "v{i}"}}\n' for i in range(5_000))),
    ],
)
def test_a_compressed_file_ingests_exactly_as_the_plain_one(
    tmp_path: Path, codec: str, name: str, content: str
) -> None:
    plain = write(tmp_path / name, content)
    expected, _ = run(tmp_path, plain)
    expected_bytes = (tmp_path / "out.parquet").read_bytes()

    result, _ = run(tmp_path, _compress(plain, codec))

    assert (tmp_path / "out.parquet").read_bytes() == expected_bytes
    assert result.source_digest == expected.source_digest  # the digest of what it holds
    assert (result.format, result.resolved) == (expected.format, expected.resolved)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_the_compressed_reader_streams_with_bounded_memory(tmp_path: Path) -> None:
    digits = np.random.default_rng(0).integers(0, 16, 64 * 2**20, dtype=np.uint8)
    hex_text = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[digits]  # compresses ~2x
    plain = write(tmp_path / "big.csv", hex_text.tobytes())
    compressed = _compress(plain, "gzip")
    plain.unlink()
    script = textwrap.dedent(
        f"""
        import resource
        from pathlib import Path
        from forgeml.data._compression import open_source
        stream = open_source(Path({str(compressed)!r}))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        total = sum(len(block) for block in iter(lambda: stream.read(1 << 20), b""))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(total, (after - before) // 1024)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(forgeml.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    ).stdout.split()

    assert int(out[0]) == 64 * 2**20
    assert int(out[1]) < 16  # MB more at peak for 64 MB read: blocks, not the file


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_a_truncated_compressed_file_is_one_sentence(tmp_path: Path, codec: str) -> None:
    whole = _compress(
        write(tmp_path / "t.csv", "a,b\n" + "".join(f"{i},{i}\n" for i in range(10**5))), codec
    )
    truncated = write(tmp_path / ("cut" + "".join(whole.suffixes)), whole.read_bytes()[:20_000])
    with pytest.raises(InvalidDataError, match=f"is not a complete {codec} file") as caught:
        run(tmp_path, truncated)
    assert_one_sentence(str(caught.value))


def test_an_empty_compressed_file_has_no_rows(tmp_path: Path) -> None:
    empty = _compress(write(tmp_path / "e.csv", b""), "gzip")
    with pytest.raises(InvalidDataError, match="has no rows: the file is empty"):
        run(tmp_path, empty)


def test_compressed_parquet_is_refused(tmp_path: Path) -> None:
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "p.parquet")
    with pytest.raises(InvalidDataError, match="only CSV, TSV and JSON Lines are read") as caught:
        run(tmp_path, _compress(tmp_path / "p.parquet", "gzip"))
    assert_one_sentence(str(caught.value))


# --- JSON Lines ------------------------------------------------------------------------


def test_jsonl_nested_and_widened_types(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "x": 1, "s": 1, "tags": ["a"], "meta": {"k": 1}},
        {"id": 2, "x": 2.5, "s": "two", "tags": [], "meta": {"k": 2}},
        {"id": 3, "extra": True},
    ]
    source = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    result, frame = run(tmp_path, source)
    assert result.format == "jsonl"
    assert (result.resolved.delimiter, result.resolved.header) == (None, None)
    assert result.columns == {
        "id": "Int64",
        "x": "Float64",
        "s": "String",
        "tags": "List(String)",
        "meta": "Struct({'k': Int64})",
        "extra": "Boolean",
    }
    assert frame["x"].to_list() == [1.0, 2.5, None]
    assert frame["s"].to_list() == ["1", "two", None]
    assert frame["meta"].to_list() == [{"k": 1}, {"k": 2}, None]


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_jsonl_bad_lines(tmp_path: Path, mode: str) -> None:
    source = write(tmp_path / "b.jsonl", '{"a": 1}\n\n{"a": 2\n[1]\n{"a": 3}\n7\n')
    if mode == "fail":
        with pytest.raises(BadRowsError, match=r"line 3, line 4, line 6") as caught:
            run(tmp_path, source)
        assert caught.value.line_numbers == [3, 4, 6]
        assert_one_sentence(str(caught.value))
    else:
        result, frame = run(tmp_path, source, on_bad_rows="skip")
        assert (result.bad_rows, result.bad_row_count) == ([3, 4, 6], 3)
        assert frame["a"].to_list() == [1, 3]


def test_jsonl_incompatible_types_name_the_line(tmp_path: Path) -> None:
    source = write(tmp_path / "c.jsonl", '{"a": 1}\n{"a": 2}\n{"a": [3]}\n')
    with pytest.raises(InvalidDataError, match="line 3") as caught:
        run(tmp_path, source)
    assert_one_sentence(str(caught.value))


# --- Parquet ---------------------------------------------------------------------------


def test_parquet_round_trip(tmp_path: Path) -> None:
    original = pl.DataFrame({"n": [1, 2, None], "s": ["a", None, "c"], "l": [[1], [], None]})
    source = tmp_path / "in.parquet"
    original.write_parquet(source)
    result, frame = run(tmp_path, source)
    assert result.format == "parquet"
    assert result.columns == {"n": "Int64", "s": "String", "l": "List(Int64)"}
    assert frame.equals(original)
    assert result.source_digest == hashlib.sha256(source.read_bytes()).hexdigest()


# --- folders ---------------------------------------------------------------------------


def test_image_folder(tmp_path: Path) -> None:
    root = tmp_path / "images"
    sizes = make_images(root)
    write(root / "README.md", "not an image row")
    result, frame = run(tmp_path, root)
    assert result.format == "images"
    assert result.columns == {
        "image": "Binary",
        "label": "String",
        "path": "String",
        "width": "Int64",
        "height": "Int64",
    }
    assert frame["path"].to_list() == sorted(sizes)
    assert frame["label"].to_list() == ["cat", "cat", "dog"]
    assert [(w, h) for w, h in frame.select("width", "height").rows()] == list(sizes.values())
    assert frame["image"][2] == (root / "dog/a.png").read_bytes()


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_undecodable_image_is_a_bad_row(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "images"
    make_images(root)
    write(root / "cat/15.png", b"\x89PNG\r\n\x1a\nnot really")
    if mode == "fail":
        with pytest.raises(BadRowsError, match=r"cat/15\.png") as caught:
            run(tmp_path, root, format="images")
        assert caught.value.line_numbers == [2]
        assert_one_sentence(str(caught.value))
    else:
        result, frame = run(tmp_path, root, format="images", on_bad_rows="skip")
        assert (result.bad_rows, result.bad_row_count) == ([2], 1)
        assert frame["path"].to_list() == ["cat/1.png", "cat/2.png", "dog/a.png"]


def test_text_folder_with_labels(tmp_path: Path) -> None:
    root = tmp_path / "texts"
    write(root / "pos/b.txt", "good film\n")
    write(root / "pos/a.txt", "great")
    write(root / "neg/z.txt", "dull ☹")
    write(root / ".hidden/x.txt", "ignored")
    result, frame = run(tmp_path, root)
    assert result.format == "text"
    assert result.columns == {"path": "String", "text": "String", "label": "String"}
    assert frame.rows() == [
        ("neg/z.txt", "dull ☹", "neg"),
        ("pos/a.txt", "great", "pos"),
        ("pos/b.txt", "good film\n", "pos"),
    ]


def test_text_folder_without_labels(tmp_path: Path) -> None:
    root = tmp_path / "texts"
    write(root / "one.txt", "1")
    write(root / "two.md", "2")
    _, frame = run(tmp_path, root, format="text")
    assert frame.columns == ["path", "text"]
    assert frame["text"].to_list() == ["1", "2"]


def test_text_folder_invalid_utf8_names_file_and_offset(tmp_path: Path) -> None:
    root = tmp_path / "texts"
    write(root / "a/ok.txt", "fine")
    write(root / "b/bad.txt", b"abc\xfe")
    with pytest.raises(InvalidDataError, match=r"'b/bad.txt'.*byte offset 3") as caught:
        run(tmp_path, root)
    assert_one_sentence(str(caught.value))


def test_moving_a_file_between_classes_changes_the_digest(tmp_path: Path) -> None:
    root = tmp_path / "texts"
    write(root / "a/x.txt", "same")
    first = ingest(root, tmp_path / "1.parquet", IngestOptions())
    (root / "b").mkdir()
    (root / "a/x.txt").rename(root / "b/x.txt")
    second = ingest(root, tmp_path / "2.parquet", IngestOptions())
    assert first.source_digest != second.source_digest


# --- detection and determinism -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("data.data", "a, b\n1, 2\n", "csv"),
        ("data.txt", "a\tb\n1\t2\n", "tsv"),
        ("records", '{"a": 1}\n', "jsonl"),
        ("table.dat", None, "parquet"),
    ],
)
def test_auto_detection_by_content(
    tmp_path: Path, name: str, content: str | None, fmt: str
) -> None:
    source = tmp_path / name
    if content is None:
        pl.DataFrame({"a": [1]}).write_parquet(source)
    else:
        write(source, content)
    result, frame = run(tmp_path, source)
    assert (result.format, result.resolved.format, frame.height) == (fmt, fmt, 1)


def _each_format(root: Path, fmt: str) -> Path:
    if fmt == "csv":
        return write(root / "s.csv", "a,b\n1,x\n2,y\n")
    if fmt == "jsonl":
        return write(root / "s.jsonl", '{"a": 1, "b": [1]}\n{"a": 2}\n')
    if fmt == "parquet":
        pl.DataFrame({"a": [1, 2]}).write_parquet(root / "s.parquet")
        return root / "s.parquet"
    if fmt == "images":
        make_images(root / "images")
        return root / "images"
    write(root / "texts/a/1.txt", "one")
    return root / "texts"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "images", "text"])
def test_same_source_twice_gives_identical_bytes(tmp_path: Path, fmt: str) -> None:
    source = _each_format(tmp_path, fmt)
    first = ingest(source, tmp_path / "1.parquet", IngestOptions())
    second = ingest(source, tmp_path / "2.parquet", IngestOptions())
    assert first.format == fmt
    assert first == second
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


# --- errors ------------------------------------------------------------------------------


def _error_case(root: Path, case: str) -> tuple[Path, dict[str, object]]:
    if case == "missing":
        return root / "nope.csv", {}
    if case == "zero bytes":
        return write(root / "e.csv", b""), {}
    if case == "header only":
        return write(root / "h.csv", "a,b\n"), {}
    if case == "binary":
        return write(root / "x.xyz", bytes(range(256)) * 4), {}
    if case == "prose":
        return write(root / "x.xyz", "just some words\nand more words\n"), {}
    if case == "empty folder":
        (root / "empty").mkdir()
        return root / "empty", {}
    if case == "no class folders":
        Image.new("RGB", (2, 2)).save(root / "flat.png")
        return root, {"format": "images"}
    if case == "duplicate header":
        return write(root / "d.csv", "a,b,a\n1,2,3\n"), {}
    if case == "long delimiter":
        return write(root / "l.csv", "a;;b\n1;;2\n"), {"delimiter": ";;"}
    if case == "folder as csv":
        return root, {"format": "csv"}
    return write(root / "f.csv", "a\n1\n"), {"format": "images"}


@pytest.mark.parametrize(
    ("case", "pattern"),
    [
        ("missing", "does not exist"),
        ("zero bytes", "has no rows"),
        ("header only", "has no rows"),
        ("binary", "binary file of unknown format"),
        ("prose", "no recognisable delimiter"),
        ("empty folder", "is empty"),
        ("no class folders", "has no class sub-folders"),
        ("duplicate header", "column name 'a' twice \\(columns 1 and 3\\)"),
        ("long delimiter", "not a single character"),
        ("folder as csv", "is a folder, but format 'csv' reads one file"),
        ("file as images", "is a file, but format 'images' reads a folder"),
    ],
)
def test_errors_are_one_clear_sentence(tmp_path: Path, case: str, pattern: str) -> None:
    source, options = _error_case(tmp_path, case)
    with pytest.raises(InvalidDataError, match=pattern) as caught:
        run(tmp_path, source, **options)
    assert type(caught.value) is InvalidDataError
    assert_one_sentence(str(caught.value))


def test_options_reject_unknown_keys() -> None:
    with pytest.raises(ValueError, match="sep"):
        IngestOptions.model_validate({"sep": ","})
    assert all(field.description for field in IngestOptions.model_fields.values())


# --- scale -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_large_csv_streams_with_bounded_memory(tmp_path: Path) -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon"])
    columns: dict[str, np.ndarray] = {f"i{k}": rng.integers(0, 10**6, n) for k in range(5)}
    columns |= {f"f{k}": rng.normal(0, 1e3, n).round(4) for k in range(4)}
    columns |= {f"c{k}": words[rng.integers(0, 5, n)] for k in range(5)}
    frame = pl.DataFrame(columns).with_columns(
        t=pl.concat_str(["c0", "c1", "c2"], separator=" ") + " the quick brown fox"
    )
    source = tmp_path / "big.csv"
    frame.write_csv(source)
    del frame, columns
    # A fresh process, so that its peak RSS is the ingest's alone (Linux only: /proc).
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from forgeml.data.ingest import IngestOptions, ingest
        start = time.perf_counter()
        result = ingest(Path({str(source)!r}), Path({str(tmp_path / "out.parquet")!r}),
                        IngestOptions())
        seconds = time.perf_counter() - start
        # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec.
        status = Path("/proc/self/status").read_text()
        peak = int(status.split("VmHWM:")[1].split()[0]) * 1024
        print(result.rows, result.columns["i0"], result.columns["t"], peak, seconds)
        """
    )
    package_root = Path(forgeml.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    rows, int_type, text_type, peak, seconds = done.stdout.split()
    assert (int(rows), int_type, text_type) == (n, "Int64", "String")
    assert int(peak) < 3 * source.stat().st_size, (peak, source.stat().st_size, seconds)
