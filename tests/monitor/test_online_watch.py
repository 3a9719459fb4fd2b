"""`forgeml server` runs the online drift detector over a real model server's request log:
calm rows raise nothing, a shifted feature raises an alarm that a scrape of the server's
registry exports and the shipped rule fires on, and a server killed with SIGKILL resumes
feeding every row exactly once."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import httpx
import polars as pl
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from forgeml.cli.server import _registries
from forgeml.core.store import AlertRecord
from forgeml.monitor.alerts import AlertEvaluator, Transition, load_rules
from forgeml.monitor.drift import (
    OnlineDriftConfig,
    OnlineDriftDetector,
    WatchedVersion,
    WatchState,
    model_reference,
    read_log,
)
from forgeml.pipelines.trigger_kinds import AlertSource
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.monitor.conftest import send, wait_logged
from tests.serve.conftest import LiveServer, open_home
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = pytest.mark.slow
RUN_LENGTH = 100_000  # forgeml server's default
VERSION = "adult-mlp@v1"
START = 1_800_000_000.0  # the alert evaluator's clock


def _log(home: Path) -> Path:
    return home / "logs" / "requests" / "adult-mlp.jsonl"


def _scrape(registries: list[CollectorRegistry]) -> dict[tuple[str, str], float]:
    """The online series as the server's /metrics writes them: (name, feature) -> value."""
    found = {}
    for registry in registries:
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                if (
                    sample.name.startswith("forgeml_drift_online")
                    and sample.labels.get("version") == VERSION
                ):
                    found[sample.name, sample.labels.get("feature", "")] = sample.value
    return found


def _kept(home: Path) -> WatchedVersion:
    """The watch state the server keeps for the model, as a restarted server reads it."""
    path = home / "monitor" / "online" / "served" / "adult-mlp.json"
    return WatchState.model_validate_json(path.read_bytes()).versions[VERSION]


def _online(transitions: list[Transition]) -> list[Transition]:
    return [t for t in transitions if t.rule == "ForgemlOnlineDriftAlarm"]


def _logged_rows(home: Path) -> pl.DataFrame:
    return read_log(_log(home), "adult-mlp").rows


def test_calm_rows_raise_nothing_and_a_shifted_feature_fires_the_rule(
    server: LiveServer, test_split: pl.DataFrame, home: Path
) -> None:
    workspace = open_home(home)
    registries, gauges = _registries(workspace, RUN_LENGTH)
    now = [START]
    evaluator = AlertEvaluator(
        workspace, load_rules(), registries=registries, scrape_replicas=False,
        clock=lambda: now[0],
    )  # fmt: skip
    try:
        wait_logged(home, send(server.url, test_split.head(1500), "calm")[-1][0])
        gauges.refresh()
        calm = _kept(home)
        assert calm.rows == _logged_rows(home).height >= 1500
        assert calm.alarms == {} and calm.detector is not None
        scraped = _scrape(registries)
        assert scraped["forgeml_drift_online_alarms_total", "age"] == 0
        assert scraped["forgeml_drift_online_rows_total", ""] == calm.rows
        assert 0 <= scraped["forgeml_drift_online_statistic_ratio", "age"] < 1
        assert _online(evaluator.cycle()) == []

        # age moved up by 1.5 of the detector's deviations: an alarm within 100 rows
        age = calm.detector.features.index("age")
        moved = test_split.slice(1500, 100).with_columns(
            pl.col("age") + round(1.5 * calm.detector.scale[age])
        )
        wait_logged(home, send(server.url, moved, "moved")[-1][0])
        gauges.refresh()
        shifted = _kept(home)
        assert shifted.rows == calm.rows + 100
        assert shifted.last_alarm is not None
        assert shifted.last_alarm.feature == "age" and shifted.last_alarm.direction == "up"
        assert calm.rows <= shifted.last_alarm.row < calm.rows + 100
        assert _scrape(registries)["forgeml_drift_online_alarms_total", "age"] >= 1

        now[0] += 60
        (fired,) = _online(evaluator.cycle())
        assert (fired.rule, fired.state) == ("ForgemlOnlineDriftAlarm", "firing")
        with workspace.store.session() as session:
            record = session.get(AlertRecord, fired.alert_id)
            assert record is not None
            assert {"model": "adult-mlp", "version": VERSION}.items() <= record.labels.items()
            # what a policy's `on_alerts: [ForgemlOnlineDriftAlarm]` trigger picks up
            subject = "ForgemlOnlineDriftAlarm{model=adult-mlp}"
            (event,) = AlertSource().due(session, subject, "0", datetime.now(UTC), 10, "default")
            assert event.key == f"alert:{fired.alert_id}"
    finally:
        evaluator.close()
        workspace.close()


def test_a_killed_server_resumes_feeding_every_row_once(
    server: LiveServer, test_split: pl.DataFrame, home: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"

    def rows_exported() -> float | None:
        try:
            text = httpx.get(url, timeout=2).text
        except httpx.HTTPError:
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "forgeml_drift_online_rows_total":
                    return sample.value
        return None

    def start() -> subprocess.Popen[bytes]:
        with (tmp_path / "server.log").open("ab") as log:
            return subprocess.Popen(
                forgeml_command("server", "--interval", "0.2", "--metrics-port", str(port)),
                env=subprocess_env(home), stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    for part, name in (
        (test_split.slice(2000, 300), "before"),
        (test_split.slice(2300, 300), "after"),
    ):
        wait_logged(home, send(server.url, part, name)[-1][0])
        logged = _logged_rows(home).height
        process = start()
        try:
            fed = f"{logged} rows fed"
            wait_until(lambda: rows_exported() == logged, 120, fed, 0.2)  # noqa: B023
        finally:
            process.kill()  # SIGKILL: no shutdown, whatever the server was doing
            process.wait(30)

    # the kept detector is the one a single detector fed the whole log once would be
    workspace = open_home(home)
    try:
        _, profile = model_reference(workspace, VERSION)
    finally:
        workspace.close()
    config = OnlineDriftConfig(run_length=RUN_LENGTH)
    whole = OnlineDriftDetector.from_profile(
        profile, config, home / "monitor" / "online" / "calibrations"
    )
    whole.update(_logged_rows(home))
    whole.to_json()
    kept = _kept(home)
    assert kept.rows == whole.state.rows == _logged_rows(home).height
    assert kept.detector is not None and kept.detector.rows == whole.state.rows
    assert kept.detector.upper == pytest.approx(whole.state.upper)
    assert kept.detector.lower == pytest.approx(whole.state.lower)
