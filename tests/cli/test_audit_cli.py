from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


@pytest.fixture
def four_events(cli: Cli, small_csv: Path, tmp_path: Path) -> Cli:
    spec = tmp_path / "spec.yaml"
    spec.write_text("target: label\nfeatures:\n  - {column: age, kind: minmax}\n")
    assert_ok(cli("data", "add", "small", small_csv))
    assert_ok(cli("data", "split", "small", "--seed", "5"))
    assert_ok(cli("data", "features", "small", "--spec", spec))
    return cli


def execute(workspace: Workspace, sql: str) -> None:
    with workspace.store.engine.begin() as connection:
        connection.execute(text(sql))


def test_audit_log_json_lists_every_change(four_events: Cli) -> None:
    events = json_out(four_events("audit", "log", "--json"))

    assert [(e["seq"], e["action"], e["object"]) for e in events] == [
        (1, "data.version.create", "small@v1"),
        (2, "data.version.create", "small@v2"),
        (3, "data.version.create", "small-features@v1"),
        (4, "data.feature_spec.create", "small-features@v1"),
    ]
    assert {e["actor"] for e in events} == {"tester"}
    assert events[1]["payload"]["parents"] == ["small@v1"]
    assert len({e["hash"] for e in events}) == 4


def test_audit_log_limit_keeps_the_latest(four_events: Cli) -> None:
    events = json_out(four_events("audit", "log", "--limit", "2", "--json"))
    human = four_events("audit", "log")

    assert [e["seq"] for e in events] == [3, 4]
    assert_ok(human)
    assert human.stdout.startswith("audit log")


def test_audit_verify_passes_on_an_intact_log(four_events: Cli) -> None:
    result = four_events("audit", "verify")

    assert_ok(result)
    assert "audit log intact: 4 events" in result.stdout


def test_audit_verify_on_an_empty_store(cli: Cli) -> None:
    result = cli("audit", "verify")

    assert_ok(result)
    assert "audit log intact: 0 events" in result.stdout
    assert json_out(cli("audit", "log", "--json")) == []


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "UPDATE audit_events SET actor = 'mallory' WHERE seq = 2",
            "Audit log broken at event 2: its contents were edited (data.version.create small@v2)",
        ),
        (
            "UPDATE audit_events SET object_ref = 'small@v9' WHERE seq = 3",
            "Audit log broken at event 3: its contents were edited",
        ),
        (
            "UPDATE audit_events SET prev_hash = hash WHERE seq = 4",
            "Audit log broken at event 4: it does not follow event 3",
        ),
        ("DELETE FROM audit_events WHERE seq = 2", "Audit log broken at event 2: it was deleted"),
    ],
)
def test_audit_verify_names_the_broken_event(
    four_events: Cli, home_workspace: Workspace, sql: str, expected: str
) -> None:
    execute(home_workspace, sql)

    assert_cli_error(four_events("audit", "verify"), expected)
