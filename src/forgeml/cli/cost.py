"""`forgeml cost report|budgets`: what jobs and gateway keys used and cost; queue budgets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.gateway import GatewayOptions
from forgeml.sdk.local import LocalCost

if TYPE_CHECKING:
    from datetime import datetime

    from forgeml.scheduler.cost import CostRow, KeyCostRow

app = typer.Typer(
    help="Measured use and cost of jobs and gateway keys; queue budgets.", no_args_is_help=True
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
_FLUSH_S = GatewayOptions.model_fields["usage_flush_s"].default
# a key's deployments shown in the table before "+N more" (--json lists them all)
_SHOWN_DEPLOYMENTS = 3
_REPORT_HELP = (
    "Use and cost, costliest first, of the project's job attempts or of gateway requests per "
    "key of the project (FORGEML_PROJECT).\n\n"
    "Job attempts: CPU, GPU and memory use, wall time and cost. API keys (--by key): "
    "deployments, requests, errors, rejections, mean latency, and cost at prices.yaml's "
    "requests_1k per 1,000 requests (0 unless set). The gateway flushes usage every "
    f"{_FLUSH_S:g} s (usage_flush_s), so key figures lag live traffic by at most that "
    "flush interval."
)


def _cost() -> Any:
    from forgeml.cli._remote import source

    return source(lambda client: client.cost, LocalCost)


@app.command("report", help=_REPORT_HELP)
def report(
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="Group job attempts by job, queue, owner or model, or gateway requests by key.",
            show_default=True,
        ),
    ] = "job",
    since: Annotated[
        str | None,
        typer.Option(
            help="Only attempts started since (with --by key: usage from the UTC hour holding "
            "it on): a duration (7d, 24h, 30m) or ISO date."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Use and cost of the project's job attempts or gateway keys, costliest first (help:
    `_REPORT_HELP`)."""
    from forgeml.scheduler.cost import CostRow, parse_since

    start = parse_since(since) if since is not None else None  # a bad one: refused here
    summary = _cost().report(by, since)
    if as_json:
        print_json(summary)
        return
    if by == "key":
        _key_report(summary, start)
        return
    rows = [CostRow(**row) for row in summary["rows"]]
    title = f"cost by {by}" + (f" since {start:%Y-%m-%d %H:%M} UTC" if start else "")
    columns = [by, "attempts", "CPU s", "GPU s", "memory GB·s", "wall s"]
    columns.append(f"cost ({summary['currency']})")
    if by == "job":
        columns.insert(1, "name")
    table = [_report_cells(row, by) for row in rows]
    if rows:
        table.append(_report_cells(CostRow(**summary["total"]), by, label="total"))
    print_table(title, columns, table)


def _report_cells(row: CostRow, by: str, label: str | None = None) -> list[str]:
    key = label or (row.key[:12] if by == "job" and row.key else row.key or "-")
    cells = [
        key,
        str(row.attempts),
        f"{row.cpu_seconds:,.1f}",
        f"{row.gpu_seconds:,.1f}",
        f"{row.memory_gb_seconds:,.1f}",
        f"{row.wall_seconds:,.1f}",
        f"{row.cost:,.4f}",
    ]
    if by == "job":
        cells.insert(1, row.name or "")
    return cells


def _key_report(summary: dict[str, Any], start: datetime | None) -> None:
    from forgeml.scheduler.cost import KeyCostRow

    def row_of(fields: dict[str, Any]) -> KeyCostRow:
        return KeyCostRow(**{**fields, "deployments": tuple(fields["deployments"])})

    rows = [row_of(row) for row in summary["rows"]]
    title = "gateway cost by key" + (f" since {start:%Y-%m-%d %H}:00 UTC" if start else "")
    # the prefix is how people name a key (`forgeml keys list`); --json has the id too
    columns = ["key", "name", "deployments", "requests", "errors", "rejected", "mean ms"]
    columns.append(f"cost ({summary['currency']})")
    cells = [_key_cells(row) for row in rows]
    if rows:
        cells.append(_key_cells(row_of({**summary["total"], "key": None}), label="total"))
    print_table(title, columns, cells)


def _key_cells(row: KeyCostRow, label: str | None = None) -> list[str]:
    names = list(row.deployments[:_SHOWN_DEPLOYMENTS])
    if len(row.deployments) > _SHOWN_DEPLOYMENTS:
        names.append(f"+{len(row.deployments) - _SHOWN_DEPLOYMENTS} more")
    # the total row counts deployments: listing the union again adds nothing
    deployments = f"{len(row.deployments)} in all" if label else ", ".join(names)
    return [
        label or row.prefix or (row.key or "-")[:12],
        row.name or "",
        deployments,
        f"{row.requests:,}",
        f"{row.errors:,}",
        f"{row.rejected:,}",
        "-" if row.mean_latency_ms is None else f"{row.mean_latency_ms:,.2f}",
        f"{row.cost:,.4f}",
    ]


@app.command("budgets")
def budgets(as_json: JsonFlag = False) -> None:
    """Spend (every project's) against budget of every queue that has one."""
    summary = _cost().budgets()
    if as_json:
        print_json(summary)
        return
    statuses = summary["queues"]
    if not statuses:
        say("No queue has a budget (set one with `forgeml queues create NAME --budget AMOUNT`).")
        return
    rows = [
        (
            s["queue"],
            f"{s['budget']:,.2f}",
            f"{s['spend']:,.2f}",
            f"{s['spend'] / s['budget']:.0%}" if s["budget"] else "-",
            "[red]over budget[/red]" if s["exceeded"] else "ok",
        )
        for s in statuses
    ]
    print_table(
        f"budgets ({summary['currency']})", ["queue", "budget", "spend", "used", "status"], rows
    )
