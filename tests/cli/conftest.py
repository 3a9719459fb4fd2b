from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.cli._served import Forgeml, Served, forgeml_on
from tests.conftest import CliResult
from tests.data.conftest import write_table_csv


@pytest.fixture
def home_workspace(tmp_path: Path) -> Iterator[Workspace]:
    """The workspace the `cli` fixture's commands write to, opened directly."""
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    return write_table_csv(tmp_path / "small.csv")


def assert_ok(result: CliResult) -> None:
    assert result.code == 0, result.stderr


def json_out(result: CliResult) -> Any:
    assert_ok(result)
    return json.loads(result.stdout)


def table_columns(stdout: str) -> list[str]:
    """Each column of a printed table as one string: its cells' pieces joined in order with
    the padding dropped, so a value the terminal's width folded over lines reads whole."""
    columns: list[list[str]] = []
    for line in stdout.splitlines():
        if not line.startswith("│"):
            continue
        cells = line.strip("│").split("│")
        columns.extend([] for _ in range(len(cells) - len(columns)))
        for column, cell in zip(columns, cells, strict=False):
            column.append(cell.strip())
    return ["".join(column) for column in columns]


def assert_cli_error(result: CliResult, expected: str, code: int = 1) -> None:
    """Exit `code`, one `error: ` line last on stderr, no traceback."""
    assert result.code == code, (result.code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert lines[-1] == errors[0], result.stderr
    assert expected in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout


@pytest.fixture
def forgeml(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Forgeml]:
    """`forgeml ...` locally and remotely on the test module's `served` workspace (the
    remote-mode parity tests, tests/cli/test_remote_<group>.py)."""
    with forgeml_on(served, capsys, monkeypatch) as run:
        yield run
