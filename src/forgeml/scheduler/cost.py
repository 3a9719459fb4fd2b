"""Cost: price job attempts and gateway requests, report spend by who used it, watch budgets.

Each attempt's measured use (CPU-seconds, GPU-seconds, memory GB-seconds; see
`forgeml.scheduler._usage`) is priced with a `PriceTable` when the attempt ends, and the
price is kept on the attempt row, so a later change of prices does not rewrite history.
The table is `FORGEML_HOME/prices.yaml` when present, for example::

    cpu_hour: 0.04        # per CPU core-hour
    gpu_hour: 3.0         # per GPU-hour
    memory_gb_hour: 0.005 # per GB-hour of resident memory
    requests_1k: 0.02     # per 1,000 requests through the gateway (default 0: free)
    currency: USD

Gateway requests are priced when reported (`key_cost_report`, `--by key`), at the table's
`requests_1k`, from the per-key hourly counts the gateway flushes to `key_usage`: those
counts keep no price, so a change of `requests_1k` reprices past requests too.

Reports are a project's: `cost_report` sums the attempts of one project's jobs (so its
models' too) and `key_cost_report` the requests of one project's gateway keys. Queues are
install-wide, and so are their budgets: a budget is a threshold on the total cost of its
jobs' attempts, whichever project ran them (`budget_status`, read under `queues:read` in
`default`, as the queues are). `check_budgets`
writes one `cost.budget_exceeded` audit event (and logs a warning) when a queue goes over,
and does not repeat it for that queue until its budget changes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat
from sqlalchemy import func, null, select
from sqlalchemy.orm import Session

from forgeml.core.configfile import load_yaml_model
from forgeml.core.errors import UsageError
from forgeml.core.store import (
    ApiKeyRecord,
    AuditEvent,
    JobAttemptRecord,
    JobRecord,
    KeyUsageRecord,
    QueueRecord,
    Store,
)
from forgeml.scheduler.executors.base import AttemptUsage

if TYPE_CHECKING:
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace

log = logging.getLogger(__name__)

PRICES_FILE = "prices.yaml"
BUDGET_EXCEEDED = "cost.budget_exceeded"
ReportKey = Literal["job", "queue", "owner", "model", "key"]
REPORT_KEYS: tuple[str, ...] = get_args(ReportKey)
_SECONDS_PER_HOUR = 3600.0


class PriceTable(BaseModel):
    """Prices per unit of measured use.

    The defaults are rough public-cloud on-demand list prices (2024-25): a general-purpose
    VM's price split into about $0.04 per vCPU-hour and $0.005 per GB-hour of memory, and
    about $3 per hour for a data-centre GPU of the A100 class. Set your own in
    `FORGEML_HOME/prices.yaml`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_hour: NonNegativeFloat = Field(0.04, description="Price of one CPU core for an hour.")
    gpu_hour: NonNegativeFloat = Field(3.0, description="Price of one GPU for an hour.")
    memory_gb_hour: NonNegativeFloat = Field(
        0.005, description="Price of one GB of resident memory for an hour."
    )
    # 0 by default: serving is charged only once an operator sets a price in prices.yaml
    requests_1k: NonNegativeFloat = Field(
        0.0, description="Price of 1,000 requests forwarded by the gateway (0: not charged)."
    )
    currency: str = Field("USD", min_length=1, max_length=8, description="Currency of prices.")


def load_price_table(settings: Settings) -> PriceTable:
    """`FORGEML_HOME/prices.yaml` when it exists, else the default prices.

    Raises:
        ConfigError: the file is not valid YAML or has an unknown or negative price.
    """
    path = settings.home / PRICES_FILE
    if not path.is_file():
        return PriceTable()
    return load_yaml_model(path, PriceTable)


def price(usage: AttemptUsage, table: PriceTable) -> float:
    """What `usage` costs at `table`'s prices (wall time itself is free: it is what it used)."""
    return (
        usage.cpu_seconds * table.cpu_hour
        + usage.gpu_seconds * table.gpu_hour
        + usage.memory_gb_seconds * table.memory_gb_hour
    ) / _SECONDS_PER_HOUR


# ---- reports

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A start time from `7d`, `24h`, `30m`, `2w` (before `now`) or an ISO date/time.

    An ISO time without a zone is taken as UTC (every stored time is UTC).

    Raises:
        UsageError: `text` is neither.
    """
    text = text.strip()
    match = _DURATION.match(text)
    if match:
        amount, unit = float(match[1]), _UNITS[match[2]]
        return (now or datetime.now(UTC)) - timedelta(**{unit: amount})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since '{text}' is neither a duration like 7d, 24h or 30m "
            "nor an ISO date like 2026-01-31."
        ) from None
    return _utc(moment)


@dataclass(frozen=True)
class CostRow:
    """Summed use and cost of the attempts of one job, queue, owner or model."""

    key: str | None  # the job id, queue, owner or model name (None: jobs without a model)
    name: str | None  # the job's name when grouped by job
    attempts: int
    cpu_seconds: float
    gpu_seconds: float
    memory_gb_seconds: float
    wall_seconds: float
    cost: float


_GROUP_COLUMNS = {
    "job": JobRecord.id,
    "queue": JobRecord.queue,
    "owner": JobRecord.owner,
    "model": JobRecord.model_name,
}


def cost_report(
    store: Store, project: str, by: str = "job", since: datetime | None = None
) -> list[CostRow]:
    """Use and cost of `project`'s job attempts grouped `by` job, queue, owner or model,
    costliest first.

    Args:
        store: the metadata store.
        project: whose jobs are counted.
        by: "job", "queue", "owner" or "model" (the config's name of train/tune jobs).
        since: only attempts started at or after this time.

    Raises:
        UsageError: `by` is none of those (`key` is `key_cost_report`'s).
    """
    if by == "key":
        raise UsageError("Gateway usage by key is reported by key_cost_report, not cost_report.")
    if by not in _GROUP_COLUMNS:
        raise UsageError(f"--by must be one of {', '.join(REPORT_KEYS)}, not '{by}'.")
    key = _GROUP_COLUMNS[by]
    attempt = JobAttemptRecord
    statement = (
        select(
            key,
            func.max(JobRecord.name) if by == "job" else null(),
            func.count(attempt.id),
            *(
                func.coalesce(func.sum(column), 0.0)
                for column in (
                    attempt.cpu_seconds,
                    attempt.gpu_seconds,
                    attempt.memory_gb_seconds,
                    attempt.wall_seconds,
                    attempt.cost,
                )
            ),
        )
        .select_from(attempt)
        .join(JobRecord, attempt.job_id == JobRecord.id)
        .where(JobRecord.project == project)
        .group_by(key)
    )
    if since is not None:
        statement = statement.where(attempt.started_at >= _utc(since))
    with store.session() as session:
        rows = [
            CostRow(key, name, int(attempts), *(float(value) for value in sums))
            for key, name, attempts, *sums in session.execute(statement)
        ]
    return sorted(rows, key=lambda row: (-row.cost, row.key is None, row.key or ""))


def total_of(rows: list[CostRow]) -> CostRow:
    """The sum of report rows (key and name None)."""
    return CostRow(
        key=None,
        name=None,
        attempts=sum(row.attempts for row in rows),
        cpu_seconds=sum(row.cpu_seconds for row in rows),
        gpu_seconds=sum(row.gpu_seconds for row in rows),
        memory_gb_seconds=sum(row.memory_gb_seconds for row in rows),
        wall_seconds=sum(row.wall_seconds for row in rows),
        cost=sum(row.cost for row in rows),
    )


# ---- gateway usage by key


@dataclass(frozen=True)
class KeyCostRow:
    """Gateway requests of one API key over all its deployments, and what they cost."""

    key: str | None  # the key's id (None: the total row)
    prefix: str | None  # its public prefix (None: total, or a key no longer in `api_keys`)
    name: str | None
    deployments: tuple[str, ...]
    requests: int  # forwarded to a replica (errors included); these are charged
    errors: int  # forwarded and answered 5xx
    rejected: int  # refused by the gateway (scope, quota, rate, unknown deployment)
    mean_latency_ms: float | None  # over forwarded requests; None without any
    cost: float


# `key_usage.period`: the UTC hour; fixed width, so text order is time order
PERIOD_FORMAT = "%Y-%m-%dT%H"


def usage_period_of(moment: datetime) -> str:
    """The `key_usage.period` holding `moment`: its UTC hour, e.g. `2026-12-01T14`."""
    return _utc(moment).strftime(PERIOD_FORMAT)


def key_cost_report(
    store: Store, project: str, table: PriceTable, since: datetime | None = None
) -> list[KeyCostRow]:
    """Gateway requests and their cost per API key of `project`, costliest (then busiest)
    first.

    Reads `key_usage` as the gateway last flushed it, so figures lag live traffic by at
    most the gateway's usage flush interval.

    Args:
        store: the metadata store.
        project: whose keys are counted.
        table: prices; a key's cost is its forwarded requests / 1000 * `table.requests_1k`.
        since: only usage from the UTC hour that contains this time on.
    """
    keys: dict[str, _KeyTotals] = {}
    for key_id, prefix, name, deployment, *counts in key_usage_rows(store, project, since):
        keys.setdefault(key_id, _KeyTotals(prefix, name)).add(deployment, *counts)
    rows = [totals.row(key_id, table) for key_id, totals in keys.items()]
    return sorted(rows, key=lambda row: (-row.cost, -row.requests, row.prefix or "", row.key))


def key_usage_rows(
    store: Store, project: str, since: datetime | None = None
) -> list[tuple[Any, ...]]:
    """Summed `key_usage` of `project`'s keys per key and deployment, from the UTC hour
    holding `since` on.

    Returns:
        (key_id, prefix, name, deployment, requests, errors, rejected, latency_ms_total)
        tuples ordered by prefix then deployment.
    """
    usage = KeyUsageRecord
    statement = (
        select(
            usage.key_id,
            ApiKeyRecord.prefix,
            ApiKeyRecord.name,
            usage.deployment,
            func.sum(usage.requests),
            func.sum(usage.errors),
            func.sum(usage.rejected),
            func.sum(usage.latency_ms_total),
        )
        .select_from(usage)
        # a key is never deleted (a revoke keeps its row), so its usage always finds it
        .join(ApiKeyRecord, ApiKeyRecord.id == usage.key_id)
        .where(ApiKeyRecord.project == project)
        .group_by(usage.key_id, ApiKeyRecord.prefix, ApiKeyRecord.name, usage.deployment)
        .order_by(ApiKeyRecord.prefix, usage.deployment)
    )
    if since is not None:
        statement = statement.where(usage.period >= usage_period_of(since))
    with store.session() as session:
        return [tuple(row) for row in session.execute(statement)]


def key_total_of(rows: list[KeyCostRow]) -> KeyCostRow:
    """The sum of key report rows (key, prefix and name None; latency weighted by requests)."""
    requests = sum(row.requests for row in rows)
    latency = sum((row.mean_latency_ms or 0.0) * row.requests for row in rows)
    return KeyCostRow(
        key=None,
        prefix=None,
        name=None,
        deployments=tuple(sorted({name for row in rows for name in row.deployments})),
        requests=requests,
        errors=sum(row.errors for row in rows),
        rejected=sum(row.rejected for row in rows),
        mean_latency_ms=latency / requests if requests else None,
        cost=sum(row.cost for row in rows),
    )


@dataclass
class _KeyTotals:
    prefix: str | None
    name: str | None
    deployments: set[str] = field(default_factory=set)
    requests: int = 0
    errors: int = 0
    rejected: int = 0
    latency_ms_total: float = 0.0

    def add(
        self,
        deployment: str,
        requests: int | None,
        errors: int | None,
        rejected: int | None,
        latency: float | None,
    ) -> None:
        """Count one (key, deployment) group's sums (None: SQL's sum of no rows)."""
        self.deployments.add(deployment)
        self.requests += int(requests or 0)
        self.errors += int(errors or 0)
        self.rejected += int(rejected or 0)
        self.latency_ms_total += float(latency or 0.0)

    def row(self, key_id: str, table: PriceTable) -> KeyCostRow:
        return KeyCostRow(
            key=key_id,
            prefix=self.prefix,
            name=self.name,
            deployments=tuple(sorted(self.deployments)),
            requests=self.requests,
            errors=self.errors,
            rejected=self.rejected,
            mean_latency_ms=self.latency_ms_total / self.requests if self.requests else None,
            cost=self.requests / 1000.0 * table.requests_1k,
        )


def _utc(moment: datetime) -> datetime:
    # SQLite keeps times as naive UTC text, so compare in UTC on every backend
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# ---- budgets


@dataclass(frozen=True)
class BudgetStatus:
    """A queue's spend (total cost of its jobs' attempts) against its budget."""

    queue: str
    budget: float
    spend: float

    @property
    def exceeded(self) -> bool:
        return self.spend > self.budget


def budget_status(store: Store) -> list[BudgetStatus]:
    """Spend against budget of every queue that has a budget, by queue name."""
    with store.session() as session:
        return _budget_statuses(session)


def _budget_statuses(session: Session) -> list[BudgetStatus]:
    spend = dict(
        session.execute(
            select(JobRecord.queue, func.coalesce(func.sum(JobAttemptRecord.cost), 0.0))
            .select_from(JobAttemptRecord)
            .join(JobRecord, JobAttemptRecord.job_id == JobRecord.id)
            .group_by(JobRecord.queue)
        ).all()
    )
    queues = session.execute(
        select(QueueRecord.name, QueueRecord.budget)
        .where(QueueRecord.budget.is_not(None))
        .order_by(QueueRecord.name)
    ).all()
    return [
        BudgetStatus(queue=name, budget=float(budget), spend=float(spend.get(name, 0.0)))
        for name, budget in queues
        if budget is not None
    ]


def check_budgets(workspace: Workspace) -> list[BudgetStatus]:
    """Alert once for each queue newly over its budget; returns the queues alerted now.

    An alert is a `cost.budget_exceeded` audit event on `queue:<name>` plus a logged
    warning. A queue already alerted at its current budget is not alerted again; after
    its budget changes it is, if it is over the new one. The check and the alert happen in
    one transaction (which holds the store's write lock), so two processes checking at
    once alert once.
    """
    alerted: list[BudgetStatus] = []
    with workspace.store.session() as session:
        for status in _budget_statuses(session):
            ref = f"queue:{status.queue}"
            if not status.exceeded or _alerted_budget(session, ref) == status.budget:
                continue
            payload = {"queue": status.queue, "budget": status.budget, "spend": status.spend}
            workspace.audit(session, BUDGET_EXCEEDED, ref, payload)
            alerted.append(status)
    for status in alerted:
        log.warning(
            "Queue '%s' is over its budget: spent %.2f of %.2f.",
            status.queue,
            status.spend,
            status.budget,
        )
    return alerted


def _alerted_budget(session: Session, ref: str) -> float | None:
    """The budget at the queue's last alert, or None when it was never alerted."""
    payload = session.scalar(
        select(AuditEvent.payload)
        .where(AuditEvent.action == BUDGET_EXCEEDED, AuditEvent.object_ref == ref)
        .order_by(AuditEvent.seq.desc())
        .limit(1)
    )
    return None if payload is None else float(payload["budget"])


def cost_summary(
    workspace: Workspace, by: str = "job", since: datetime | None = None
) -> dict[str, Any]:
    """What `cost report --json` prints for the workspace's project: use and cost grouped
    `by` job, queue, owner, model, or (`by="key"`) gateway requests by key, costliest first,
    with their total."""
    from dataclasses import asdict

    if by == "key":
        table = load_price_table(workspace.settings)
        key_rows = key_cost_report(workspace.store, workspace.project, table, since=since)
        return {
            "by": "key",
            "since": since,
            "currency": table.currency,
            "requests_1k": table.requests_1k,
            "rows": [asdict(row) for row in key_rows],
            "total": asdict(key_total_of(key_rows)) | {"key": "total"},
        }
    currency = load_price_table(workspace.settings).currency
    rows = cost_report(workspace.store, workspace.project, by=by, since=since)
    return {
        "by": by,
        "since": since,
        "currency": currency,
        "rows": [asdict(row) for row in rows],
        "total": asdict(total_of(rows)) | {"key": "total"},
    }


def budgets_summary(workspace: Workspace) -> dict[str, Any]:
    """What `cost budgets --json` prints: spend against budget of every queue with one,
    install-wide (every project's jobs count against a queue's budget)."""
    from dataclasses import asdict

    currency = load_price_table(workspace.settings).currency
    statuses = budget_status(workspace.store)
    queues = [asdict(status) | {"exceeded": status.exceeded} for status in statuses]
    return {"currency": currency, "queues": queues}
