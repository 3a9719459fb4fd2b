from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from forgeml.core.errors import NotFoundError, QueryError, QueryNotAllowedError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.data.query import run_query
from tests.data.conftest import (
    add,
    assert_one_sentence,
    leftover_temp_files,
    snapshot_store,
    write_table_csv,
)

# BUG (see test_queries_raise_no_deprecation_warning): run_query calls duckdb's deprecated
# fetch_arrow_table(); ignored here so the other tests still check behaviour.


@pytest.fixture
def store(workspace: Workspace, tmp_path: Path) -> Workspace:
    add(workspace, "people", write_table_csv(tmp_path / "p1.csv", rows=120))
    add(workspace, "people", write_table_csv(tmp_path / "p2.csv", rows=60, offset=100))
    cities = tmp_path / "cities.csv"
    cities.write_text("city,country\nOslo,Norway\nRome,Italy\nLima,Peru\n", encoding="utf-8")
    add(workspace, "cities", cities)
    return workspace


def scalar(workspace: Workspace, sql: str) -> object:
    table = run_query(workspace, sql)
    assert table.num_rows == 1
    return table.column(0)[0].as_py()


def test_a_dataset_name_is_its_latest_version(store: Workspace) -> None:
    assert scalar(store, "SELECT count(*) FROM people") == 60
    assert scalar(store, "SELECT min(id) FROM people") == 100


def test_a_quoted_ref_pins_a_version(store: Workspace) -> None:
    from forgeml.data import catalog

    with store.store.session() as session:
        digest = catalog.resolve(session, "people@v1").digest

    assert scalar(store, 'SELECT count(*) FROM "people@v1"') == 120
    assert scalar(store, 'SELECT count(*) FROM "people@v2"') == 60
    assert scalar(store, f'SELECT count(*) FROM "people@{digest[:10]}"') == 120
    both = 'SELECT (SELECT count(*) FROM "people@v1") - (SELECT count(*) FROM people)'
    assert scalar(store, both) == 60


def test_two_datasets_join(store: Workspace) -> None:
    table = run_query(
        store,
        "SELECT c.country, count(*) AS n FROM people p JOIN cities c ON p.city = c.city "
        "GROUP BY c.country ORDER BY c.country",
    )

    assert table.to_pylist() == [
        {"country": "Italy", "n": 20},
        {"country": "Norway", "n": 20},
        {"country": "Peru", "n": 20},
    ]


def test_results_keep_types_and_honour_the_limit(store: Workspace) -> None:
    table = run_query(store, 'SELECT id, score, city FROM "people@v1" ORDER BY id', limit=5)

    assert table.num_rows == 5
    assert table.schema.field("id").type == pa.int64()
    assert table.schema.field("score").type == pa.float64()
    assert table.column("id").to_pylist() == [0, 1, 2, 3, 4]


def test_explain_is_allowed(store: Workspace) -> None:
    assert run_query(store, "EXPLAIN SELECT * FROM people").num_rows >= 1


def forbidden_statements(tmp_path: Path) -> list[str]:
    target = tmp_path / "out.csv"
    return [
        f"COPY people TO '{target}'",
        f"COPY (SELECT 1) TO '{target}'",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'",
        "CREATE TABLE t AS SELECT * FROM people",
        "CREATE VIEW v AS SELECT 1",
        "INSERT INTO people SELECT * FROM people",
        "UPDATE people SET age = 0",
        "DELETE FROM people",
        "DROP TABLE people",
        f"ATTACH '{tmp_path / 'other.db'}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "PRAGMA version",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM glob('/etc/*')",
        f"SELECT * FROM '{tmp_path / 'file.parquet'}'",
        f"SELECT * FROM read_parquet('{tmp_path / 'file.parquet'}')",
        "SELECT * FROM 'file.parquet'",
    ]


def test_writes_and_file_reads_are_not_allowed(store: Workspace, tmp_path: Path) -> None:
    pl.DataFrame({"secret": [1, 2]}).write_parquet(tmp_path / "file.parquet")
    before = snapshot_store(store)

    for sql in forbidden_statements(tmp_path):
        with pytest.raises(QueryNotAllowedError) as caught:
            run_query(store, sql)
        assert_one_sentence(str(caught.value))
        assert str(caught.value).startswith("data query "), sql

    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "other.db").exists()
    assert snapshot_store(store) == before
    assert leftover_temp_files(store) == []


def test_a_write_is_named_in_the_message(store: Workspace) -> None:
    with pytest.raises(QueryNotAllowedError, match="CREATE statements are not allowed; use SELECT"):
        run_query(store, "CREATE TABLE t (x INT)")
    with pytest.raises(QueryNotAllowedError, match='Cannot access file "/etc/passwd"'):
        run_query(store, "SELECT * FROM read_csv('/etc/passwd')")


@pytest.mark.parametrize(
    ("sql", "error", "expected"),
    [
        ("SELECT 1; SELECT 2", UsageError, "data query runs one statement; got 2."),
        ("SELECT * FROM people; DROP TABLE people", UsageError, "one statement; got 2"),
        ("SELEC * FROM people", QueryError, "Query does not parse"),
        ("SELECT * FROM nowhere", QueryError, "Query failed"),
        ("SELECT nope FROM people", QueryError, "Query failed"),
        ('SELECT * FROM "people@v9"', NotFoundError, "has no version v9"),
        ('SELECT * FROM "ghost@v1"', NotFoundError, "Dataset 'ghost' does not exist"),
    ],
)
def test_bad_queries_are_one_clear_error(
    store: Workspace, sql: str, error: type[Exception], expected: str
) -> None:
    with pytest.raises(error) as caught:
        run_query(store, sql)

    assert expected in str(caught.value)
    assert_one_sentence(str(caught.value))


def test_an_empty_store_still_answers(workspace: Workspace) -> None:
    assert run_query(workspace, "SELECT 42 AS answer").to_pylist() == [{"answer": 42}]


def test_queries_raise_no_deprecation_warning(workspace: Workspace) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_query(workspace, "SELECT 1 AS one").to_pylist() == [{"one": 1}]
