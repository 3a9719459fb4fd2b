"""AMQP 0-9-1 queues (RabbitMQ) read with manual acknowledgements.

The queue must exist (it is declared passively: forgeml never creates or changes it).
Messages are taken with basic.get and acknowledged once committed; the broker requeues
whatever a closed or dropped connection had not acknowledged, and marks it redelivered.
A message's position is its `message_id` property when the publisher set one, otherwise
the sha256 of its body (then two equal bodies redelivered together count as one copy).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from forgeml.core.errors import StreamError
from forgeml.data.streams._base import CONNECT_TIMEOUT_S, Message, StreamUrl, content_position

_POLL_S = 0.05  # basic.get answers at once; wait this long between empty answers


class AmqpSource:
    """A channel with manual acks on the existing queue `url.name`."""

    acks_confirmed = True
    ids_as_positions = False  # message_id, else the payload's digest

    def __init__(self, url: StreamUrl) -> None:
        self._runner = asyncio.Runner()
        try:
            self._connection, self._queue = self._runner.run(self._connect(url))
        except BaseException:
            self._runner.close()
            raise

    async def _connect(self, url: StreamUrl) -> tuple[Any, Any]:
        import aio_pika
        from aiormq.exceptions import AMQPError, ChannelNotFoundEntity

        try:
            connection = await aio_pika.connect(
                host=url.host,
                port=url.port or 5672,
                login=url.username or "guest",
                password=url.password or "guest",
                virtualhost=url.query.get("vhost", "/"),
                timeout=CONNECT_TIMEOUT_S,
                fail_fast="true",
            )
        except (OSError, AMQPError, TimeoutError) as exc:
            raise StreamError(
                f"Cannot reach RabbitMQ at {url.redacted} ({type(exc).__name__}); check the "
                "host, port, user and password."
            ) from None
        try:
            channel = await connection.channel()
            queue = await channel.declare_queue(url.name, passive=True)
        except ChannelNotFoundEntity:
            await connection.close()
            raise StreamError(
                f"The AMQP queue '{url.name}' does not exist; declare it first."
            ) from None
        return connection, queue

    def receive(self, limit: int, timeout: float) -> list[Message]:
        return self._runner.run(self._get(limit, timeout))

    async def _get(self, limit: int, timeout: float) -> list[Message]:
        deadline = time.monotonic() + timeout
        received: list[Message] = []
        while len(received) < limit:
            incoming = await self._queue.get(no_ack=False, fail=False)
            if incoming is None:
                if received or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(_POLL_S)
                continue
            body = bytes(incoming.body)
            position = incoming.message_id or content_position(body)
            received.append(Message(position, body, bool(incoming.redelivered), incoming))
        return received

    def ack(self, messages: Sequence[Message]) -> None:
        self._runner.run(self._ack(messages))

    async def _ack(self, messages: Sequence[Message]) -> None:
        from aiormq.exceptions import AMQPError

        try:
            for message in messages:
                await message.token.ack()
        except (AMQPError, OSError) as exc:
            raise StreamError(f"RabbitMQ refused an ack ({type(exc).__name__}).") from None

    def close(self) -> None:
        try:
            self._runner.run(self._connection.close())
        finally:
            self._runner.close()


def open_amqp(url: StreamUrl, _consumer: str) -> AmqpSource:
    return AmqpSource(url)
