from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key, usage_report
from forgeml.gateway._usage import UsageRecorder, usage_period


def test_period_is_the_utc_hour() -> None:
    moment = datetime(2026, 12, 1, 1, 30, tzinfo=timezone(timedelta(hours=3)))
    assert usage_period(moment) == "2026-11-30T22"
    before = datetime.now(UTC).strftime("%Y-%m-%dT%H")
    now = usage_period()  # the cached hot-path form
    assert now in {before, datetime.now(UTC).strftime("%Y-%m-%dT%H")}
    assert usage_period(datetime(2026, 12, 1, 1, 30)) == "2026-12-01T01"  # naive: UTC


def test_failed_flush_keeps_the_counts_for_the_next_one(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary, _ = create_key(workspace, "ci")
    recorder = UsageRecorder(workspace)
    recorder.record(summary["id"], "adult", forwarded=True, error=False, latency_ms=2.0)

    def broken_session() -> None:
        raise OSError("store unreachable")

    with monkeypatch.context() as patch:
        patch.setattr(workspace.store, "session", broken_session)
        with pytest.raises(OSError, match="unreachable"):
            recorder.flush()
    assert recorder.requests_today(summary["id"]) == 1  # the quota still counts it
    recorder.record(summary["id"], "adult", forwarded=False, error=False, latency_ms=0.0)
    assert recorder.flush() == 1
    (row,) = usage_report(workspace)
    assert (row["requests"], row["rejected"], row["mean_latency_ms"]) == (1, 1, 2.0)
    assert recorder.requests_today(summary["id"]) == 1  # now read back from the store
