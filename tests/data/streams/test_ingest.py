from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from forgeml.core.errors import StreamError
from forgeml.core.workspace import Workspace
from forgeml.data.streams import (
    Message,
    StreamOptions,
    StreamSource,
    StreamUrl,
    _registry,
    ingest_stream,
)
from tests.data.streams.conftest import RedisBroker, broker_address


@pytest.fixture
def redis_broker() -> Iterator[RedisBroker]:
    broker = RedisBroker(broker_address("redis"))
    broker.dataset = "meters"
    yield broker
    broker.close()


class _AckRefused:
    def __init__(self, inner: StreamSource) -> None:
        self._inner = inner
        self.acks_confirmed = inner.acks_confirmed
        self.ids_as_positions = inner.ids_as_positions

    def receive(self, limit: int, timeout: float) -> list[Message]:
        return self._inner.receive(limit, timeout)

    def ack(self, messages: Sequence[Message]) -> None:
        raise StreamError("Redis refused XACK on 'x': connection reset.")

    def close(self) -> None:
        self._inner.close()


def test_an_empty_window_records_nothing(workspace: Workspace, redis_broker: RedisBroker) -> None:
    options = StreamOptions(max_records=5, max_seconds=0.2)
    result = ingest_stream(workspace, "meters", redis_broker.url, options)
    assert (result.recorded, result.records, result.payload_format) == (None, 0, None)


def test_a_failed_ack_names_the_recorded_version_and_the_next_run_drops_the_copies(
    workspace: Workspace, redis_broker: RedisBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_broker.publish(range(3))
    real = _registry._REGISTRY["redis"]

    def refusing(url: StreamUrl, consumer: str) -> StreamSource:
        return _AckRefused(real(url, consumer))

    monkeypatch.setitem(_registry._REGISTRY, "redis", refusing)
    with pytest.raises(StreamError, match=r"meters@v1 is recorded, but acknowledging"):
        ingest_stream(workspace, "meters", redis_broker.url, StreamOptions(max_records=3))
    monkeypatch.setitem(_registry._REGISTRY, "redis", real)

    again = ingest_stream(
        workspace, "meters", redis_broker.url, StreamOptions(max_records=3, max_seconds=0.5)
    )
    assert (again.recorded, again.records, again.dropped) == (None, 0, 3)
