"""IoT and message streams as dataset versions: MQTT, NATS JetStream, AMQP, Redis streams.

`ingest_stream(workspace, name, url, options)` turns one bounded window of messages into a
new version of `name` whose parent is its previous version, exactly once across crashes
(see `_ingest.py` for the order that makes that hold, and the README for what MQTT can
and cannot give). Transports are chosen by URL scheme (`register_transport`).

The names that read data (`ingest_stream`, `replay_stream`) load on first use, so that
the CLI can read `StreamOptions` without importing polars or SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forgeml.data.streams._base import STREAM_OP, Message, StreamSource, StreamUrl, parse_stream_url
from forgeml.data.streams._registry import (
    TransportOpener,
    check_stream_url,
    open_source,
    register_transport,
    transport_schemes,
)
from forgeml.data.streams.options import StreamOptions

if TYPE_CHECKING:
    from forgeml.data.streams._ingest import StreamIngestResult, ingest_stream
    from forgeml.data.streams._version import replay as replay_stream

_LAZY = {
    "StreamIngestResult": ("forgeml.data.streams._ingest", "StreamIngestResult"),
    "ingest_stream": ("forgeml.data.streams._ingest", "ingest_stream"),
    "replay_stream": ("forgeml.data.streams._version", "replay"),
}

__all__ = [
    "STREAM_OP",
    "Message",
    "StreamIngestResult",
    "StreamOptions",
    "StreamSource",
    "StreamUrl",
    "TransportOpener",
    "check_stream_url",
    "ingest_stream",
    "open_source",
    "parse_stream_url",
    "register_transport",
    "replay_stream",
    "transport_schemes",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    module, attribute = _LAZY[name]
    return getattr(import_module(module), attribute)
