"""NATS JetStream read through a durable pull consumer with explicit acks.

The consumer `forgeml-<dataset>` is created on the stream that holds the subject (the
stream must exist: JetStream keeps the history, forgeml does not create it). A message
fetched and not acknowledged within `ack_wait` seconds (the URL's `?ack_wait=`, default
30) is delivered again, marked by its delivery count; its position is the stream sequence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from forgeml.core.errors import StreamError
from forgeml.data.streams._base import CONNECT_TIMEOUT_S, Message, StreamUrl, query_seconds, reason

_DEFAULT_ACK_WAIT_S = 30.0


class NatsSource:
    """A durable pull consumer `durable` on the JetStream stream holding `url.name`."""

    acks_confirmed = True
    ids_as_positions = True  # the stream sequence

    def __init__(self, url: StreamUrl, durable: str) -> None:
        self._runner = asyncio.Runner()
        self._subject = url.name
        ack_wait = query_seconds(url, "ack_wait", _DEFAULT_ACK_WAIT_S)
        try:
            self._client, self._sub = self._runner.run(self._connect(url, durable, ack_wait))
        except BaseException:
            self._runner.close()
            raise

    async def _connect(self, url: StreamUrl, durable: str, ack_wait: float) -> tuple[Any, Any]:
        import nats
        from nats.errors import Error as NatsError
        from nats.js.api import AckPolicy, ConsumerConfig
        from nats.js.errors import NotFoundError

        server = f"nats://{url.host}:{url.port or 4222}"
        try:
            client = await nats.connect(
                server,
                user=url.username,
                password=url.password,
                connect_timeout=CONNECT_TIMEOUT_S,
                # 0 would mean "retry forever"; 1 gives up after a second try
                max_reconnect_attempts=1,
                reconnect_time_wait=0.2,
                allow_reconnect=False,
                error_cb=_ignore,  # the default logs each failed attempt with a traceback
            )
        except (OSError, NatsError, TimeoutError) as exc:
            raise StreamError(f"Cannot reach NATS at {url.redacted}: {reason(exc)}.") from None
        try:
            jetstream = client.jetstream()
            stream = await jetstream.find_stream_name_by_subject(self._subject)
            config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait)
            sub = await jetstream.pull_subscribe(
                self._subject, durable=durable, stream=stream, config=config
            )
        except NotFoundError:
            await client.close()
            raise StreamError(
                f"No JetStream stream holds the subject '{self._subject}'; create one first "
                f"(nats stream add --subjects '{self._subject}')."
            ) from None
        except (NatsError, TimeoutError) as exc:
            await client.close()
            raise StreamError(
                f"NATS refused a consumer on '{self._subject}': {reason(exc)}."
            ) from None
        return client, sub

    def receive(self, limit: int, timeout: float) -> list[Message]:
        return self._runner.run(self._fetch(limit, timeout))

    async def _fetch(self, limit: int, timeout: float) -> list[Message]:
        from nats.errors import TimeoutError as FetchTimeout

        try:
            batch = await self._sub.fetch(batch=limit, timeout=max(timeout, 0.01))
        except (FetchTimeout, TimeoutError):
            return []
        return [
            Message(
                position=str(message.metadata.sequence.stream),
                payload=bytes(message.data),
                redelivered=message.metadata.num_delivered > 1,
                token=message,
            )
            for message in batch
        ]

    def ack(self, messages: Sequence[Message]) -> None:
        self._runner.run(self._ack(messages))

    async def _ack(self, messages: Sequence[Message]) -> None:
        from nats.errors import Error as NatsError

        try:
            for message in messages:
                await message.token.ack_sync(timeout=CONNECT_TIMEOUT_S)
        except (NatsError, TimeoutError) as exc:
            raise StreamError(f"NATS did not confirm an ack: {reason(exc)}.") from None

    def close(self) -> None:
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.close()


async def _ignore(_error: Exception) -> None:
    """Errors reach the caller as exceptions; nats-py's callback would only log them."""


def open_nats(url: StreamUrl, durable: str) -> NatsSource:
    return NatsSource(url, durable)
