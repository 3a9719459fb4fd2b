from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, text

from forgeml.core.config import get_settings
from tests._wait import wait_until
from tests.conftest import CliResult


@pytest.fixture
def pg_cli(
    postgres_url: str, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Callable[..., CliResult], Callable[[], int]]]:
    """The in-process CLI on a fresh PostgreSQL database, and a count of its connections."""
    monkeypatch.setenv("FORGEML_DB_URL", postgres_url)
    get_settings.cache_clear()
    name = postgres_url.rsplit("/", 1)[1]
    admin = create_engine(postgres_url.rsplit("/", 1)[0] + "/postgres")

    def connections() -> int:
        with admin.connect() as connection:
            query = "SELECT count(*) FROM pg_stat_activity WHERE datname = :name"
            return int(connection.scalar(text(query), {"name": name}) or 0)

    yield cli, connections
    admin.dispose()


@pytest.mark.parametrize(
    "command",
    [("data", "list", "--json"), ("queues", "list", "--json"), ("queues", "show", "nope")],
)
def test_a_cli_command_leaves_no_database_connection_open(
    pg_cli: tuple[Callable[..., CliResult], Callable[[], int]], command: tuple[str, ...]
) -> None:
    cli, connections = pg_cli
    assert cli("users", "list", "--json").code == 0  # creates the tables
    # a closed connection's server process leaves pg_stat_activity a moment after: polled
    wait_until(lambda: connections() == 0, 5, "the first command's connections to close")

    result = cli(*command)

    assert result.code in (0, 1), result.stderr
    wait_until(lambda: connections() == 0, 5, f"{' '.join(command)}'s connections to close")
