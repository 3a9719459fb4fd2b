from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key, revoke_key
from forgeml.gateway._usage import UsageRecorder
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.scheduler.test_cost import add_attempt, add_job, add_queue

Cli = Callable[..., CliResult]


@pytest.fixture
def spent(home_workspace: Workspace) -> dict[str, str]:
    """Two jobs in two queues (one with a budget it is over); job name -> id."""
    add_queue(home_workspace, "team", budget=2.0)
    jobs = {
        "resnet": add_job(home_workspace, "resnet", queue="team", owner="ann", model="digits"),
        "etl": add_job(home_workspace, "etl", owner="bob"),
    }
    add_attempt(home_workspace, jobs["resnet"], 1.5)
    add_attempt(home_workspace, jobs["resnet"], 1.0)
    add_attempt(home_workspace, jobs["etl"], 0.25, datetime.now(UTC) - timedelta(days=3))
    return jobs


def test_cost_report_json_by_queue(cli: Cli, spent: dict[str, str]) -> None:
    report = json_out(cli("cost", "report", "--by", "queue", "--json"))
    assert (report["by"], report["since"], report["currency"]) == ("queue", None, "USD")
    assert [(r["key"], r["attempts"], r["cost"]) for r in report["rows"]] == [
        ("team", 2, 2.5),
        ("default", 1, 0.25),
    ]
    assert report["total"]["cost"] == pytest.approx(2.75)
    assert report["total"]["cpu_seconds"] == pytest.approx(27.5)


def test_cost_report_json_by_job_since(cli: Cli, spent: dict[str, str]) -> None:
    report = json_out(cli("cost", "report", "--since", "24h", "--json"))
    assert [(r["key"], r["name"]) for r in report["rows"]] == [(spent["resnet"], "resnet")]
    assert datetime.fromisoformat(report["since"]) < datetime.now(UTC) - timedelta(hours=23)


def test_cost_report_table(cli: Cli, spent: dict[str, str]) -> None:
    result = cli("cost", "report", "--by", "model")
    assert_ok(result)
    assert "cost by model" in result.stdout
    assert "digits" in result.stdout
    assert "total" in result.stdout


def test_cost_report_on_an_empty_workspace(cli: Cli) -> None:
    report = json_out(cli("cost", "report", "--json"))
    assert report["rows"] == []
    assert report["total"]["attempts"] == 0


def test_cost_report_uses_the_price_tables_currency(cli: Cli, home_workspace: Workspace) -> None:
    home_workspace.settings.home.mkdir(parents=True, exist_ok=True)
    (home_workspace.settings.home / "prices.yaml").write_text("currency: EUR\n")
    assert json_out(cli("cost", "report", "--json"))["currency"] == "EUR"
    assert "cost (EUR)" in cli("cost", "report").stdout


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--by", "team"], "--by must be one of job, queue, owner, model, key, not 'team'", 2),
        (["--since", "yesterday"], "--since 'yesterday' is neither a duration", 2),
    ],
)
def test_cost_report_bad_options_are_one_sentence(
    cli: Cli, args: list[str], expected: str, code: int
) -> None:
    assert_cli_error(cli("cost", "report", *args), expected, code=code)


def test_cost_report_bad_price_table_is_one_sentence(cli: Cli, home_workspace: Workspace) -> None:
    home_workspace.settings.home.mkdir(parents=True, exist_ok=True)
    (home_workspace.settings.home / "prices.yaml").write_text("gpu_hour: free\n")
    assert_cli_error(cli("cost", "report"), "prices.yaml: key 'gpu_hour'", code=1)


@pytest.fixture
def key_traffic(home_workspace: Workspace) -> dict[str, str]:
    """Two keys' requests, counted and flushed by the gateway's own recorder; name -> prefix."""
    web, _ = create_key(home_workspace, "web", ["sst2", "adult"])
    batch, _ = create_key(home_workspace, "batch", None)
    usage = UsageRecorder(home_workspace)
    for latency in (10.0, 30.0, 20.0):
        usage.record(web["id"], "sst2", forwarded=True, error=False, latency_ms=latency)
    usage.record(web["id"], "adult", forwarded=True, error=True, latency_ms=40.0)
    usage.record(web["id"], "secret-model", forwarded=False, error=False, latency_ms=0.0)
    for _ in range(6):
        usage.record(batch["id"], "sst2", forwarded=True, error=False, latency_ms=5.0)
    usage.flush()
    revoke_key(home_workspace, batch["prefix"])  # revoked keys keep what they spent
    return {"web": web["prefix"], "batch": batch["prefix"]}


def test_cost_report_json_by_key(
    cli: Cli, home_workspace: Workspace, key_traffic: dict[str, str]
) -> None:
    home_workspace.settings.home.mkdir(parents=True, exist_ok=True)
    (home_workspace.settings.home / "prices.yaml").write_text("requests_1k: 250\n")
    report = json_out(cli("cost", "report", "--by", "key", "--json"))
    assert (report["by"], report["since"], report["requests_1k"]) == ("key", None, 250.0)
    rows = [
        (r["prefix"], r["name"], r["deployments"], r["requests"], r["errors"], r["rejected"])
        for r in report["rows"]
    ]
    assert rows == [
        (key_traffic["batch"], "batch", ["sst2"], 6, 0, 0),
        (key_traffic["web"], "web", ["adult", "secret-model", "sst2"], 4, 1, 1),
    ]
    assert [r["cost"] for r in report["rows"]] == [pytest.approx(1.5), pytest.approx(1.0)]
    assert report["rows"][1]["mean_latency_ms"] == pytest.approx(25.0)
    total = report["total"]
    assert (total["key"], total["requests"], total["rejected"]) == ("total", 10, 1)
    assert (total["cost"], total["mean_latency_ms"]) == (pytest.approx(2.5), pytest.approx(13.0))


def test_cost_report_by_key_since_a_later_hour_is_empty(
    cli: Cli, key_traffic: dict[str, str]
) -> None:
    later = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    report = json_out(cli("cost", "report", "--by", "key", "--since", later, "--json"))
    assert report["rows"] == [] and report["total"]["requests"] == 0
    assert (
        len(json_out(cli("cost", "report", "--by", "key", "--since", "1h", "--json"))["rows"]) == 2
    )


def test_cost_report_by_key_table(cli: Cli, key_traffic: dict[str, str]) -> None:
    result = cli("cost", "report", "--by", "key")
    assert_ok(result)
    assert "gateway cost by key" in result.stdout
    cells = [
        [cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()
    ]
    web = next(row for row in cells if row and row[1] == "web")
    assert key_traffic["web"].startswith(web[0])  # a narrow terminal folds the prefix
    assert web[3:] == ["4", "1", "1", "25.00", "0.0000"]
    total = next(row for row in cells if row and row[0] == "total")
    assert total[2:] == ["3 in all", "10", "1", "1", "13.00", "0.0000"]


def test_cost_report_help_says_key_figures_lag_the_flush(cli: Cli) -> None:
    result = cli("cost", "report", "--help")
    assert_ok(result)
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "--by key" in text and "at most that flush interval" in text


def test_cost_budgets_json(cli: Cli, spent: dict[str, str]) -> None:
    budgets = json_out(cli("cost", "budgets", "--json"))
    assert budgets == {
        "currency": "USD",
        "queues": [{"queue": "team", "budget": 2.0, "spend": 2.5, "exceeded": True}],
    }


def test_cost_budgets_table(cli: Cli, spent: dict[str, str]) -> None:
    result = cli("cost", "budgets")
    assert_ok(result)
    assert "team" in result.stdout
    assert "over budget" in result.stdout


def test_cost_budgets_without_any(cli: Cli) -> None:
    result = cli("cost", "budgets")
    assert_ok(result)
    assert "No queue has a budget" in result.stdout
