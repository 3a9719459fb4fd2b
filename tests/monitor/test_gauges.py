"""The drift and accuracy gauges: measured from a real server's log and feedback, exported
by a real `forgeml server --metrics-port` process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import polars as pl
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from forgeml.monitor.gauges import MonitorCollector
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.monitor.conftest import label, send, wait_logged
from tests.serve.conftest import LiveServer, open_home
from tests.train.conftest import copy_empty_home, forgeml_command, subprocess_env

pytestmark = pytest.mark.slow
# the CLI's default window: smaller held-out windows flag a column by chance more often
# (benchmarks/drift_windows.py)
WINDOW = 2000


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"model": "adult-mlp", **labels})


def test_a_home_that_served_nothing_has_no_series(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = open_home(copy_empty_home(tmp_path_factory, tmp_path / "home"))
    registry = CollectorRegistry()
    gauges = MonitorCollector(workspace)
    registry.register(gauges)
    try:
        assert gauges.refresh() == []  # absent, not zeros
        assert [s for family in registry.collect() for s in family.samples] == []
    finally:
        workspace.close()


def test_the_gauges_follow_drift_accuracy_and_feedback(
    server: LiveServer, test_split: pl.DataFrame, home: Path
) -> None:
    workspace = open_home(home)
    registry = CollectorRegistry()
    gauges = MonitorCollector(workspace, window=WINDOW)
    registry.register(gauges)
    try:
        calm = test_split.head(WINDOW)
        sent = send(server.url, calm, "calm")
        label(server.url, sent)
        wait_logged(home, sent[-1][0])
        gauges.refresh()
        version = {"version": "adult-mlp@v1"}
        (health,) = gauges.refresh()
        assert health.drift_detected is False, health.drift_scores
        assert _value(registry, "forgeml_drift_detected", **version) == 0
        assert _value(registry, "forgeml_drift_share_ratio", **version) == 0
        age = _value(registry, "forgeml_drift_score", feature="age", **version)
        assert age is not None and age < 0.1
        measured = _value(registry, "forgeml_model_accuracy_ratio", **version)
        estimated = _value(registry, "forgeml_model_estimated_accuracy_ratio", **version)
        reference = _value(registry, "forgeml_model_reference_accuracy_ratio", **version)
        assert measured is not None and estimated is not None and reference is not None
        assert abs(estimated - measured) < 0.03 and abs(reference - measured) < 0.04
        assert _value(registry, "forgeml_feedback_total") == WINDOW

        older = calm.with_columns(pl.col("age") + 25, pl.lit(70).alias("hours-per-week"))
        wait_logged(home, send(server.url, older, "older")[-1][0])
        gauges.refresh()
        assert _value(registry, "forgeml_drift_detected", **version) == 1
        assert 0 < (_value(registry, "forgeml_drift_share_ratio", **version) or 0) < 0.5
        shifted = _value(registry, "forgeml_drift_score", feature="age", **version)
        assert shifted is not None and shifted > 0.2
        # no labels for the older window yet: the measured accuracy is the calm one's
        assert _value(registry, "forgeml_model_accuracy_ratio", **version) == measured
    finally:
        workspace.close()


def test_forgeml_server_exports_the_gauges(
    server: LiveServer, test_split: pl.DataFrame, home: Path, tmp_path: Path
) -> None:
    wait_logged(home, send(server.url, test_split.slice(WINDOW, 200), "served")[-1][0])
    port = free_port()
    with (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen(
            forgeml_command("server", "--interval", "0.2", "--metrics-port", str(port)),
            env=subprocess_env(home), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def exported() -> dict[str, float]:
            try:
                text = httpx.get(url, timeout=2).text
            except httpx.HTTPError:
                return {}
            return {
                sample.name: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.labels.get("model") == "adult-mlp"
            }

        wait_until(lambda: "forgeml_drift_share_ratio" in exported(), 120, "the drift gauges", 0.2)
        found = exported()
        assert {"forgeml_drift_detected", "forgeml_model_reference_accuracy_ratio"} <= set(found)
        assert "forgeml_scheduler_jobs" not in found  # the scheduler's metrics are beside them
    finally:
        process.terminate()
        process.wait(30)
    assert process.returncode == 0, (tmp_path / "server.log").read_text()
