from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.agents import SqlQueryOptions, sql_query_tool
from forgeml.agents.tools import time_limit
from forgeml.core.errors import QueryError
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


def test_a_query_still_running_when_the_runs_time_is_up_is_interrupted(
    workspace: Workspace,
) -> None:
    tool = sql_query_tool(workspace, SqlQueryOptions())

    with time_limit(0.2), pytest.raises(QueryError) as raised:
        tool.function(sql="SELECT count(*) FROM range(1000000000000) a, range(10) b")

    assert str(raised.value) == "Query ran past its 0.2 s time limit; stopped."
