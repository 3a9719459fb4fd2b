"""The embedded evaluator against promtool: the same input series as
tests/monitor/forgeml-rules.test.yml (which `promtool test rules` passes), evaluated every
minute through forgeml's state machine, fire the same alerts, with the same labels and
annotations, at the same evaluation times, and no others."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import AlertEvaluator, SampleStore, labels_of, load_rules
from forgeml.monitor.alerts._rules import parse_duration
from forgeml.monitor.assets import RULES_FILE, rules_text

TEST_FILE = Path(__file__).parents[1] / "forgeml-rules.test.yml"
START = 1_800_000_000.0  # the evaluator's clock at promtool's time 0
_SERIES = re.compile(r"^(\w+)\{(.*)\}$")
_LABEL = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_EXPANDING = re.compile(r"^(-?[\d.e+]+)([+-][\d.e+]+)x(\d+)$")
_REPEATING = re.compile(r"^(-?[\d.e+]+)x(\d+)$")


def expand_values(text: str) -> list[float | None]:
    """promtool's series notation: 'a+bxn', 'axn', '_' (no sample), plain numbers."""
    values: list[float | None] = []
    for token in text.split():
        if token == "_":
            values.append(None)
        elif match := _EXPANDING.match(token):
            start, step, count = float(match[1]), float(match[2]), int(match[3])
            values += [start + step * i for i in range(count + 1)]
        elif match := _REPEATING.match(token):
            values += [float(match[1])] * (int(match[2]) + 1)
        else:
            values.append(float(token))
    return values


def feed(samples: SampleStore, series: str, values: str, interval: float) -> None:
    match = _SERIES.match(series.strip())
    assert match, series
    labels = dict(_LABEL.findall(match[2]))
    labels["__name__"] = match[1]
    for index, value in enumerate(expand_values(values)):
        if value is not None:
            samples.add(labels_of(labels), START + index * interval, value)


def _cases() -> list[Any]:
    spec = yaml.safe_load(TEST_FILE.read_text())
    return [
        pytest.param(spec["evaluation_interval"], test, id="-".join(
            sorted({case["alertname"] for case in test["alert_rule_test"]})
        ))
        for test in spec["tests"]
    ]  # fmt: skip


def _firing(workspace: Workspace, rule: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    with workspace.store.session() as session:
        rows = session.scalars(
            select(AlertRecord).where(AlertRecord.rule == rule, AlertRecord.state == "firing")
        )
        return sorted(((row.labels, row.annotations) for row in rows), key=str)


@pytest.mark.parametrize(("evaluation_interval", "test"), _cases())
def test_the_evaluator_fires_what_promtool_expects(
    workspace: Workspace, evaluation_interval: str, test: dict[str, Any]
) -> None:
    step = parse_duration(evaluation_interval)
    samples = SampleStore(retention=3600)
    for series in test["input_series"]:
        feed(samples, series["series"], series["values"], parse_duration(test["interval"]))
    evaluator = AlertEvaluator(workspace, load_rules(), samples=samples, scrape_replicas=False)
    checks: dict[float, list[dict[str, Any]]] = {}
    for case in test["alert_rule_test"]:
        checks.setdefault(parse_duration(case["eval_time"]), []).append(case)
    at = 0.0
    while at <= max(checks):
        evaluator.evaluate(START + at)
        for case in checks.get(at, []):
            expected = [
                (
                    {**alert.get("exp_labels", {}), "alertname": case["alertname"]},
                    alert.get("exp_annotations", {}),
                )
                for alert in case["exp_alerts"]
            ]
            assert _firing(workspace, case["alertname"]) == sorted(expected, key=str), (
                f"{case['alertname']} at {case['eval_time']}"
            )
        at += step
    evaluator.close()


def test_every_shipped_rule_is_checked_against_promtool() -> None:
    tested = {
        case["alertname"]
        for test in yaml.safe_load(TEST_FILE.read_text())["tests"]
        for case in test["alert_rule_test"]
    }
    assert tested == {rule.name for rule in load_rules()}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is missing")
def test_promtool_passes_the_same_cases(tmp_path: Path) -> None:
    (tmp_path / RULES_FILE).write_text(rules_text())
    shutil.copy(TEST_FILE, tmp_path / "rules.test.yml")
    done = subprocess.run(
        ["promtool", "test", "rules", "rules.test.yml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
