from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forgeml.core.workspace import Workspace
from forgeml.tracking import Heartbeat, finish_run, get_run, reap_expired, start_run
from tests._wait import wait_until
from tests.tracking.conftest import audit_actions

SRC = Path(__file__).resolve().parents[2] / "src"
DOOMED_RUN = """
import sys, time
from pathlib import Path
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.tracking import start_run

workspace = Workspace(Settings(home=Path(sys.argv[1]), user="tester"))
handle = start_run(workspace, {"doomed": True}, "doomed", None, lease_seconds=2)
print(handle.run_id, flush=True)
time.sleep(600)
"""


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_the_heartbeat_renews_the_lease_and_stops_with_the_run(
    tracking_workspace: Workspace,
) -> None:
    handle = start_run(tracking_workspace, {}, "beating", None, lease_seconds=1)
    heartbeat = handle.heartbeat
    assert heartbeat is not None
    assert heartbeat.interval == pytest.approx(1 / 3)
    started = _utc(get_run(tracking_workspace, handle.run_id).heartbeat_at)
    wait_until(lambda: heartbeat.beats >= 3, timeout=5, what="three beats")
    latest = _utc(get_run(tracking_workspace, handle.run_id).heartbeat_at)
    assert latest > started
    # a moment older than its lease since it started, yet within the renewed one: not reaped
    between = latest + timedelta(seconds=1) - (latest - started) / 2
    assert handle.run_id not in reap_expired(tracking_workspace, now=between)
    finish_run(handle, "FINISHED", {})
    assert not heartbeat._thread.is_alive()
    assert not heartbeat.lost


def test_a_beat_for_a_run_that_is_not_running_reports_it(tracking_workspace: Workspace) -> None:
    heartbeat = Heartbeat(tracking_workspace.store, "f" * 32, lease_seconds=3)
    assert heartbeat.beat() is False


def test_a_reaped_run_notices_its_heartbeat_was_lost(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "paused", None, lease_seconds=3)
    assert handle.heartbeat is not None
    # as if the process had been suspended for an hour
    later = datetime.now(UTC) + timedelta(hours=1)
    assert handle.run_id in reap_expired(tracking_workspace, now=later)
    wait_until(lambda: handle.heartbeat is not None and handle.heartbeat.lost, what="the loss")
    assert not handle.heartbeat._thread.is_alive()
    assert get_run(tracking_workspace, handle.run_id).status == "KILLED"
    assert handle.client.get_run(handle.run_id).info.status == "KILLED"
    finish_run(handle, "FINISHED", {})


@pytest.mark.slow
def test_a_sigkilled_run_is_reaped_in_forgeml_and_mlflow_within_its_lease(
    tracking_workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "doomed.py"
    script.write_text(DOOMED_RUN, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    env["PYTHONPATH"] = str(SRC)
    home = str(tracking_workspace.settings.home)
    live = start_run(tracking_workspace, {}, "alive", None, lease_seconds=3)
    live_started = _utc(get_run(tracking_workspace, live.run_id).heartbeat_at)
    with subprocess.Popen(
        [sys.executable, str(script), home],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as child:
        try:
            assert child.stdout is not None
            run_id = child.stdout.readline().strip()
            assert run_id, "the child started no run"
            first_beat = _utc(get_run(tracking_workspace, run_id).heartbeat_at)
            wait_until(
                lambda: _utc(get_run(tracking_workspace, run_id).heartbeat_at) > first_beat,
                what="the child's renewal of its lease",
            )
        finally:
            child.kill()
    # what MLflow alone would show forever (mlflow/mlflow#5963, #3932)
    assert get_run(tracking_workspace, run_id).status == "RUNNING"
    assert live.client.get_run(run_id).info.status == "RUNNING"

    reaped: list[str] = []

    def reaped_child() -> bool:
        reaped.extend(reap_expired(tracking_workspace))
        return run_id in reaped

    wait_until(reaped_child, what="the reap of the killed run", interval=0.2)
    record = get_run(tracking_workspace, run_id)
    assert record.status == "KILLED"
    assert record.ended_at == record.heartbeat_at
    assert record.error is not None
    assert "stopped sending heartbeats" in record.error
    assert "2 s lease expired" in record.error
    mlflow_run = live.client.get_run(run_id)
    assert mlflow_run.info.status == "KILLED"
    assert mlflow_run.info.end_time == int(_utc(record.heartbeat_at).timestamp() * 1000)
    assert audit_actions(tracking_workspace, run_id) == ["run.start", "run.reap"]

    # the live run has outlived its own lease and is not touched
    wait_until(
        lambda: (
            _utc(get_run(tracking_workspace, live.run_id).heartbeat_at)
            > live_started + timedelta(seconds=3)
        ),
        what="the live run outliving its first lease",
    )
    assert live.run_id not in reaped + reap_expired(tracking_workspace)
    assert get_run(tracking_workspace, live.run_id).status == "RUNNING"
    finish_run(live, "FINISHED", {})
