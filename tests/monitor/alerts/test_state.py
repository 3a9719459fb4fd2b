from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from forgeml.core.config import Settings
from forgeml.core.store import AlertRecord, AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import (
    AlertEvaluator,
    SampleStore,
    fired_since,
    labels_of,
    list_alerts,
    parse_rules,
)
from tests.monitor.alerts.conftest import FakeClock

RULES = """
groups:
  - name: test
    rules:
      - alert: DepthHigh
        expr: max by (model) (queue_depth) > 3
        for: 2m
        labels: {severity: warning}
        annotations:
          summary: "{{ $labels.model }} queues {{ $value }} ({{ $value | humanize }})"
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """The state machine's tests run on both stores (PostgreSQL when one answers)."""
    url = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester", db_url=url))
    try:
        yield workspace
    finally:
        workspace.close()


def _evaluator(workspace: Workspace, samples: SampleStore, clock: FakeClock) -> AlertEvaluator:
    return AlertEvaluator(
        workspace, parse_rules(RULES, "test.yml"), samples=samples, clock=clock,
        scrape_replicas=False,
    )  # fmt: skip


def _depth(samples: SampleStore, clock: FakeClock, **depths: float) -> None:
    samples.ingest(
        "test",
        [(labels_of({"__name__": "queue_depth", "model": m}), v) for m, v in depths.items()],
        clock(),
    )


def _states(workspace: Workspace) -> list[tuple[str, str]]:
    return sorted((row.labels["model"], row.state) for row in list_alerts(workspace))


def test_an_alert_goes_pending_then_firing_after_for_then_resolved(
    workspace: Workspace, clock: FakeClock
) -> None:
    samples = SampleStore()
    evaluator = _evaluator(workspace, samples, clock)
    _depth(samples, clock, a=5, b=1)
    evaluator.cycle()
    assert _states(workspace) == [("a", "pending")]
    clock.advance(60)
    _depth(samples, clock, a=5, b=1)
    evaluator.cycle()
    assert _states(workspace) == [("a", "pending")]
    clock.advance(60)
    _depth(samples, clock, a=7, b=1)
    transitions = evaluator.cycle()
    assert [(t.rule, t.state) for t in transitions] == [("DepthHigh", "firing")]
    (alert,) = list_alerts(workspace)
    assert alert.state == "firing"
    assert alert.value == 7
    assert alert.severity == "warning"
    assert alert.labels == {"alertname": "DepthHigh", "model": "a", "severity": "warning"}
    assert alert.annotations == {"summary": "a queues 7 (7)"}
    assert alert.fired_at is not None and alert.fire_seq == 1
    clock.advance(60)
    _depth(samples, clock, a=1, b=1)
    assert [t.state for t in evaluator.cycle()] == ["resolved"]
    assert _states(workspace) == [("a", "resolved")]
    # the same labels firing again later is a new alert
    for _ in range(3):
        clock.advance(60)
        _depth(samples, clock, a=9)
        evaluator.cycle()
    assert _states(workspace) == [("a", "firing"), ("a", "resolved")]
    evaluator.close()


def test_a_pending_alert_that_stops_holding_is_dropped(
    workspace: Workspace, clock: FakeClock
) -> None:
    samples = SampleStore()
    evaluator = _evaluator(workspace, samples, clock)
    _depth(samples, clock, a=5)
    evaluator.cycle()
    clock.advance(60)
    _depth(samples, clock, a=0)
    evaluator.cycle()
    assert _states(workspace) == []
    evaluator.close()


def test_a_series_that_vanishes_goes_stale_at_once(workspace: Workspace, clock: FakeClock) -> None:
    samples = SampleStore()
    evaluator = _evaluator(workspace, samples, clock)
    for _ in range(3):
        _depth(samples, clock, a=5)
        evaluator.cycle()
        clock.advance(60)
    assert _states(workspace) == [("a", "firing")]
    _depth(samples, clock)  # the target no longer exports it: a staleness marker
    evaluator.cycle()
    assert _states(workspace) == [("a", "resolved")]
    evaluator.close()


def test_a_restarted_evaluator_neither_duplicates_nor_loses_an_alert(
    workspace: Workspace, clock: FakeClock
) -> None:
    samples = SampleStore()
    first = _evaluator(workspace, samples, clock)
    _depth(samples, clock, a=5)
    first.cycle()
    first.close()
    # a second server (a restart) on the same store continues the pending alert's clock
    second = _evaluator(workspace, samples, clock)
    clock.advance(120)
    _depth(samples, clock, a=5)
    assert [t.state for t in second.cycle()] == ["firing"]
    clock.advance(60)
    _depth(samples, clock, a=5)
    assert second.cycle() == []
    third = _evaluator(workspace, samples, clock)
    assert third.cycle() == []  # the firing alert is neither fired again nor lost
    assert _states(workspace) == [("a", "firing")]
    with workspace.store.session() as session:
        fires = session.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "alert.fire")
        )
    assert fires == 1
    second.close()
    third.close()


def test_fired_since_returns_each_firing_once_in_order(
    workspace: Workspace, clock: FakeClock
) -> None:
    samples = SampleStore()
    evaluator = _evaluator(workspace, samples, clock)
    _depth(samples, clock, a=5)
    evaluator.cycle()
    clock.advance(150)
    _depth(samples, clock, a=5, b=5)
    evaluator.cycle()
    first = fired_since(workspace, 0)
    assert [(a.labels["model"], a.fire_seq) for a in first] == [("a", 1)]
    clock.advance(150)
    _depth(samples, clock, a=0, b=5)
    evaluator.cycle()  # a resolves, b fires
    later = fired_since(workspace, first[-1].fire_seq or 0)
    assert [(a.labels["model"], a.fire_seq) for a in later] == [("b", 2)]
    assert fired_since(workspace, 2) == []
    assert [a.state for a in fired_since(workspace, 0)] == ["resolved", "firing"]
    evaluator.close()


def test_an_alerts_row_is_unique_while_active(workspace: Workspace, clock: FakeClock) -> None:
    samples = SampleStore()
    evaluators = [_evaluator(workspace, samples, clock) for _ in range(2)]
    for _ in range(4):
        _depth(samples, clock, a=5)
        for evaluator in evaluators:
            evaluator.cycle()
        clock.advance(60)
    with workspace.store.session() as session:
        assert session.scalar(select(func.count()).select_from(AlertRecord)) == 1
    for evaluator in evaluators:
        evaluator.close()


RATE_RULES = """
groups:
  - name: test
    rules:
      - alert: Failing
        expr: sum by (model) (rate(errors_total[5m])) > 0.1
"""


def test_a_restart_with_an_empty_sample_store_does_not_resolve_a_firing_alert(
    workspace: Workspace, clock: FakeClock
) -> None:
    def evaluator(samples: SampleStore) -> AlertEvaluator:
        rules = parse_rules(RATE_RULES, "t.yml")
        return AlertEvaluator(workspace, rules, samples=samples, clock=clock, scrape_replicas=False)

    def scrape(samples: SampleStore, count: float) -> None:
        series = labels_of({"__name__": "errors_total", "model": "a"})
        samples.ingest("t", [(series, count)], clock())

    samples = SampleStore()
    first = evaluator(samples)
    for count in (0, 60, 120):
        scrape(samples, count)
        first.cycle()
        clock.advance(60)
    assert _states(workspace) == [("a", "firing")]
    first.close()
    # the restarted server's store is empty: one sample, no rate yet, no result
    fresh = SampleStore()
    second = evaluator(fresh)
    scrape(fresh, 180)
    assert second.cycle() == []
    assert _states(workspace) == [("a", "firing")]
    clock.advance(60)
    scrape(fresh, 240)
    assert second.cycle() == []  # the rate is back: the same alert goes on
    # once the window is full, silence resolves it as before
    for _ in range(6):
        clock.advance(60)
        scrape(fresh, 240)
        second.cycle()
    assert _states(workspace) == [("a", "resolved")]
    second.close()
