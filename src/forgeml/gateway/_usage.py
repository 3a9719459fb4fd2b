"""Per-key usage: requests, errors, rejections and latency per key, deployment and UTC hour.

Counted in memory on the hot path and flushed to `key_usage` every few seconds and at
shutdown with one upsert (`INSERT ... ON CONFLICT DO UPDATE`, which SQLite and PostgreSQL
both speak), so concurrent gateways add up instead of overwriting each other. Usage counters
are metering, like Prometheus counters: they are not audited (an event per flush would bury
the audit log).
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from forgeml.core.ids import new_id
from forgeml.core.store import KeyUsageRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.cost import PERIOD_FORMAT, key_usage_rows, usage_period_of


@dataclass
class _Counts:
    requests: int = 0
    errors: int = 0
    rejected: int = 0
    latency_ms_total: float = 0.0


def usage_period(moment: datetime | None = None) -> str:
    """The `key_usage.period` of a moment (default now): its UTC hour, e.g. `2026-12-01T14`."""
    if moment is not None:
        return usage_period_of(moment)
    return _hour_period(int(time.time() // 3600))


@functools.lru_cache(maxsize=2)
def _hour_period(hour: int) -> str:
    # the hot path asks once per request: format only when the hour changes
    return datetime.fromtimestamp(hour * 3600, UTC).strftime(PERIOD_FORMAT)


class UsageRecorder:
    """Counts in memory; `flush()` writes them to the store (call it off the event loop)."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str], _Counts] = {}
        # forwarded requests per key today: stored at the last flush / pending / being flushed
        self._stored_today: dict[str, int] = {}
        self._pending_today: dict[str, int] = {}
        self._flushing_today: dict[str, int] = {}
        self._day = usage_period()[:10]

    def record(
        self, key_id: str, deployment: str, *, forwarded: bool, error: bool, latency_ms: float
    ) -> None:
        """Count one request: forwarded (and maybe failed) or rejected by the gateway."""
        slot = (key_id, deployment, usage_period())
        with self._lock:
            counts = self._pending.get(slot)
            if counts is None:
                counts = self._pending[slot] = _Counts()
            if forwarded:
                counts.requests += 1
                counts.errors += int(error)
                counts.latency_ms_total += latency_ms
                self._pending_today[key_id] = self._pending_today.get(key_id, 0) + 1
            else:
                counts.rejected += 1

    def requests_today(self, key_id: str) -> int:
        """Forwarded requests of `key_id` this UTC day (stored plus not yet flushed)."""
        with self._lock:
            stored = self._stored_today.get(key_id, 0) if usage_period()[:10] == self._day else 0
            return stored + self._pending_today.get(key_id, 0) + self._flushing_today.get(key_id, 0)

    def load(self) -> None:
        """Read today's stored totals (at start, so a restart keeps counting the quota)."""
        with self._workspace.store.session() as session:
            day, totals = _read_today(session)
        with self._lock:
            self._day, self._stored_today = day, totals

    def flush(self) -> int:
        """Write pending counts to the store; returns how many rows were upserted."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._flushing_today, self._pending_today = self._pending_today, {}
        try:
            # the store write runs outside the lock so the hot path never waits on it
            with self._workspace.store.session() as session:
                for (key_id, deployment, period), counts in pending.items():
                    session.execute(_upsert(session, key_id, deployment, period, counts))
                day, totals = _read_today(session)
        except Exception:
            with self._lock:  # keep the counts for the next flush rather than lose them
                for slot, counts in pending.items():
                    _merge(self._pending.setdefault(slot, _Counts()), counts)
                for key_id, count in self._flushing_today.items():
                    self._pending_today[key_id] = self._pending_today.get(key_id, 0) + count
                self._flushing_today = {}
            raise
        with self._lock:
            self._day, self._stored_today, self._flushing_today = day, totals, {}
        return len(pending)


def _merge(into: _Counts, counts: _Counts) -> None:
    into.requests += counts.requests
    into.errors += counts.errors
    into.rejected += counts.rejected
    into.latency_ms_total += counts.latency_ms_total


def _read_today(session: Any) -> tuple[str, dict[str, int]]:
    day = usage_period()[:10]
    rows = session.execute(
        select(KeyUsageRecord.key_id, func.sum(KeyUsageRecord.requests))
        .where(KeyUsageRecord.period.startswith(day))
        .group_by(KeyUsageRecord.key_id)
    ).all()
    return day, {key_id: int(total or 0) for key_id, total in rows}


def _upsert(session: Any, key_id: str, deployment: str, period: str, counts: _Counts) -> Any:
    insert: Any
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    table: Any = KeyUsageRecord.__table__
    statement = insert(table).values(
        id=new_id(), key_id=key_id, deployment=deployment, period=period,
        requests=counts.requests, errors=counts.errors, rejected=counts.rejected,
        latency_ms_total=counts.latency_ms_total,
    )  # fmt: skip
    added = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=["key_id", "deployment", "period"],
        set_={
            name: table.c[name] + added[name]
            for name in ("requests", "errors", "rejected", "latency_ms_total")
        },
    )


def usage_report(workspace: Workspace, since: datetime | None = None) -> list[dict[str, Any]]:
    """Usage per key of the workspace's project and deployment (for cost reports), from
    `since` (UTC hour) on.

    Returns:
        Rows with key_id, prefix, name, deployment, requests, errors, rejected and
        mean_latency_ms, ordered by key prefix then deployment.
    """
    rows = key_usage_rows(workspace.store, workspace.project, since)
    return [
        {
            "key_id": key_id,
            "prefix": prefix,
            "name": name,
            "deployment": deployment,
            "requests": int(requests),
            "errors": int(errors),
            "rejected": int(rejected),
            "mean_latency_ms": round(latency / requests, 3) if requests else None,
        }
        for key_id, prefix, name, deployment, requests, errors, rejected, latency in rows
    ]
