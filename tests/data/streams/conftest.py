"""The real brokers on this machine, each with a fresh topic/subject/queue/stream per test.

A broker that does not answer skips its tests with the reason. Addresses come from
FORGEML_TEST_MQTT_URL, FORGEML_TEST_NATS_URL, FORGEML_TEST_AMQP_URL, FORGEML_TEST_REDIS_URL
(`.ci/run` exports them), defaulting to the standard ports on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from typing import Protocol
from urllib.parse import urlsplit

import orjson
import pytest

DEFAULTS = {
    "mqtt": "mqtt://127.0.0.1:1883",
    "nats": "nats://127.0.0.1:4222",
    "amqp": "amqp://guest:guest@127.0.0.1:5672",
    "redis": "redis://127.0.0.1:6379",
}


def broker_address(scheme: str) -> str:
    """The broker's base URL, or skip the test when nothing answers there."""
    base = os.environ.get(f"FORGEML_TEST_{scheme.upper()}_URL", DEFAULTS[scheme])
    parts = urlsplit(base)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except OSError:
        pytest.skip(f"no {scheme} broker answers at {parts.hostname}:{parts.port}")
    return base


def payload(number: int) -> bytes:
    return orjson.dumps({"n": number, "temperature": 20.0 + number / 10})


class Broker(Protocol):
    url: str  # what `ingest-stream` reads, unique to the test
    dataset: str  # the dataset to ingest into (it names the durable consumer: unique too)

    def publish(self, numbers: Sequence[int]) -> None: ...

    def close(self) -> None: ...


class RedisBroker:
    dataset = ""

    def __init__(self, base: str) -> None:
        import redis

        self.key = f"forgeml-test-{uuid.uuid4().hex}"
        self.url = f"{base}/{self.key}"
        self._client = redis.Redis.from_url(base)

    def publish(self, numbers: Sequence[int]) -> None:
        for number in numbers:
            self._client.xadd(self.key, {"data": payload(number)})

    def close(self) -> None:
        self._client.delete(self.key)
        self._client.close()


class NatsBroker:
    dataset = ""

    """A JetStream stream of its own holding one subject; redelivery after 1 s."""

    def __init__(self, base: str) -> None:
        self._base = base
        self._stream = f"FORGEML_TEST_{uuid.uuid4().hex}"
        self.subject = f"forgeml.test.{uuid.uuid4().hex}"
        self.url = f"{base}/{self.subject}?ack_wait=1"
        self._run(self._add_stream())

    def _run(self, work: object) -> None:
        asyncio.run(work)  # type: ignore[arg-type]

    async def _with_jetstream(self, work: object) -> None:
        import nats

        client = await nats.connect(self._base)
        try:
            await work(client.jetstream())  # type: ignore[operator]
        finally:
            await client.close()

    async def _add_stream(self) -> None:
        async def add(jetstream: object) -> None:
            await jetstream.add_stream(name=self._stream, subjects=[self.subject])  # type: ignore[attr-defined]

        await self._with_jetstream(add)

    def publish(self, numbers: Sequence[int]) -> None:
        async def send(jetstream: object) -> None:
            for number in numbers:
                await jetstream.publish(self.subject, payload(number))  # type: ignore[attr-defined]

        self._run(self._with_jetstream(send))

    def close(self) -> None:
        async def delete(jetstream: object) -> None:
            await jetstream.delete_stream(self._stream)  # type: ignore[attr-defined]

        self._run(self._with_jetstream(delete))


class AmqpBroker:
    dataset = ""

    """A durable queue of its own; messages carry their number as `message_id`."""

    def __init__(self, base: str) -> None:
        self._base = base
        self.queue = f"forgeml-test-{uuid.uuid4().hex}"
        self.url = f"{base}/{self.queue}"
        asyncio.run(
            self._on_channel(lambda channel: channel.declare_queue(self.queue, durable=True))
        )

    async def _on_channel(self, work: object) -> None:
        import aio_pika

        connection = await aio_pika.connect(self._base)
        try:
            await work(await connection.channel())  # type: ignore[operator]
        finally:
            await connection.close()

    def publish(self, numbers: Sequence[int]) -> None:
        import aio_pika

        async def send(channel: object) -> None:
            for number in numbers:
                message = aio_pika.Message(payload(number), message_id=str(number), delivery_mode=2)
                await channel.default_exchange.publish(message, routing_key=self.queue)  # type: ignore[attr-defined]

        asyncio.run(self._on_channel(send))

    def close(self) -> None:
        asyncio.run(self._on_channel(lambda channel: channel.queue_delete(self.queue)))


class MqttBroker:
    dataset = ""

    """A topic of its own; published at QoS 1 (QoS 0 is never queued for a session)."""

    def __init__(self, base: str) -> None:
        self._parts = urlsplit(base)
        self.topic = f"forgeml/test/{uuid.uuid4().hex}"
        self.url = f"{base}/{self.topic}"

    def publish(self, numbers: Sequence[int]) -> None:
        import paho.mqtt.client as mqtt

        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        client.connect(self._parts.hostname or "127.0.0.1", self._parts.port or 1883)
        client.loop_start()
        try:
            sent = [client.publish(self.topic, payload(number), qos=1) for number in numbers]
            for info in sent:
                info.wait_for_publish(timeout=5)
                assert info.is_published(), f"the broker did not acknowledge {info.mid}"
        finally:
            client.disconnect()
            client.loop_stop()

    def close(self) -> None:
        """End the ingest's persistent session, so the broker stops queueing for it."""
        import paho.mqtt.client as mqtt

        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"forgeml-{self.dataset}",
            protocol=mqtt.MQTTv5,
        )
        client.connect(
            self._parts.hostname or "127.0.0.1", self._parts.port or 1883, clean_start=True
        )
        client.loop_start()
        client.disconnect()
        client.loop_stop()


_BROKERS = {"redis": RedisBroker, "nats": NatsBroker, "amqp": AmqpBroker, "mqtt": MqttBroker}


@pytest.fixture(params=sorted(_BROKERS))
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """Each real broker in turn, with a topic/subject/queue/stream of the test's own."""
    scheme = request.param
    made = _BROKERS[scheme](broker_address(scheme))
    made.dataset = f"sensors-{uuid.uuid4().hex[:8]}"
    try:
        yield made
    finally:
        made.close()
