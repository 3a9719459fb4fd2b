"""`ingest_stream`: one bounded window of a broker's messages as a new dataset version.

The order is what makes a crash safe: receive (nothing acknowledged), commit the version
(one transaction), acknowledge, then confirm the acknowledgements with an audit event.
Killed before the commit, the broker still holds every message and delivers it again;
killed between commit and confirmation, the messages it delivers again are found in the
unconfirmed version by position and dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from forgeml.core.errors import StreamError
from forgeml.core.ids import validate_name
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data.streams import _version
from forgeml.data.streams._base import Message, StreamSource, parse_stream_url
from forgeml.data.streams._registry import open_source
from forgeml.data.streams._window import collect
from forgeml.data.streams.options import StreamOptions


@dataclass
class StreamIngestResult:
    """What one window did.

    Attributes:
        recorded: the new (or identical existing) version; None when the window was empty.
        records: new records in the window.
        dropped: redeliveries of already committed records, acknowledged and dropped.
        payload_format: "json" or "bytes" (None for an empty window).
        source: the URL without its password.
    """

    recorded: catalog.Recorded | None
    records: int
    dropped: int
    payload_format: str | None
    source: str


# a broker that never answers an ack (MQTT) may deliver again what the latest versions hold
# (seen with Mosquitto 2.0 resuming a session): their positions are checked as well
_UNANSWERED_ACK_VERSIONS = 2


def ingest_stream(
    workspace: Workspace,
    name: str,
    url: str,
    options: StreamOptions,
    *,
    clock: Callable[[], float] = time.monotonic,
    on_progress: Callable[[int], None] = lambda _count: None,
) -> StreamIngestResult:
    """Receive one window from `url` and record it as the next version of `name`.

    Args:
        workspace: where the version is recorded.
        name: the dataset; its name also names the durable consumer on the broker.
        url: `mqtt://`, `nats://`, `amqp://` or `redis://` broker URL with the topic,
            subject, queue or stream as its path.
        options: the window's bounds and payload format.
        clock: seconds, monotonic (tests pass a fake).
        on_progress: called with 0 once subscribed, then with the window's record count
            after each received batch.

    Raises:
        StreamError: bad URL, unknown scheme, unreachable broker, refused subscription.
        InvalidDataError: `payload` "json" and a message is not a JSON object.
    """
    validate_name(name, "dataset name")
    parsed = parse_stream_url(url)
    source = open_source(parsed, f"forgeml-{name}")
    on_progress(0)  # subscribed: from here on the broker holds what this window misses
    try:
        recent = 0 if source.acks_confirmed else _UNANSWERED_ACK_VERSIONS
        committed = _version.unconfirmed_positions(workspace, name, parsed.redacted, recent)
        window = collect(
            source, options.max_records, options.max_seconds, committed, clock, on_progress
        )
        if not window.messages:
            source.ack(window.copies)
            return StreamIngestResult(None, 0, window.dropped, None, parsed.redacted)
        recorded = _version.commit(
            workspace, name, parsed.redacted, window.messages, options.payload
        )
        _ack_committed(source, recorded, window.messages + window.copies)
    finally:
        source.close()
    _version.confirm_acked(workspace, recorded.version, len(window.messages))
    return StreamIngestResult(
        recorded,
        len(window.messages),
        window.dropped,
        recorded.version.recipe["params"]["payload"],
        parsed.redacted,
    )


def _ack_committed(
    source: StreamSource, recorded: catalog.Recorded, messages: list[Message]
) -> None:
    try:
        source.ack(messages)
    except StreamError as exc:
        raise StreamError(
            f"{recorded.version.ref} is recorded, but acknowledging its messages failed "
            f"({str(exc).rstrip('.')}); the next run drops the ones the broker delivers again."
        ) from None
