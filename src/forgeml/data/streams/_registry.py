"""Stream transports by URL scheme; each imported only when its scheme is used.

`register_transport(scheme, opener)` adds one; `open_source(url, consumer)` connects;
`check_stream_url(url)` checks a URL without connecting.
"""

from __future__ import annotations

from collections.abc import Callable

from forgeml.core.errors import StreamError
from forgeml.data.streams._base import StreamSource, StreamUrl, parse_stream_url

# opener(url, consumer): `consumer` names the durable state on the broker (client id,
# consumer group, durable consumer) so that a restart resumes where the last run stopped
TransportOpener = Callable[[StreamUrl, str], StreamSource]


def _mqtt(url: StreamUrl, consumer: str) -> StreamSource:
    from forgeml.data.streams._mqtt import open_mqtt

    return open_mqtt(url, consumer)


def _nats(url: StreamUrl, consumer: str) -> StreamSource:
    from forgeml.data.streams._nats import open_nats

    return open_nats(url, consumer)


def _amqp(url: StreamUrl, consumer: str) -> StreamSource:
    from forgeml.data.streams._amqp import open_amqp

    return open_amqp(url, consumer)


def _redis(url: StreamUrl, consumer: str) -> StreamSource:
    from forgeml.data.streams._redis import open_redis

    return open_redis(url, consumer)


_REGISTRY: dict[str, TransportOpener] = {
    "mqtt": _mqtt,
    "nats": _nats,
    "amqp": _amqp,
    "redis": _redis,
}


def register_transport(scheme: str, opener: TransportOpener) -> None:
    """Make `scheme://` URLs open with `opener(url, consumer)`."""
    _REGISTRY[scheme] = opener


def transport_schemes() -> list[str]:
    """The registered URL schemes."""
    return sorted(_REGISTRY)


def check_stream_url(url: str) -> StreamUrl:
    """`url` parsed, its scheme a registered transport's; nothing is connected.

    Raises:
        StreamError: no host or name, an invalid port, or an unknown scheme.
    """
    parsed = parse_stream_url(url)
    _opener(parsed)
    return parsed


def _opener(url: StreamUrl) -> TransportOpener:
    opener = _REGISTRY.get(url.scheme)
    if opener is None:
        raise StreamError(
            f"Unknown stream scheme '{url.scheme}://'; use one of "
            f"{', '.join(s + '://' for s in transport_schemes())}."
        )
    return opener


def open_source(url: StreamUrl, consumer: str) -> StreamSource:
    """Connect to the broker `url` names as durable consumer `consumer`.

    Raises:
        StreamError: the scheme is unknown, or the broker cannot be reached or refuses.
    """
    return _opener(url)(url, consumer)
