from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
import yaml

from forgeml.core.errors import UsageError
from forgeml.core.ids import new_id
from forgeml.core.store import ApiKeyRecord, KeyUsageRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway._usage import usage_period
from forgeml.scheduler import cost
from forgeml.scheduler.cost import (
    KeyCostRow,
    PriceTable,
    cost_report,
    key_cost_report,
    key_total_of,
    parse_since,
    usage_period_of,
)

# ---- rows written through the store's models, the way the gateway's flush leaves them


def add_key(workspace: Workspace, prefix: str, name: str, *, revoked: bool = False) -> str:
    key_id = new_id()
    with workspace.store.session() as session:
        session.add(
            ApiKeyRecord(
                id=key_id,
                prefix=prefix,
                name=name,
                project=workspace.project,
                salt="00" * 16,
                secret_hash="00" * 32,
                scopes=["*"],
                rate_per_s=None,
                burst=None,
                daily_quota=None,
                created_by="tester",
                revoked_at=datetime.now(UTC) if revoked else None,
            )
        )
    return key_id


def add_usage(
    workspace: Workspace,
    key_id: str,
    deployment: str,
    period: str,
    requests: int,
    *,
    errors: int = 0,
    rejected: int = 0,
    latency_ms_total: float = 0.0,
) -> None:
    with workspace.store.session() as session:
        session.add(
            KeyUsageRecord(
                id=new_id(),
                key_id=key_id,
                deployment=deployment,
                period=period,
                requests=requests,
                errors=errors,
                rejected=rejected,
                latency_ms_total=latency_ms_total,
            )
        )


@pytest.fixture
def key_usage(any_workspace: Workspace) -> dict[str, str]:
    """Three keys over three hours of 2026-03-01 (UTC); prefix -> key id."""
    keys = {
        "a1a1a1a1a1a1": add_key(any_workspace, "a1a1a1a1a1a1", "web"),
        "b2b2b2b2b2b2": add_key(any_workspace, "b2b2b2b2b2b2", "batch"),
        "c3c3c3c3c3c3": add_key(any_workspace, "c3c3c3c3c3c3", "old", revoked=True),
    }
    web, batch, old = keys.values()
    add_usage(any_workspace, web, "sst2", "2026-03-01T14", 1500, errors=10, rejected=2,
              latency_ms_total=3000.0)  # fmt: skip
    add_usage(any_workspace, web, "adult", "2026-03-01T12", 500, latency_ms_total=1000.0)
    add_usage(any_workspace, batch, "sst2", "2026-03-01T13", 1000, latency_ms_total=9000.0)
    add_usage(any_workspace, batch, "sst2", "2026-03-01T14", 2000, latency_ms_total=9000.0)
    add_usage(any_workspace, old, "nope", "2026-03-01T14", 0, rejected=5)
    return keys


def _summary(rows: list[KeyCostRow]) -> list[tuple[object, ...]]:
    return [
        (r.prefix, r.name, r.deployments, r.requests, r.errors, r.rejected, r.mean_latency_ms)
        for r in rows
    ]


def test_key_cost_report_groups_usage_per_key_costliest_first(
    any_workspace: Workspace, key_usage: dict[str, str]
) -> None:
    rows = key_cost_report(any_workspace.store, "default", PriceTable(requests_1k=0.5))
    assert _summary(rows) == [
        ("b2b2b2b2b2b2", "batch", ("sst2",), 3000, 0, 0, pytest.approx(6.0)),
        ("a1a1a1a1a1a1", "web", ("adult", "sst2"), 2000, 10, 2, pytest.approx(2.0)),
        ("c3c3c3c3c3c3", "old", ("nope",), 0, 0, 5, None),
    ]
    assert [r.cost for r in rows] == [pytest.approx(1.5), pytest.approx(1.0), 0.0]
    assert [r.key for r in rows] == [key_usage[r.prefix or ""] for r in rows]


def test_key_cost_report_total_sums_rows_and_weights_latency(
    any_workspace: Workspace, key_usage: dict[str, str]
) -> None:
    total = key_total_of(
        key_cost_report(any_workspace.store, "default", PriceTable(requests_1k=0.5))
    )
    assert (total.key, total.prefix, total.name) == (None, None, None)
    assert total.deployments == ("adult", "nope", "sst2")
    assert (total.requests, total.errors, total.rejected) == (5000, 10, 7)
    assert total.mean_latency_ms == pytest.approx(22000.0 / 5000)
    assert total.cost == pytest.approx(2.5)


def test_key_cost_report_charges_nothing_at_the_default_price(
    workspace: Workspace,
) -> None:
    busy, quiet = add_key(workspace, "d4d4d4d4d4d4", "busy"), add_key(workspace, "e5", "quiet")
    add_usage(workspace, quiet, "sst2", "2026-03-01T14", 10)
    add_usage(workspace, busy, "sst2", "2026-03-01T14", 900)
    assert PriceTable().requests_1k == 0.0
    rows = key_cost_report(workspace.store, "default", PriceTable())
    assert [(r.name, r.requests, r.cost) for r in rows] == [("busy", 900, 0.0), ("quiet", 10, 0.0)]


@pytest.mark.parametrize(
    ("since", "requests"),
    [
        (datetime(2026, 3, 1, 13, 45, tzinfo=UTC), {"batch": 3000, "web": 1500}),
        (datetime(2026, 3, 1, 13, 0), {"batch": 3000, "web": 1500}),  # naive is UTC
        (datetime(2026, 3, 1, 16, 59, tzinfo=timezone(timedelta(hours=2))), {"batch": 2000,
                                                                              "web": 1500}),
        (datetime(2026, 3, 1, 12, 0, tzinfo=UTC), {"batch": 3000, "web": 2000}),
        (datetime(2026, 3, 1, 15, 0, tzinfo=UTC), {}),
    ],
)  # fmt: skip
def test_key_cost_report_since_includes_the_hour_holding_it(
    any_workspace: Workspace,
    key_usage: dict[str, str],
    since: datetime,
    requests: dict[str, int],
) -> None:
    rows = key_cost_report(any_workspace.store, "default", PriceTable(), since=since)
    assert {r.name: r.requests for r in rows if r.requests} == requests


def test_key_cost_report_since_from_parsed_text(
    workspace: Workspace,
) -> None:
    key = add_key(workspace, "f6f6f6f6f6f6", "recent")
    now = datetime.now(UTC)
    add_usage(workspace, key, "sst2", usage_period_of(now - timedelta(hours=3)), 7)
    add_usage(workspace, key, "sst2", usage_period_of(now - timedelta(hours=1)), 5)
    add_usage(workspace, key, "sst2", usage_period_of(now), 3)
    rows = key_cost_report(workspace.store, "default", PriceTable(), since=parse_since("90m"))
    assert [r.requests for r in rows] == [8]


def test_key_cost_report_of_no_usage_is_empty(workspace: Workspace) -> None:
    add_key(workspace, "a7a7a7a7a7a7", "unused")
    assert key_cost_report(workspace.store, "default", PriceTable(requests_1k=1.0)) == []
    total = key_total_of([])
    assert (total.requests, total.cost, total.mean_latency_ms) == (0, 0.0, None)


def test_key_cost_report_counts_the_keys_of_its_project_only(workspace: Workspace) -> None:
    key_a = add_key(workspace.in_project("team-a"), "a8a8a8a8a8a8", "key-a")
    key_b = add_key(workspace.in_project("team-b"), "b8b8b8b8b8b8", "key-b")
    add_usage(workspace, key_a, "served-a", "2026-03-01T14", 10)
    add_usage(workspace, key_b, "served-b", "2026-03-01T14", 20)
    for project, expected in (("team-a", [("key-a", 10)]), ("team-b", [("key-b", 20)])):
        rows = key_cost_report(workspace.store, project, PriceTable())
        assert [(row.name, row.requests) for row in rows] == expected
    assert key_cost_report(workspace.store, "default", PriceTable()) == []


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 1, 14, 59, 59, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=5))),
        datetime(2025, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-8))),
    ],
)
def test_usage_period_of_matches_the_gateways_period(moment: datetime) -> None:
    assert usage_period_of(moment) == usage_period(moment)


def test_cost_report_refuses_an_unknown_grouping_naming_key(workspace: Workspace) -> None:
    with pytest.raises(UsageError, match="one of job, queue, owner, model, key, not 'team'"):
        cost_report(workspace.store, "default", by="team")
    with pytest.raises(UsageError, match="key_cost_report"):
        cost_report(workspace.store, "default", by="key")


def test_price_table_example_in_the_module_docs_is_valid() -> None:
    docs = cost.__doc__ or ""
    example = re.search(r"::\n\n((?:    .*\n)+)", docs)
    assert example is not None
    table = PriceTable.model_validate(yaml.safe_load(example[1]))
    assert table.requests_1k == 0.02


def test_price_table_requests_1k_refuses_a_negative_price() -> None:
    with pytest.raises(ValueError, match="requests_1k"):
        PriceTable(requests_1k=-0.1)
