"""`forgeml data ingest-stream` from the command line: a window, and each bad input."""

from __future__ import annotations

import re
import socket
import uuid
from typing import Any

import orjson
import pytest

from tests.data.streams.conftest import broker_address


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _one_sentence(result: Any) -> str:
    """The error line; besides it, stderr holds only the progress log lines."""
    assert result.code == 1, result.stdout + result.stderr
    lines = [
        line
        for line in result.stderr.strip().splitlines()
        if line != "subscribed" and not re.fullmatch(r"received \d+ records", line)
    ]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return str(lines[0])


def test_a_redis_window_becomes_a_version_and_rebuilds(cli: Any) -> None:
    import redis

    base = broker_address("redis")
    key = f"forgeml-test-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(base)
    try:
        for number in range(3):
            client.xadd(key, {"data": orjson.dumps({"n": number})})
        done = cli(
            "data", "ingest-stream", "meters", f"{base}/{key}", "--max-records", "3", "--json"
        )
        assert done.code == 0, done.stderr
        answer = orjson.loads(done.stdout)
        assert (answer["records"], answer["version"]["ref"]) == (3, "meters@v1")
        assert answer["version"]["report"] == {"records": 3, "payload_format": "json"}
        assert cli("data", "rebuild", "meters@v1").code == 0
    finally:
        client.delete(key)
        client.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("foo://127.0.0.1/sensors", "Unknown stream scheme 'foo://'"),
        ("mqtt://127.0.0.1", "needs a host and a name"),
        ("redis://127.0.0.1:99999/x", "invalid port"),
        ("nats://127.0.0.1/s?ack_wait=soon", "not a positive number of seconds"),
        ("redis://127.0.0.1/s?db=main", "not a database number"),
    ],
)
def test_a_malformed_url_is_one_sentence(cli: Any, url: str, expected: str) -> None:
    assert expected in _one_sentence(cli("data", "ingest-stream", "meters", url))


@pytest.mark.parametrize("scheme", ["mqtt", "nats", "amqp", "redis"])
def test_an_unreachable_broker_is_one_sentence_without_the_password(cli: Any, scheme: str) -> None:
    url = f"{scheme}://user:s3cret-word@127.0.0.1:{_closed_port()}/sensors"
    line = _one_sentence(cli("data", "ingest-stream", "meters", url))
    assert "Cannot reach" in line
    assert "s3cret-word" not in line
    assert cli("data", "list", "--json").stdout.strip() == "[]"


def test_an_invalid_mqtt_topic_filter_is_one_sentence(cli: Any) -> None:
    url = f"{broker_address('mqtt')}/sensors/#/kitchen"
    line = _one_sentence(cli("data", "ingest-stream", f"m-{uuid.uuid4().hex[:8]}", url))
    assert "not a valid MQTT topic filter" in line


def test_a_nats_subject_without_a_stream_is_one_sentence(cli: Any) -> None:
    url = f"{broker_address('nats')}/forgeml.nostream.{uuid.uuid4().hex}"
    assert "No JetStream stream holds" in _one_sentence(cli("data", "ingest-stream", "m", url))


def test_a_missing_amqp_queue_is_one_sentence(cli: Any) -> None:
    url = f"{broker_address('amqp')}/forgeml-missing-{uuid.uuid4().hex}"
    assert "does not exist" in _one_sentence(cli("data", "ingest-stream", "m", url))


def test_a_redis_key_that_is_not_a_stream_is_one_sentence(cli: Any) -> None:
    import redis

    base = broker_address("redis")
    key = f"forgeml-test-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(base)
    client.set(key, "a plain string")
    try:
        line = _one_sentence(cli("data", "ingest-stream", "m", f"{base}/{key}"))
        assert "refused the consumer group" in line
    finally:
        client.delete(key)
        client.close()


def test_a_message_that_is_not_json_fails_payload_json_and_stays_with_the_broker(
    cli: Any,
) -> None:
    import redis

    base = broker_address("redis")
    key = f"forgeml-test-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(base)
    client.xadd(key, {"data": b"21.5C"})
    try:
        args = ("data", "ingest-stream", "meters", f"{base}/{key}", "--max-records", "1")
        line = _one_sentence(cli(*args, "--payload", "json"))
        assert "is not a JSON object" in line
        assert cli("data", "list", "--json").stdout.strip() == "[]"
        kept = cli(*args, "--payload", "bytes", "--json")  # nothing was acked: it comes back
        assert orjson.loads(kept.stdout)["version"]["report"]["payload_format"] == "bytes"
    finally:
        client.delete(key)
        client.close()


def test_a_window_bound_below_one_is_one_sentence(cli: Any) -> None:
    line = _one_sentence(cli("data", "ingest-stream", "m", "redis://x/y", "--max-records", "0"))
    assert "max_records" in line
