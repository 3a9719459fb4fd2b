"""The shipped alert rules and dashboard: valid for Prometheus, tested rule by rule, and
naming only metrics forgeml exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import Metric

from forgeml.gateway._responses import GatewayMetrics
from forgeml.monitor.assets import RULES_FILE, dashboard_text, rules_text
from forgeml.monitor.gauges import MonitorCollector
from forgeml.monitor.gpus import DeploymentGpuCollector
from forgeml.scheduler.metrics import SchedulerCollector
from forgeml.serve.metrics import ServerMetrics
from forgeml.tracking.metrics import TrainingCollector
from tests.conftest import CliResult

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is missing (Debian's prometheus package; .ci/run installs it)",
)
UNIT_TESTS = Path(__file__).with_name("forgeml-rules.test.yml")
# forgeml's own families, and the LM's under OpenTelemetry's GenAI names
METRIC = re.compile(r"\b(?:forgeml|gen_ai)_[a-z0-9_]+")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
# the series a metric family of each type exposes (prometheus_client's text format)
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


def _exported(families: Iterable[Metric]) -> set[str]:
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}


def _families() -> list[Metric]:
    """Every family a forgeml process exports: servers, gateways, the scheduler, the monitor,
    training runs, deployments' GPUs."""
    registries = (ServerMetrics().registry, GatewayMetrics().registry)
    return [
        *(family for registry in registries for family in registry.collect()),
        *SchedulerCollector(store=None).describe(),  # type: ignore[arg-type] # no store read
        *MonitorCollector(workspace=None).describe(),  # type: ignore[arg-type] # nor here
        *TrainingCollector(workspace=None).describe(),  # type: ignore[arg-type] # nor here
        *DeploymentGpuCollector(workspace=None).describe(),  # type: ignore[arg-type] # nor here
    ]


EXPORTED = _exported(_families())


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [str(PROMTOOL), *map(str, args)]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(rules_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    panels = json.loads(dashboard_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


@needs_promtool
def test_promtool_accepts_the_rule_file(tmp_path: Path) -> None:
    rules = tmp_path / RULES_FILE
    rules.write_text(rules_text())
    checked = _promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in checked.stdout


@needs_promtool
def test_every_rule_passes_its_promtool_unit_tests(tmp_path: Path) -> None:
    (tmp_path / RULES_FILE).write_text(rules_text())
    tests = tmp_path / UNIT_TESTS.name
    shutil.copy(UNIT_TESTS, tests)
    run = _promtool("test", "rules", tests)
    assert run.returncode == 0, run.stdout + run.stderr


@needs_promtool
def test_a_broken_rule_fails_its_unit_test(tmp_path: Path) -> None:
    # the unit tests can fail: a latency rule with a fixed 500 ms threshold instead of each
    # model's objective fires for the lenient model too
    fixed = rules_text().replace(
        "> on (model)\n          max by (model) (forgeml_latency_objective_seconds)", "> 0.5"
    )
    assert fixed != rules_text()
    (tmp_path / RULES_FILE).write_text(fixed)
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    run = _promtool("test", "rules", tmp_path / UNIT_TESTS.name)
    assert run.returncode != 0
    assert 'model="lenient"' in run.stdout + run.stderr


def test_every_rule_has_a_unit_test() -> None:
    tested = {
        case["alertname"]
        for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in _rules()} == tested


def test_rules_and_dashboard_name_only_exported_metrics() -> None:
    expressions = [rule["expr"] for rule in _rules()] + _dashboard_exprs()
    # label lists (`by (model, gen_ai_token_type)`) name labels, not metrics
    series = [GROUPING.sub("", expr) for expr in expressions]
    named = {name for expr in series for name in METRIC.findall(expr)}
    assert named, "no forgeml metric named at all"
    assert named <= EXPORTED, f"not exported by any forgeml process: {named - EXPORTED}"


def test_the_dashboard_covers_every_exported_metric_family() -> None:
    families = {family.name for family in _families()}
    named = " ".join(_dashboard_exprs())
    assert {family for family in families if family not in named} == set()


def test_the_objective_is_exported_per_model() -> None:
    metrics = ServerMetrics()
    metrics.set_objective("adult", 0.25)
    value = metrics.registry.get_sample_value(
        "forgeml_latency_objective_seconds", {"model": "adult"}
    )
    assert value == 0.25


def test_the_cli_prints_the_files(cli: Any) -> None:
    rules: CliResult = cli("monitor", "rules")
    assert rules.code == 0 and rules.stdout == rules_text()
    dashboard: CliResult = cli("monitor", "dashboard")
    assert dashboard.code == 0 and json.loads(dashboard.stdout)["uid"] == "forgeml-overview"
