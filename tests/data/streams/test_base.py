from __future__ import annotations

import pytest

from forgeml.core.errors import StreamError
from forgeml.data.streams import parse_stream_url
from forgeml.data.streams._mqtt import is_topic_filter


def test_a_url_splits_into_broker_name_and_options_and_prints_without_password() -> None:
    url = parse_stream_url("amqp://ingest:p%40ss@broker.local:5673/readings?vhost=iot")
    assert (url.scheme, url.host, url.port, url.name) == ("amqp", "broker.local", 5673, "readings")
    assert (url.username, url.password, url.query) == ("ingest", "p@ss", {"vhost": "iot"})
    assert url.redacted == "amqp://ingest@broker.local:5673/readings?vhost=iot"


def test_an_mqtt_wildcard_is_part_of_the_topic_not_a_fragment() -> None:
    assert parse_stream_url("mqtt://127.0.0.1/site/+/temperature/#").name == (
        "site/+/temperature/#"
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379", "needs a host and a name"),
        ("nats:///subject", "needs a host and a name"),
        ("mqtt://user:hunter2@127.0.0.1:70000/t", "invalid port"),
    ],
)
def test_a_malformed_url_says_what_is_missing_and_never_the_password(
    url: str, expected: str
) -> None:
    with pytest.raises(StreamError, match=expected) as raised:
        parse_stream_url(url)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize(
    ("topic", "valid"),
    [
        ("site/kitchen/temperature", True),
        ("site/+/temperature", True),
        ("site/#", True),
        ("#", True),
        ("site/#/kitchen", False),
        ("site/kit#", False),
        ("site/kit+/x", False),
        ("", False),
    ],
)
def test_mqtt_topic_filters_follow_the_spec(topic: str, valid: bool) -> None:
    assert is_topic_filter(topic) is valid
