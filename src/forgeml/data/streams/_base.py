"""What every stream transport gives the window: messages with a position, and acks.

A transport connects to one broker address (`mqtt://`, `nats://`, `amqp://`, `redis://`),
hands out messages in arrival order and acknowledges them once the version that holds them
is committed. Positions identify a message within its source (a NATS stream sequence, a
Redis entry id, an AMQP `message_id`), so a message the broker delivers again after a
crash is recognised and dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, unquote, urlsplit

from forgeml.core.errors import StreamError

STREAM_OP = "ingest-stream"  # the recipe op of a version ingested from a stream
CONNECT_TIMEOUT_S = 5.0  # an unreachable broker is reported after this long


@dataclass(frozen=True)
class Message:
    """One received message.

    Attributes:
        position: its identity within the source (stable across redeliveries).
        payload: the raw bytes the publisher sent.
        redelivered: the broker says it may have delivered it before; only such a message
            can be a copy of one already committed, so only it is checked against them.
        token: what the transport needs to acknowledge it.
    """

    position: str
    payload: bytes
    redelivered: bool = False
    token: Any = None


class StreamSource(Protocol):
    """A connected subscription to one topic, subject, queue or stream.

    `acks_confirmed` says whether the broker confirms an ack before `ack` returns (or before
    `close` returns, for acks written ahead of a closing handshake). MQTT sends PUBACK with
    no answer, so a version whose acks were sent is still checked for copies for a while.
    `ids_as_positions`: a position names one message (see the attribute).
    """

    acks_confirmed: bool
    # whether a position is the broker's id of the message (NATS stream sequence, Redis
    # entry id), so a second delivery of it is a copy even when it comes unmarked; a
    # content position (MQTT, AMQP) is shared by two messages with the same payload
    ids_as_positions: bool

    def receive(self, limit: int, timeout: float) -> list[Message]:
        """Up to `limit` messages, waiting at most `timeout` seconds for the first."""
        ...

    def ack(self, messages: Sequence[Message]) -> None:
        """Acknowledge `messages`: the broker will not deliver them again."""
        ...

    def close(self) -> None:
        """Disconnect; messages received and not acknowledged go back to the broker."""
        ...


@dataclass(frozen=True)
class StreamUrl:
    """A parsed broker URL: `scheme://[user:password@]host[:port]/name[?key=value]`."""

    scheme: str
    host: str
    port: int | None
    username: str | None
    password: str | None
    name: str
    query: dict[str, str]

    @property
    def redacted(self) -> str:
        """The URL without its password, safe to print and to record."""
        user = f"{self.username}@" if self.username else ""
        port = f":{self.port}" if self.port else ""
        query = "&".join(f"{key}={value}" for key, value in sorted(self.query.items()))
        return f"{self.scheme}://{user}{self.host}{port}/{self.name}" + (
            f"?{query}" if query else ""
        )


def parse_stream_url(url: str) -> StreamUrl:
    """Split a broker URL into its parts.

    Raises:
        StreamError: the URL has no host or no topic/subject/queue/stream name.
    """
    # no broker URL has a fragment: '#' is MQTT's multi-level wildcard (mqtt://host/site/#)
    parts: SplitResult = urlsplit(url, allow_fragments=False)
    try:
        port = parts.port
    except ValueError:
        raise StreamError(f"The stream URL has an invalid port; check '{_strip(url)}'.") from None
    name = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not name:
        raise StreamError(
            f"The stream URL '{_strip(url)}' needs a host and a name after it, as in "
            f"{parts.scheme or 'mqtt'}://127.0.0.1/sensors."
        )
    query = dict(pair.split("=", 1) for pair in parts.query.split("&") if "=" in pair)
    return StreamUrl(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        name=name,
        query=query,
    )


def _strip(url: str) -> str:
    """`url` with any password removed (it is never printed)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return parts._replace(netloc=user + netloc).geturl()


def reason(exc: BaseException) -> str:
    """An exception's first line without its closing period, to quote inside a sentence."""
    text = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else ""
    return text or type(exc).__name__


def content_position(payload: bytes) -> str:
    """A position for a transport without message ids: the payload's sha256."""
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def query_seconds(url: StreamUrl, key: str, default: float) -> float:
    """A positive number of seconds from the URL's query, e.g. `?ack_wait=30`."""
    raw = url.query.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise StreamError(f"'{key}={raw}' in the stream URL is not a positive number of seconds.")
    return value
