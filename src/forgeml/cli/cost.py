"""`forgeml cost report|budgets`: what job attempts used and cost, and queues against budgets."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say

if TYPE_CHECKING:
    from forgeml.scheduler.cost import BudgetStatus, CostRow

app = typer.Typer(help="Measured use and cost of jobs; queue budgets.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


@app.command("report")
def report(
    by: Annotated[
        str, typer.Option("--by", help="Group by job, queue, owner or model.", show_default=True)
    ] = "job",
    since: Annotated[
        str | None,
        typer.Option(help="Only attempts started since: a duration (7d, 24h, 30m) or ISO date."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """CPU, GPU and memory use, wall time and cost of job attempts, costliest first."""
    from forgeml.scheduler.cost import cost_report, load_price_table, parse_since, total_of

    start = parse_since(since) if since is not None else None
    workspace = _workspace()
    currency = load_price_table(workspace.settings).currency
    rows = cost_report(workspace.store, by=by, since=start)
    total = total_of(rows)
    if as_json:
        print_json(
            {
                "by": by,
                "since": start,
                "currency": currency,
                "rows": [asdict(row) for row in rows],
                "total": asdict(total) | {"key": "total"},
            }
        )
        return
    title = f"cost by {by}" + (f" since {start:%Y-%m-%d %H:%M} UTC" if start else "")
    columns = [by, "attempts", "CPU s", "GPU s", "memory GB·s", "wall s", f"cost ({currency})"]
    if by == "job":
        columns.insert(1, "name")
    table = [_report_cells(row, by) for row in rows]
    if rows:
        table.append(_report_cells(total, by, label="total"))
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


@app.command("budgets")
def budgets(as_json: JsonFlag = False) -> None:
    """Spend against budget of every queue that has one."""
    from forgeml.scheduler.cost import budget_status, load_price_table

    workspace = _workspace()
    currency = load_price_table(workspace.settings).currency
    statuses = budget_status(workspace.store)
    if as_json:
        print_json({"currency": currency, "queues": [_budget_summary(s) for s in statuses]})
        return
    if not statuses:
        say("No queue has a budget (set one with `forgeml queues create NAME --budget AMOUNT`).")
        return
    rows = [
        (
            s.queue,
            f"{s.budget:,.2f}",
            f"{s.spend:,.2f}",
            f"{s.spend / s.budget:.0%}" if s.budget else "-",
            "[red]over budget[/red]" if s.exceeded else "ok",
        )
        for s in statuses
    ]
    print_table(f"budgets ({currency})", ["queue", "budget", "spend", "used", "status"], rows)


def _budget_summary(status: BudgetStatus) -> dict[str, Any]:
    return asdict(status) | {"exceeded": status.exceeded}
