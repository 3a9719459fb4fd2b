from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data._frame import SPLIT_COLUMN
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.data.conftest import (
    edit_recipe,
    leftover_temp_files,
    snapshot_store,
    write_table_csv,
)

# BUG (tests/data/test_query.py::test_queries_raise_no_deprecation_warning): run_query
# calls duckdb's deprecated fetch_arrow_table(); ignored so the CLI behaviour is checked.

Cli = Callable[..., CliResult]


@pytest.fixture
def populated(cli: Cli, tmp_path: Path, small_csv: Path) -> Cli:
    """small@v1 (120 rows), small@v2 (60 other rows), small@v3 = split of v2."""
    assert_ok(cli("data", "add", "small", small_csv))
    assert_ok(cli("data", "add", "small", write_table_csv(tmp_path / "v2.csv", 60, offset=500)))
    assert_ok(cli("data", "split", "small@v2", "--stratify", "label", "--seed", "4"))
    return cli


def version(workspace: Workspace, ref: str) -> catalog.DatasetVersion:
    with workspace.store.session() as session:
        return catalog.resolve(session, ref)


def test_init_creates_the_database_and_artifact_store(cli: Cli, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert not home.exists()

    result = cli("init")

    assert_ok(result)
    assert (home / "forgeml.db").is_file()
    assert (home / "artifacts").is_dir()
    assert "forgeml home:" in result.stdout
    assert_ok(cli("init"))


def test_add_reports_new_and_identical_content(cli: Cli, small_csv: Path) -> None:
    first = json_out(cli("data", "add", "small", small_csv, "--json"))
    again = json_out(cli("data", "add", "small", small_csv, "--json"))
    human = cli("data", "add", "small", small_csv)

    assert (first["ref"], first["created"], first["rows"]) == ("small@v1", True, 120)
    assert first["op"] == "ingest"
    assert first["parents"] == []
    assert first["report"]["bad_row_count"] == 0
    assert (again["ref"], again["created"], again["digest"]) == ("small@v1", False, first["digest"])
    assert_ok(human)
    assert "unchanged: identical content is small@v1" in human.stdout


def check_list(out: Any) -> None:
    assert [(item["dataset"], item["ref"], item["rows"]) for item in out] == [
        ("small", "small@v3", 60)
    ]


def check_versions(out: Any) -> None:
    assert [(item["ref"], item["op"], item["parents"]) for item in out] == [
        ("small@v1", "ingest", []),
        ("small@v2", "ingest", []),
        ("small@v3", "split", ["small@v2"]),
    ]


def check_show(out: Any) -> None:
    assert out["ref"] == "small@v2"
    assert out["children"] == ["small@v3"]
    assert out["schema"]["age"] == "Int64"
    assert out["recipe"]["op"] == "ingest"
    assert out["profile"]["rows"] == 60
    assert out["profile"]["column_stats"]["age"]["nulls"] == 0


def check_head(out: Any) -> None:
    assert len(out) == 3
    assert {row[SPLIT_COLUMN] for row in out} == {"test"}
    assert set(out[0]) == {"id", "age", "score", "city", "email", "label", SPLIT_COLUMN}


def check_diff(out: Any) -> None:
    assert (out["from"], out["to"]) == ("small@v1", "small@v3")
    assert out["rows"] == {"before": 120, "after": 60, "change": -60}
    assert out["schema"]["added"] == {SPLIT_COLUMN: out["schema"]["added"][SPLIT_COLUMN]}


def check_query(out: Any) -> None:
    assert out == [{"n": 120, "cities": 3}]


JSON_COMMANDS: dict[str, tuple[list[str], Callable[[Any], None]]] = {
    "list": (["data", "list"], check_list),
    "versions": (["data", "versions", "small"], check_versions),
    "show": (["data", "show", "small@v2"], check_show),
    "head": (["data", "head", "small", "-n", "3", "--split", "test"], check_head),
    "diff": (["data", "diff", "small@v1", "small"], check_diff),
    "query": (
        ["data", "query", 'SELECT count(*) AS n, count(DISTINCT city) AS cities FROM "small@v1"'],
        check_query,
    ),
}


@pytest.mark.parametrize("command", list(JSON_COMMANDS))
def test_json_output_is_only_json(populated: Cli, command: str) -> None:
    args, check = JSON_COMMANDS[command]

    check(json_out(populated(*args, "--json")))
    human = populated(*args)

    assert_ok(human)
    assert human.stdout.strip()


def test_show_by_digest_prefix(populated: Cli, home_workspace: Workspace) -> None:
    digest = version(home_workspace, "small@v1").digest

    out = json_out(populated("data", "show", f"small@{digest[:8]}", "--json"))

    assert (out["ref"], out["digest"]) == ("small@v1", digest)


def write(path: Path, content: str) -> Path:
    path.write_text(content, encoding="utf-8")
    return path


def test_transform_commands_chain_and_print_json(cli: Cli, small_csv: Path, tmp_path: Path) -> None:
    recipe = write(tmp_path / "clean.yaml", "text: {lowercase: true}\ndrop_duplicates: true\n")
    rules = write(tmp_path / "rules.yaml", "columns:\n  age: {ge: 25}\n")
    spec = write(
        tmp_path / "spec.yaml",
        "target: label\nfeatures:\n  - {column: age, kind: standardize}\n"
        "  - {column: city, kind: onehot}\n",
    )
    augment = write(tmp_path / "augment.yaml", "tabular: {label: label}\n")
    assert_ok(cli("data", "add", "small", small_csv))

    cleaned = json_out(cli("data", "clean", "small", "--recipe", recipe, "--json"))
    redacted = json_out(cli("data", "redact", "small", "--column", "email", "--json"))
    checked = json_out(cli("data", "validate", "small", "--expectations", rules, "--json"))
    split = json_out(cli("data", "split", "small", "--stratify", "label", "--json"))
    grown = json_out(cli("data", "augment", "small", "--recipe", augment, "--json"))
    featured = json_out(cli("data", "features", "small", "--spec", spec, "--json"))

    chain = [cleaned, redacted, checked, split, grown]
    assert [out["ref"] for out in chain] == [f"small@v{n}" for n in range(2, 7)]
    assert [out["parents"] for out in chain] == [[f"small@v{n}"] for n in range(1, 6)]
    assert all(out["created"] for out in [*chain, featured])
    assert checked["side_outputs"]["quarantine"]["ref"] == "small-quarantine@v1"
    assert checked["report"]["passed"] + checked["report"]["failed"] == redacted["rows"]
    assert (featured["ref"], featured["parents"]) == ("small-features@v1", ["small@v6"])
    assert featured["feature_spec"]["ref"] == "small-features@v1"


def test_a_headerless_file_gets_names_and_its_columns_rebuild(cli: Cli, tmp_path: Path) -> None:
    reviews = write(tmp_path / "reviews.tsv", "1\tA fine film\tx\n0\tDull\ty\n1\tWarm\tz\n")

    added = json_out(cli("data", "add", "reviews", reviews, "--names", "label,text,junk", "--json"))
    assert_ok(cli("data", "add", "raw", reviews))
    renamed = json_out(
        cli(
            "data", "clean", "raw", "--rename", "column_1=label", "--rename", "column_2=text",
            "--select", "text", "--select", "label", "--json",
        )
    )  # fmt: skip
    dropped = json_out(cli("data", "clean", "reviews", "--drop", "junk", "--json"))

    assert added["rows"] == 3
    head = json_out(cli("data", "head", "reviews@v1", "--json"))
    assert head[0] == {"label": 1, "text": "A fine film", "junk": "x"}
    assert json_out(cli("data", "head", "raw@v1", "--json"))[0]["column_1"] == 1
    assert json_out(cli("data", "head", renamed["ref"], "--json"))[0] == {
        "text": "A fine film",
        "label": 1,
    }
    assert renamed["report"]["renamed"] == {"column_1": "label", "column_2": "text"}
    assert json_out(cli("data", "head", dropped["ref"], "--json"))[0] == {
        "label": 1,
        "text": "A fine film",
    }
    shown = json_out(cli("data", "show", "reviews@v1", "--json"))
    assert shown["recipe"]["params"]["options"]["names"] == ["label", "text", "junk"]
    for ref in ("reviews@v1", renamed["ref"], dropped["ref"]):
        result = cli("data", "rebuild", ref)
        assert_ok(result)
        assert "matches" in result.stdout


def test_a_compressed_file_is_added_as_the_plain_one(cli: Cli, small_csv: Path) -> None:
    import gzip

    packed = small_csv.with_name("small.csv.gz")
    packed.write_bytes(gzip.compress(small_csv.read_bytes()))

    plain = json_out(cli("data", "add", "small", small_csv, "--json"))
    again = json_out(cli("data", "add", "small", packed, "--json"))

    assert (again["ref"], again["created"]) == (plain["ref"], False)  # same content, same version
    assert_ok(cli("data", "rebuild", "small@v1"))


READERS: dict[str, Callable[[Path], pl.DataFrame]] = {
    "csv": pl.read_csv,
    "parquet": pl.read_parquet,
    "jsonl": pl.read_ndjson,
}


@pytest.mark.parametrize("file_format", list(READERS))
def test_export_round_trips_rows(
    populated: Cli, home_workspace: Workspace, tmp_path: Path, file_format: str
) -> None:
    read = READERS[file_format]
    stored = version(home_workspace, "small@v3")
    whole, train = tmp_path / f"all.{file_format}", tmp_path / "out" / f"train.{file_format}"

    assert_ok(populated("data", "export", "small", whole))
    assert_ok(populated("data", "export", "small@v3", train, "--split", "train"))

    assert read(whole).equals(catalog.read_frame(home_workspace, stored))
    assert read(train).equals(catalog.read_frame(home_workspace, stored, "train"))
    assert read(train)[SPLIT_COLUMN].unique().to_list() == ["train"]
    assert not list(tmp_path.rglob("*.part"))


def test_export_format_flag_overrides_the_extension(
    populated: Cli, home_workspace: Workspace, tmp_path: Path
) -> None:
    target = tmp_path / "rows.txt"

    assert_ok(populated("data", "export", "small@v1", target, "--format", "jsonl"))

    expected = catalog.read_frame(home_workspace, version(home_workspace, "small@v1"))
    assert pl.read_ndjson(target).equals(expected)


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["data", "export", "small", "{tmp}/rows.xlsx"], "Cannot export to 'rows.xlsx'", 2),
        (["data", "export", "small@v1", "{tmp}/a.csv", "--split", "train"], "has no splits", 2),
        (["data", "export", "small", "{tmp}/a.csv", "--split", "dev"], "Unknown split 'dev'", 2),
    ],
)
def test_export_refuses_bad_requests(
    populated: Cli, tmp_path: Path, args: list[str], expected: str, code: int
) -> None:
    result = populated(*(arg.format(tmp=tmp_path) for arg in args))

    assert_cli_error(result, expected, code)
    assert not list(tmp_path.glob("rows.*")) and not (tmp_path / "a.csv").exists()


def test_rebuild_passes_then_fails_after_tampering(
    cli: Cli, small_csv: Path, home_workspace: Workspace
) -> None:
    assert_ok(cli("data", "add", "small", small_csv))
    assert_ok(cli("data", "split", "small", "--seed", "1"))

    for ref in ("small@v1", "small@v2"):
        result = cli("data", "rebuild", ref)
        assert_ok(result)
        assert f"rebuilt {ref}" in result.stdout

    edit_recipe(home_workspace, "small@v2", seed=2)
    assert_cli_error(cli("data", "rebuild", "small@v2"), "does not reproduce it")
    small_csv.write_text(small_csv.read_text().replace("Lima", "Cusco"))
    assert_cli_error(cli("data", "rebuild", "small@v1"), "changed since it was ingested")
    small_csv.unlink()
    assert_cli_error(cli("data", "rebuild", "small@v1"), "no longer exists")


def test_skipped_rows_are_reported_with_line_numbers(cli: Cli, tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.csv", "a,b\n1,2\n3\n4,5\n6,7,8\n9,10\n")

    human = cli("data", "add", "bad", bad, "--on-bad-rows", "skip")
    out = json_out(cli("data", "add", "bad", bad, "--on-bad-rows", "skip", "--json"))

    assert_ok(human)
    assert "skipped 2 malformed rows (lines 3, 5)" in human.stdout
    assert out["report"]["bad_rows"] == [3, 5]
    assert out["rows"] == 3


def test_query_joins_two_datasets(populated: Cli, tmp_path: Path) -> None:
    cities = write(tmp_path / "cities.csv", "city,country\nOslo,Norway\nRome,Italy\nLima,Peru\n")
    assert_ok(populated("data", "add", "cities", cities))

    out = json_out(
        populated(
            "data",
            "query",
            'SELECT c.country, count(*) AS n FROM "small@v1" s JOIN cities c USING (city) '
            "GROUP BY c.country ORDER BY c.country",
            "--json",
        )
    )

    assert out == [
        {"country": "Italy", "n": 40},
        {"country": "Norway", "n": 40},
        {"country": "Peru", "n": 40},
    ]


def bad_file(tmp_path: Path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


BAD_COMMANDS: dict[str, tuple[Callable[[Path], list[str]], str, int]] = {
    "malformed rows": (
        lambda t: ["data", "add", "bad", bad_file(t, "bad.csv", b"a,b\n1,2\n3\n4,5\n6,7,8\n")],
        "has 2 rows with the wrong number of fields (line 3, line 5)",
        1,
    ),
    "undecodable": (
        lambda t: ["data", "add", "bad", bad_file(t, "l1.csv", b"a,b\n1,caf\xe9\n")],
        "not valid UTF-8 text at line 2",
        1,
    ),
    "empty file": (
        lambda t: ["data", "add", "bad", bad_file(t, "empty.csv", b"")],
        "the file is empty",
        1,
    ),
    "binary file": (
        lambda t: ["data", "add", "bad", bad_file(t, "x.bin", bytes(range(256)) * 4)],
        "binary file of unknown format",
        1,
    ),
    "unknown format": (
        lambda t: ["data", "add", "bad", str(t / "small.csv"), "--format", "xml"],
        "options: key 'format'",
        1,
    ),
    "bad on-bad-rows": (
        lambda t: ["data", "add", "bad", str(t / "small.csv"), "--on-bad-rows", "maybe"],
        "options: key 'on_bad_rows'",
        1,
    ),
    "slash name": (
        lambda t: ["data", "add", "a/b", str(t / "small.csv")],
        "Invalid dataset name 'a/b'",
        1,
    ),
    "dotdot name": (
        lambda t: ["data", "add", "..", str(t / "small.csv")],
        "Invalid dataset name '..'",
        1,
    ),
    "clean missing column": (
        lambda t: [
            "data",
            "clean",
            "small",
            "--recipe",
            bad_file(t, "c.yaml", b"missing:\n  columns:\n    nope: {strategy: mode}\n"),
        ],
        "names column 'nope'",
        1,
    ),
    "names of another count": (
        lambda t: ["data", "add", "other", bad_file(t, "h.csv", b"1,x\n2,y\n"), "--names", "a"],
        "names gives 1 column names (a) but",
        1,
    ),
    "names repeated": (
        lambda t: ["data", "add", "other", bad_file(t, "h.csv", b"1,x\n"), "--names", "a,a"],
        "the column name 'a' is given twice",
        1,
    ),
    "names of a JSON file": (
        lambda t: ["data", "add", "other", bad_file(t, "j.jsonl", b'{"a": 1}\n'), "--names", "x"],
        "names only applies to CSV/TSV files",
        1,
    ),
    "truncated gzip": (
        lambda t: [
            "data",
            "add",
            "other",
            bad_file(t, "c.csv.gz", gzip.compress(b"a,b\n1,2\n")[:-9]),
        ],
        "is not a complete gzip file",
        1,
    ),
    "rename a missing column": (
        lambda t: ["data", "clean", "small", "--rename", "nope=x"],
        "rename names column 'nope', which the data does not have",
        1,
    ),
    "rename onto an existing column": (
        lambda t: ["data", "clean", "small", "--rename", "age=id"],
        "rename gives two columns the name 'id'",
        1,
    ),
    "rename two columns to one name": (
        lambda t: ["data", "clean", "small", "--rename", "age=x", "--rename", "id=x"],
        "rename names the column 'x' twice",
        1,
    ),
    "drop a missing column": (
        lambda t: ["data", "clean", "small", "--drop", "nope"],
        "drop names column 'nope'",
        1,
    ),
    "select and drop": (
        lambda t: ["data", "clean", "small", "--select", "id", "--drop", "age"],
        "give select or drop, not both",
        1,
    ),
    "rename without equals": (
        lambda t: ["data", "clean", "small", "--rename", "age"],
        "--rename 'age' is not OLD=NEW",
        2,
    ),
    "clean unknown key": (
        lambda t: [
            "data",
            "clean",
            "small",
            "--recipe",
            bad_file(t, "c.yaml", b"text: {bogus: true}\n"),
        ],
        "c.yaml: unknown key 'text.bogus'",
        1,
    ),
    "expectations unknown key": (
        lambda t: [
            "data",
            "validate",
            "small",
            "--expectations",
            bad_file(t, "e.yaml", b"columns:\n  age: {gee: 1}\n"),
        ],
        "e.yaml: unknown key 'columns.age.gee'",
        1,
    ),
    "missing recipe file": (
        lambda t: ["data", "clean", "small", "--recipe", str(t / "nowhere.yaml")],
        "nowhere.yaml: no such file",
        1,
    ),
    "derive into bad name": (
        lambda t: ["data", "split", "small", "--name", "../x"],
        "Invalid dataset name '../x'",
        1,
    ),
    "unknown dataset": (lambda t: ["data", "show", "nope"], "Dataset 'nope' does not exist", 1),
    "unknown version": (lambda t: ["data", "head", "small@v7"], "has no version v7", 1),
    "query copy": (
        lambda t: ["data", "query", f"COPY small TO '{t / 'out.csv'}'"],
        "COPY statements are not allowed",
        1,
    ),
    "query create": (
        lambda t: ["data", "query", "CREATE TABLE x AS SELECT 1"],
        "CREATE statements are not allowed",
        1,
    ),
    "query insert": (
        lambda t: ["data", "query", "INSERT INTO small SELECT * FROM small"],
        "INSERT statements are not allowed",
        1,
    ),
    "query attach": (
        lambda t: ["data", "query", f"ATTACH '{t / 'x.db'}'"],
        "ATTACH statements are not allowed",
        1,
    ),
    "query passwd": (
        lambda t: ["data", "query", "SELECT * FROM read_csv('/etc/passwd')"],
        'Cannot access file "/etc/passwd"',
        1,
    ),
    "query parquet file": (
        lambda t: ["data", "query", "SELECT * FROM 'file.parquet'"],
        'Cannot access file "file.parquet"',
        1,
    ),
    "query two statements": (
        lambda t: ["data", "query", "SELECT 1; SELECT 2"],
        "data query runs one statement; got 2.",
        2,
    ),
    "bad ratios": (
        lambda t: ["data", "split", "small", "--ratios", "a,b"],
        "--ratios 'a,b' is not a comma-separated list",
        2,
    ),
}


@pytest.mark.parametrize("case", list(BAD_COMMANDS))
def test_bad_input_is_one_error_line_and_changes_nothing(
    cli: Cli, small_csv: Path, home_workspace: Workspace, tmp_path: Path, case: str
) -> None:
    make_args, expected, code = BAD_COMMANDS[case]
    assert_ok(cli("data", "add", "small", small_csv))
    before = snapshot_store(home_workspace)

    result = cli(*make_args(tmp_path))

    assert_cli_error(result, expected, code)
    assert snapshot_store(home_workspace) == before
    assert leftover_temp_files(home_workspace) == []
    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "x.db").exists()


def test_debug_shows_the_traceback(cli: Cli, tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.csv", "")

    result = cli("--debug", "data", "add", "bad", empty)

    assert result.code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "InvalidDataError" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
