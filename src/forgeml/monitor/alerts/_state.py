"""The alert state machine, kept in the store: inactive -> pending -> firing -> resolved.

It follows Prometheus' alerting rules (rules/alerting.go): each result of a rule's
expression is an alert identified by its labels (the result's, the rule's, `alertname`);
a new one is pending from that evaluation on and fires once it has been active for the
rule's `for` (at once when that is 0); a pending alert whose expression stops holding is
dropped, a firing one is resolved. No state lives in memory: every evaluation reads the
active alerts from the store and writes the transitions in one transaction per rule, so
a restarted server (or a second one on the same store) continues the same alerts instead
of starting them anew, and the unique `active_key` keeps one active row per alert. A new
alert is filed in the project of the subject its labels name (`_subjects.alert_project`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forgeml.core.ids import json_digest, new_id
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._promql import PromQLError
from forgeml.monitor.alerts._query import evaluate
from forgeml.monitor.alerts._rules import AlertRule
from forgeml.monitor.alerts._samples import SampleStore
from forgeml.monitor.alerts._subjects import alert_project

log = logging.getLogger(__name__)

PENDING, FIRING, RESOLVED = "pending", "firing", "resolved"
STATES = (PENDING, FIRING, RESOLVED)
FORGEML, ALERTMANAGER = "forgeml", "alertmanager"


@dataclass(frozen=True)
class Instance:
    """One result of a rule at one evaluation: an alert's labels, annotations and value."""

    labels: dict[str, str]
    annotations: dict[str, str]
    value: float

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def fingerprint(labels: dict[str, str]) -> str:
    """16 hex digits identifying a label set (the width of Alertmanager's fingerprints)."""
    return json_digest(labels)[:16]


def as_utc(moment: datetime) -> datetime:
    """`moment` timezone-aware (SQLite hands back naive datetimes, always UTC here)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def instances(
    rule: AlertRule, samples: SampleStore, at: float, external_url: str = ""
) -> list[Instance]:
    """What `rule` yields at `at`: one instance per series its expression returns."""
    result = evaluate(rule.node, samples, at)
    if isinstance(result, float):  # compile_expr refuses scalar rules; a guard only
        raise PromQLError(f"rule {rule.name} returned a scalar")
    out = []
    for series, value in result.items():
        series_labels = {name: text for name, text in series if name != "__name__"}
        labels = dict(series_labels)
        for name, template in rule.labels.items():
            labels[name] = template.expand(series_labels, value, external_url)
        labels["alertname"] = rule.name
        annotations = {
            name: template.expand(series_labels, value, external_url)
            for name, template in rule.annotations.items()
        }
        out.append(Instance(labels, annotations, value))
    return out


@dataclass(frozen=True)
class Transition:
    """An alert that started firing or was resolved at this evaluation."""

    alert_id: str
    rule: str
    state: str


def _next_fire_seq(session: Session) -> int:
    # writers are serialised (BEGIN IMMEDIATE / an advisory lock), so max + 1 is taken in
    # commit order: a reader that saw seq n never later finds a new row below n
    return int(session.scalar(select(func.coalesce(func.max(AlertRecord.fire_seq), 0))) or 0) + 1


def fire(session: Session, record: AlertRecord, moment: datetime) -> None:
    """Move `record` to firing at `moment`, numbering it for `fired_since`."""
    record.state = FIRING
    record.fired_at = moment
    record.fire_seq = _next_fire_seq(session)


def resolve(record: AlertRecord, moment: datetime) -> None:
    record.state = RESOLVED
    record.resolved_at = moment
    record.active_key = None


def record_evaluation(
    workspace: Workspace,
    results: list[tuple[AlertRule, list[Instance]]],
    at: float,
    warming: frozenset[str] = frozenset(),
) -> list[Transition]:
    """Record one evaluation at `at` (each rule with the instances it yielded) in one
    transaction. A rule left out of `results` (its evaluation failed) keeps its alerts as
    they are, as Prometheus does. A rule in `warming` (its window not yet filled since the
    evaluator started: a restart) applies what it found, but an alert it did not find is
    kept as it is rather than resolved: no data yet is not the end of the problem.

    Returns the alerts that started firing or were resolved. A concurrent evaluator that
    recorded the same alert first makes this transaction fail on `active_key`; it is
    rolled back whole and the next cycle continues from what the other wrote.
    """
    moment = datetime.fromtimestamp(at, UTC)
    transitions: list[Transition] = []
    try:
        with workspace.store.session() as session:
            active: dict[str, dict[str, AlertRecord]] = {}
            for record in session.scalars(
                select(AlertRecord).where(
                    AlertRecord.source == FORGEML, AlertRecord.active_key.is_not(None)
                )
            ):
                active.setdefault(record.rule, {})[record.fingerprint] = record
            for rule, found in results:
                left = active.get(rule.name, {})
                transitions += _apply_rule(workspace, session, rule, found, left, moment)
                if rule.name not in warming:
                    transitions += _end_missing(workspace, session, rule, left, moment)
    except IntegrityError:
        log.warning("alerts: another evaluator recorded this cycle first; retried next cycle")
        return []
    return transitions


def _apply_rule(
    workspace: Workspace,
    session: Session,
    rule: AlertRule,
    found: list[Instance],
    active: dict[str, AlertRecord],
    moment: datetime,
) -> list[Transition]:
    transitions = []
    for instance in found:
        record = active.pop(instance.fingerprint, None)
        if record is None:
            record = _new_record(session, instance, rule, moment)
            session.add(record)
        record.value = instance.value
        record.annotations = instance.annotations
        record.updated_at = moment
        held = (moment - as_utc(record.started_at)).total_seconds()
        if record.state == PENDING and held >= rule.hold_s:
            fire(session, record, moment)
            session.flush()
            transitions.append(Transition(record.id, rule.name, FIRING))
            _audit(workspace, session, "alert.fire", record)
    return transitions


def _end_missing(
    workspace: Workspace,
    session: Session,
    rule: AlertRule,
    active: dict[str, AlertRecord],
    moment: datetime,
) -> list[Transition]:
    """Drop the pending alerts `rule` no longer yields and resolve the firing ones."""
    transitions = []
    for record in active.values():
        if record.state == PENDING:
            session.delete(record)
            continue
        resolve(record, moment)
        transitions.append(Transition(record.id, rule.name, RESOLVED))
        _audit(workspace, session, "alert.resolve", record)
    return transitions


def _new_record(
    session: Session, instance: Instance, rule: AlertRule, moment: datetime
) -> AlertRecord:
    return AlertRecord(
        id=new_id(),
        project=alert_project(session, instance.labels),
        fingerprint=instance.fingerprint,
        active_key=f"{FORGEML}:{instance.fingerprint}",
        rule=rule.name,
        labels=instance.labels,
        annotations=instance.annotations,
        severity=instance.labels.get("severity"),
        state=PENDING,
        value=instance.value,
        started_at=moment,
        source=FORGEML,
        updated_at=moment,
    )


def _audit(workspace: Workspace, session: Session, action: str, record: AlertRecord) -> None:
    payload: dict[str, Any] = {
        "rule": record.rule,
        "labels": record.labels,
        "source": record.source,
    }
    workspace.audit(session, action, f"alert:{record.id}", payload)


Clock = Callable[[], float]
