from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import assert_cli_error
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def test_source_flags_on_a_local_file_are_a_usage_error(cli: Cli, small_csv: Path) -> None:
    result = cli("data", "add", "small", small_csv, "--table", "t", "--allow-private")

    assert_cli_error(result, "--allow-private, --table apply to a source URL only", code=2)


@pytest.mark.parametrize(
    ("url", "flags", "expected"),
    [
        ("gopher://example.com/x", [], "No source reads gopher:// URLs"),
        ("https://example.com/a", ["--next", "a", "--cursor", "p=b"], "Give --next or --cursor"),
        ("postgresql+psycopg://u@127.0.0.1/db", [], "exactly one of --table or --query"),
        ("postgresql+nodriver://u:pw@h/db", ["--table", "t"], "Cannot use the database URL"),
        ("mysql+pymysql://u:pw@h:notaport/db", ["--table", "t"], "Cannot use the database URL"),
        ("https://example.com/a", ["--table", "t"], "--table does not apply to web sources"),
    ],
)
def test_a_source_url_with_the_wrong_flags_is_a_usage_error(
    cli: Cli, url: str, flags: list[str], expected: str
) -> None:
    assert_cli_error(cli("data", "add", "x", url, *flags), expected, code=2)


def test_a_malformed_option_names_its_key(cli: Cli) -> None:
    result = cli("data", "add", "x", "https://example.com/a", "--cursor", "nopath")

    assert_cli_error(result, "key 'cursor': Value error, give the cursor as PARAM=PATH")


def test_a_url_source_is_refused_in_remote_mode_and_a_crawl_asks_the_server(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_SERVER", "http://127.0.0.1:9")

    added = cli("data", "add", "x", "https://example.com/a.csv")
    crawled = cli("data", "crawl", "x", "https://example.com/")

    assert_cli_error(added, "reads a URL on this machine only", code=2)
    # a crawl runs on the server as a job (tests/cli/test_remote_jobs.py): it asks the server
    assert_cli_error(crawled, "Cannot reach the forgeml server at http://127.0.0.1:9", code=1)
