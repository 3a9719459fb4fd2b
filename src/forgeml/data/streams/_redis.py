"""Redis streams read through a consumer group (XREADGROUP, XACK).

The group `forgeml-<dataset>` is created at the stream's start when missing. An entry read
and not yet acknowledged stays in the consumer's pending list, which is read first (id
`0`) on the next start: a crashed ingest gets its entries back at once, marked redelivered.
An entry with one field has that field's value as its payload; an entry with several is
the JSON object of its fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from forgeml.core.errors import StreamError
from forgeml.data.streams._base import CONNECT_TIMEOUT_S, Message, StreamUrl, reason

_CONSUMER = "forgeml"


class RedisSource:
    """A consumer in group `group` of the Redis stream `url.name`."""

    acks_confirmed = True
    ids_as_positions = True  # the entry id

    def __init__(self, url: StreamUrl, group: str) -> None:
        import redis

        self._key, self._group = url.name, group
        self._client = redis.Redis(
            host=url.host,
            port=url.port or 6379,
            username=url.username,
            password=url.password,
            db=_database(url),
            socket_connect_timeout=CONNECT_TIMEOUT_S,
        )
        # first our own pending entries (after id `_after`), then new ones (`>`)
        self._pending, self._after = True, "0"
        try:
            self._client.xgroup_create(self._key, group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise StreamError(
                    f"Redis refused the consumer group on stream '{self._key}': {reason(exc)}."
                ) from None
        except redis.RedisError as exc:
            raise StreamError(f"Cannot reach Redis at {url.redacted}: {reason(exc)}.") from None

    def receive(self, limit: int, timeout: float) -> list[Message]:
        import redis

        start = self._after if self._pending else ">"
        block = None if self._pending else max(1, int(timeout * 1000))
        try:
            answer: Any = self._client.xreadgroup(
                self._group, _CONSUMER, {self._key: start}, count=limit, block=block
            )
        except redis.RedisError as exc:
            raise StreamError(
                f"Reading Redis stream '{self._key}' failed: {reason(exc)}."
            ) from None
        entries = answer[0][1] if answer else []
        redelivered = self._pending
        if self._pending:
            self._after = entries[-1][0].decode() if entries else self._after
            self._pending = len(entries) == limit
        return [_message(key, fields, redelivered) for key, fields in entries if fields]

    def ack(self, messages: Sequence[Message]) -> None:
        import redis

        if not messages:
            return
        try:
            self._client.xack(self._key, self._group, *[m.position for m in messages])
        except redis.RedisError as exc:
            raise StreamError(f"Redis refused XACK on '{self._key}': {reason(exc)}.") from None

    def close(self) -> None:
        self._client.close()


def _database(url: StreamUrl) -> int:
    raw = url.query.get("db", "0")
    if not raw.isdigit():
        raise StreamError(f"'db={raw}' in the Redis URL is not a database number.")
    return int(raw)


def _message(entry_id: bytes, fields: dict[bytes, bytes], redelivered: bool) -> Message:
    position = entry_id.decode()
    return Message(position, _payload(fields), redelivered=redelivered, token=position)


def _payload(fields: dict[bytes, bytes]) -> bytes:
    if len(fields) == 1:
        return next(iter(fields.values()))
    decoded: dict[str, Any] = {
        key.decode("utf-8", "replace"): value.decode("utf-8", "replace")
        for key, value in fields.items()
    }
    return orjson.dumps(decoded)


def open_redis(url: StreamUrl, group: str) -> RedisSource:
    return RedisSource(url, group)
