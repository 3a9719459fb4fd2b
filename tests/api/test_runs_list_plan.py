"""The run list at scale rests on its indexes: each query shape the control-plane
benchmark measures is answered from one index range, in order (no scan of `runs`, no sort
of the matching rows), and its pages hold what a plain sort of the runs gives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from forgeml.core.store import RunRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking import run_summary
from tests.api.conftest import api_client

NAMES = ("sweep-0", "sweep-1", "sweep-2")
STATUSES = ("FINISHED", "FINISHED", "FAILED", "KILLED")
_START = datetime(2026, 1, 1, tzinfo=UTC)


def _run(i: int) -> RunRecord:
    started = _START + timedelta(seconds=i // 4)  # four runs a second: ties broken by id
    return RunRecord(
        id=f"{(i * 7919) % 1000:04d}{i:028d}", name=NAMES[i % 3], experiment="plan",
        status=STATUSES[i % 4], config={"lr": "0.1"}, started_at=started,
        ended_at=started + timedelta(minutes=1), heartbeat_at=started, lease_seconds=30,
        pid=1, host="h", metrics={"accuracy": i / 301, "m00": i, "nan": float("nan")},
        error="boom" if i % 4 == 2 else None, created_by="tester",
    )  # fmt: skip


@pytest.fixture
def api(api_workspace: Workspace) -> Iterator[TestClient]:
    with api_workspace.store.session() as session:
        session.add_all(_run(i) for i in range(301))
    with api_client(api_workspace) as client:
        yield client


def _walk(api: TestClient, query: dict[str, str]) -> list[dict[str, Any]]:
    """Every page of `query`, in order."""
    items: list[dict[str, Any]] = []
    params = {**query, "limit": "40"}
    while True:
        answer = api.get("/api/v1/runs", params=params)
        assert answer.status_code == 200, answer.text
        items += answer.json()
        cursor = answer.headers.get("X-Next-Cursor")
        if cursor is None:
            return items
        params = {**query, "limit": "40", "after": cursor}


def _expected(workspace: Workspace, query: dict[str, str]) -> list[dict[str, Any]]:
    """The runs `query` keeps, newest first, as `run_summary` and orjson render them."""
    with workspace.store.session(write=False) as session:
        runs = session.scalars(select(RunRecord)).all()
        kept = [
            run for run in runs if all(getattr(run, key) == value for key, value in query.items())
        ]
        kept.sort(key=lambda run: (run.started_at, run.id), reverse=True)
        return [json.loads(orjson.dumps(run_summary(run))) for run in kept]


QUERIES = {
    "status": {"status": "FINISHED"},
    "name_status": {"name": "sweep-0", "status": "FINISHED"},
    "name": {"name": "sweep-1"},
    "all": {},
}


@pytest.mark.parametrize("shape", list(QUERIES))
def test_every_page_holds_what_a_plain_sort_gives(
    api: TestClient, api_workspace: Workspace, shape: str
) -> None:
    expected = _expected(api_workspace, QUERIES[shape])

    assert expected  # the seed has runs of every shape
    assert _walk(api, QUERIES[shape]) == expected


def test_a_page_is_the_bytes_the_cli_prints(api: TestClient, api_workspace: Workspace) -> None:
    answer = api.get("/api/v1/runs", params={"status": "FAILED", "limit": "5"})

    expected = _expected(api_workspace, {"status": "FAILED"})[:5]
    assert answer.content == orjson.dumps(expected)
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["X-Next-Cursor"]
    assert 'rel="next"' in answer.headers["Link"]


@pytest.mark.parametrize(
    ("shape", "index"),
    [
        ("status", "ix_runs_project_status_started_at_id"),
        ("name_status", "ix_runs_project_name_status_started_at_id"),
        ("name", "ix_runs_project_name_started_at_id"),
        ("all", "ix_runs_project_started_at_id"),
    ],
)
def test_each_page_reads_one_index_range_in_order(
    api: TestClient, api_workspace: Workspace, shape: str, index: str
) -> None:
    statements: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM runs" in statement and "ORDER BY runs.started_at DESC" in statement:
            statements.append((statement, parameters))

    engine = api_workspace.store.engine
    event.listen(engine, "before_cursor_execute", keep)
    try:
        _walk(api, QUERIES[shape])
    finally:
        event.remove(engine, "before_cursor_execute", keep)

    assert len(statements) >= 2  # the first page and the ones after a cursor
    with engine.connect() as connection:
        for statement, parameters in statements:
            plan = [
                row[3]
                for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            ]
            # the first unfiltered page walks the whole index in order, stopping at the limit
            assert any(f"runs USING INDEX {index}" in step for step in plan), plan
            assert "SCAN runs" not in plan, plan  # the table itself, in no order
            assert not any("TEMP B-TREE" in step for step in plan), plan
