from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal

import pytest
from sqlalchemy import create_engine, text

from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import (
    MYSQL_URL,
    PG_URL,
    CliResult,
    fresh_mysql_database,
    fresh_postgres_database,
)
from tests.data.conftest import snapshot_store

Cli = Callable[..., CliResult]
ROWS = 2500


def _fill(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TABLE reviews (id INTEGER PRIMARY KEY, label VARCHAR(8), "
                "score NUMERIC(6, 2), day DATE, note VARCHAR(40))"
            )
        )
        connection.execute(
            text("INSERT INTO reviews VALUES (:id, :label, :score, :day, :note)"),
            [
                {
                    "id": i,
                    "label": "pos" if i % 3 else "neg",
                    "score": Decimal(i % 500) / 4,
                    "day": dt.date(2024, 1, 1) + dt.timedelta(days=i % 300),
                    # all NULL in the first chunk: its type comes from a later one
                    "note": None if i < 1200 else f"note {i}",
                }
                for i in range(ROWS)
            ],
        )
    engine.dispose()


@pytest.fixture(scope="module", params=["postgresql", "mysql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database holding table `reviews` (2500 rows), on each server that answers."""
    if request.param == "postgresql":
        if not PG_URL:
            pytest.skip("FORGEML_TEST_PG_URL is not set (no PostgreSQL server for this run)")
        fresh = fresh_postgres_database()
    else:
        if not MYSQL_URL:
            pytest.skip("FORGEML_TEST_MYSQL_URL is not set (no MariaDB server for this run)")
        fresh = fresh_mysql_database()
    with fresh as url:
        _fill(url)
        yield url


def test_a_table_streams_in_chunks_into_a_version(
    cli: Cli, database_url: str, home_workspace: Workspace
) -> None:
    added = json_out(
        cli(
            "data",
            "add",
            "reviews",
            database_url,
            "--table",
            "reviews",
            "--chunk-rows",
            "1000",
            "--json",
        )
    )

    assert added["rows"] == ROWS
    with home_workspace.store.session() as session:
        version = catalog.resolve(session, "reviews")
    frame = catalog.read_frame(home_workspace, version).sort("id")
    assert frame.columns == ["id", "label", "score", "day", "note"]
    assert frame.row(1201) == (1201, "pos", Decimal("50.25"), dt.date(2024, 1, 2), "note 1201")
    assert frame["note"].null_count() == 1200
    params = version.recipe["params"]
    assert params["source_kind"] == "database" and params["live"] is True
    assert params["source_options"] == {"table": "reviews", "chunk_rows": 1000}


def test_a_query_version_rebuilds_from_its_kept_rows_after_the_table_changes(
    cli: Cli, database_url: str
) -> None:
    query = "SELECT id, label FROM reviews WHERE id < 10 ORDER BY id"
    assert_ok(cli("data", "add", "few", database_url, "--query", query))
    engine = create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE reviews SET label = 'changed' WHERE id < 10"))
    engine.dispose()

    assert_ok(cli("data", "rebuild", "few@v1"))
    assert json_out(cli("data", "show", "few", "--json"))["rows"] == 10


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--query", "DELETE FROM reviews"], "must be a SELECT, and this is delete"),
        (["--query", "SELECT 1; DROP TABLE reviews"], "one SELECT statement, not 2"),
        (["--query", "SELECT * INTO copied FROM reviews"], "must not SELECT ... INTO"),
        (["--table", "no_such_table"], "The table no_such_table does not exist"),
        (["--query", "SELECT nope FROM reviews"], "The database refused the query"),
        (["--table", "reviews; drop"], "is not a plain table name"),
    ],
)
def test_a_bad_request_fails_in_one_sentence_and_records_nothing(
    cli: Cli, database_url: str, home_workspace: Workspace, flags: list[str], expected: str
) -> None:
    before = snapshot_store(home_workspace)

    result = cli("data", "add", "bad", database_url, *flags)

    assert_cli_error(result, expected, code=2 if "plain table" in expected else 1)
    assert snapshot_store(home_workspace) == before


_WIPE = {
    # a function that writes, called from a plain SELECT: only the read-only session stops it
    "postgresql": "CREATE FUNCTION wipe() RETURNS int AS 'DELETE FROM reviews RETURNING 1' "
    "LANGUAGE sql",
    "mysql": "CREATE FUNCTION wipe() RETURNS INT MODIFIES SQL DATA "
    "BEGIN DELETE FROM reviews; RETURN 1; END",
}


def test_a_select_that_writes_is_stopped_by_the_read_only_session(
    cli: Cli, database_url: str
) -> None:
    engine = create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(text("DROP FUNCTION IF EXISTS wipe"))
        connection.execute(text(_WIPE[engine.dialect.name]))

    result = cli("data", "add", "bad", database_url, "--query", "SELECT wipe() AS n")

    assert_cli_error(result, "sources are read-only")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM reviews")).scalar() == ROWS
    engine.dispose()


def test_the_password_is_used_but_never_recorded_or_printed(cli: Cli) -> None:
    if not PG_URL:
        pytest.skip("FORGEML_TEST_PG_URL is not set (no PostgreSQL server for this run)")
    with fresh_postgres_database() as url:
        _fill(url)
        # the test server trusts loopback, so any password logs in
        secret_url = url.replace("postgres@", "postgres:s3cret-pw@", 1)
        added = cli("data", "add", "secret", secret_url, "--table", "reviews", "--json")
        shown = cli("data", "show", "secret", "--json")
        log = cli("audit", "log", "--json")
        refused = cli(
            "data", "add", "x", secret_url.replace("/forgeml_test", "/nodb_"), "--table", "t"
        )

    for result in (added, shown, log, refused):
        assert "s3cret-pw" not in result.stdout + result.stderr
    assert json_out(shown)["recipe"]["params"]["source"].startswith(
        "postgresql+psycopg://postgres:***@"
    )
    assert_cli_error(refused, "Cannot read postgresql+psycopg://postgres:***@")


def test_an_unreachable_server_fails_in_one_sentence(cli: Cli, home_workspace: Workspace) -> None:
    before = snapshot_store(home_workspace)

    result = cli(
        "data", "add", "x", "postgresql+psycopg://postgres@127.0.0.1:1/test", "--table", "t"
    )

    assert_cli_error(result, "Cannot read postgresql+psycopg://postgres@127.0.0.1:1/test")
    assert snapshot_store(home_workspace) == before
