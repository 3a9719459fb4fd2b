"""Exactly once across kill -9, against each real broker (tests/data/streams/conftest.py).

One ingest runs as its own `forgeml` process and is killed with SIGKILL mid-window, once
its log shows the records it received; the others run in-process, one of them failing
right after its commit (before any ack). Every published record must appear in exactly
one version.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data.streams import StreamOptions, StreamSource, StreamUrl, _registry, ingest_stream
from tests._wait import wait_until
from tests.data.streams.conftest import Broker

SRC = Path(__file__).resolve().parents[3] / "src"


class _Crash(BaseException):
    """Stands for the process dying between the commit and the first ack."""


class _DiesBeforeAck:
    def __init__(self, inner: StreamSource) -> None:
        self._inner = inner
        self.acks_confirmed = inner.acks_confirmed
        self.ids_as_positions = inner.ids_as_positions

    def receive(self, limit: int, timeout: float) -> list[Any]:
        return self._inner.receive(limit, timeout)

    def ack(self, messages: Any) -> None:
        if all(message.redelivered for message in messages):
            self._inner.ack(messages)  # copies of committed records, dropped in the window
            return
        raise _Crash  # the ack of the window's new records, after its commit

    def close(self) -> None:
        self._inner.close()


class Ingest:
    """`forgeml data ingest-stream` as a process with its stderr in a file."""

    def __init__(self, home: Path, broker: Broker, log: Path, *options: str) -> None:
        env = os.environ | {
            "FORGEML_HOME": str(home),
            "FORGEML_USER": "tester",
            "PYTHONPATH": str(SRC),
        }
        env.pop("FORGEML_DB_URL", None)
        env.pop("FORGEML_ARTIFACTS_URL", None)
        self.log = log
        command = [sys.executable, "-m", "forgeml.cli", "data", "ingest-stream"]
        with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                [*command, broker.dataset, broker.url, *options],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )

    def logged(self, line: str) -> bool:
        return line in self.log.read_text().splitlines()


@pytest.fixture
def workspace_home(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


def _frames(workspace: Workspace, name: str) -> list[pl.DataFrame]:
    with workspace.store.session() as session:
        versions = catalog.versions_of(session, name)
    return [catalog.read_frame(workspace, version) for version in versions]


@pytest.mark.slow
def test_kill_9_mid_window_then_crash_after_commit_loses_and_duplicates_nothing(
    broker: Broker, workspace_home: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # v1: records 0-4, received by an ingest that subscribed before they were published
    # (an MQTT broker queues messages only for a session that exists); 5-9 stay queued
    with ThreadPoolExecutor(1) as pool:
        subscribed = threading.Event()
        first = pool.submit(
            ingest_stream,
            workspace_home,
            broker.dataset,
            broker.url,
            StreamOptions(max_records=5, max_seconds=30),
            on_progress=lambda count: count or subscribed.set(),
        )
        wait_until(subscribed.is_set, 30, "the first ingest to subscribe")
        broker.publish(range(10))
        assert first.result(timeout=30).records == 5

    home = workspace_home.settings.home
    killed = Ingest(home, broker, tmp_path / "b.log", "--max-records", "20", "--max-seconds", "60")
    wait_until(lambda: killed.logged("received 5 records"), 30, "records 5-9 to arrive")
    killed.process.send_signal(signal.SIGKILL)  # mid-window: it waits for 15 more
    killed.process.wait(timeout=10)

    broker.publish(range(10, 15))
    options = StreamOptions(max_records=10, max_seconds=20)
    second = ingest_stream(workspace_home, broker.dataset, broker.url, options)
    assert second.recorded is not None and second.records == 10
    assert [edge.parent.ref for edge in second.recorded.version.parent_edges] == [
        f"{broker.dataset}@v1"
    ]

    # a process that dies after committing v3 and before acking any of it
    broker.publish(range(15, 20))
    scheme = broker.url.split("://")[0]
    real = _registry._REGISTRY[scheme]

    def dies_before_ack(url: StreamUrl, consumer: str) -> StreamSource:
        return _DiesBeforeAck(real(url, consumer))

    monkeypatch.setitem(_registry._REGISTRY, scheme, dies_before_ack)
    with pytest.raises(_Crash):
        ingest_stream(workspace_home, broker.dataset, broker.url, StreamOptions(max_records=5))
    monkeypatch.setitem(_registry._REGISTRY, scheme, real)

    # the broker delivers 15-19 again; they are dropped, and 20-21 are new
    broker.publish(range(20, 22))
    after = ingest_stream(
        workspace_home, broker.dataset, broker.url, StreamOptions(max_records=7, max_seconds=2)
    )
    assert after.dropped == 5
    assert after.records == 2, [
        sorted(f["n"].to_list()) for f in _frames(workspace_home, broker.dataset)
    ]
    frames = _frames(workspace_home, broker.dataset)
    assert [sorted(frame["n"].to_list()) for frame in frames] == [
        list(range(5)),
        list(range(5, 15)),
        list(range(15, 20)),
        [20, 21],
    ]
    assert pl.concat(frames)["_stream_position"].n_unique() == 22
