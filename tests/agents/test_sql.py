from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.agents import SqlQueryOptions, sql_query_tool
from forgeml.core.workspace import Workspace
from tests.data.conftest import add, write_table_csv


@pytest.fixture
def store(workspace: Workspace, tmp_path: Path) -> Workspace:
    add(workspace, "people", write_table_csv(tmp_path / "people.csv", rows=30))
    return workspace


def test_a_select_answers_columns_and_rows(store: Workspace) -> None:
    tool = sql_query_tool(store, SqlQueryOptions())

    reply = tool.function(**tool.validate('{"sql": "SELECT count(*) AS n FROM people"}'))

    assert reply == {"columns": ["n"], "rows": [{"n": 30}], "truncated": False}


def test_rows_past_max_rows_are_cut_and_flagged(store: Workspace) -> None:
    tool = sql_query_tool(store, SqlQueryOptions(max_rows=5))

    reply = tool.function(sql='SELECT * FROM "people@v1"')

    assert (len(reply["rows"]), reply["truncated"]) == (5, True)
