"""MQTT topics read through a persistent session with QoS 1 and manual acknowledgements.

MQTT keeps no history to replay: the broker queues QoS 1 messages only for a session that
exists. The client id `forgeml-<dataset>` connects with `clean_start` off and a session
that never expires, subscribes at QoS 1, and sends each PUBACK only after the version is
committed. A message received and not acknowledged when the connection drops is sent again
on the next connect with the DUP flag. MQTT 3.1.1 and 5 carry no message id that survives
a redelivery, so a message's position is its payload's sha256.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

from forgeml.core.errors import StreamError
from forgeml.data.streams._base import (
    CONNECT_TIMEOUT_S,
    Message,
    StreamUrl,
    content_position,
    reason,
)

_NEVER_EXPIRES = 0xFFFFFFFF  # MQTT 5 session expiry interval: the session outlives the client
_RECEIVE_MAXIMUM = 65535  # let a whole window be in flight (the broker's default is 20)


class MqttSource:
    """A persistent QoS 1 subscription to `url.name` as client `client_id`."""

    acks_confirmed = False  # PUBACK has no answer
    ids_as_positions = False  # the payload's digest

    def __init__(self, url: StreamUrl, client_id: str) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        self._inbox: queue.Queue[Any] = queue.Queue()
        self._ready = threading.Event()
        self._disconnected = threading.Event()
        self._outcome: str | None = None
        self._client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5,
            manual_ack=True,
        )
        if url.username:
            self._client.username_pw_set(url.username, url.password)
        self._client.on_connect = self._on_connect
        self._client.on_subscribe = self._on_subscribe
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = lambda _client, _data, message: self._inbox.put(message)
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = _NEVER_EXPIRES
        properties.ReceiveMaximum = _RECEIVE_MAXIMUM
        try:
            self._client.connect(
                url.host, url.port or 1883, clean_start=False, properties=properties
            )
        except (OSError, ValueError) as exc:
            raise StreamError(
                f"Cannot reach the MQTT broker at {url.redacted}: {reason(exc)}."
            ) from None
        self._client.loop_start()
        self._wait(f"the MQTT broker at {url.redacted} to accept the connection")
        self._subscribe(url.name)

    def _subscribe(self, topic: str) -> None:
        self._ready.clear()
        if not is_topic_filter(topic):
            self.close()
            raise StreamError(
                f"'{topic}' is not a valid MQTT topic filter ('#' only as the last level, "
                "'+' only as a whole level)."
            )
        self._client.subscribe(topic, qos=1)
        self._wait(f"the subscription to '{topic}'")

    def _wait(self, what: str) -> None:
        if not self._ready.wait(CONNECT_TIMEOUT_S):
            self.close()
            raise StreamError(f"Timed out waiting for {what}.")
        if self._outcome is not None:
            outcome, self._outcome = self._outcome, None
            self.close()
            raise StreamError(f"Waiting for {what} failed: {outcome}.")

    def _on_connect(self, _client: Any, _data: Any, _flags: Any, reason: Any, _props: Any) -> None:
        if reason.is_failure:
            self._outcome = str(reason)
        self._ready.set()

    def _on_disconnect(self, _client: Any, _data: Any, _flags: Any, reason: Any, _p: Any) -> None:
        self._disconnected.set()
        if not self._ready.is_set():
            self._outcome = f"the broker closed the connection ({reason})"
            self._ready.set()

    def _on_subscribe(self, _client: Any, _data: Any, _mid: int, reasons: Any, _p: Any) -> None:
        if any(reason.is_failure for reason in reasons):
            self._outcome = "the broker refused it (" + ", ".join(map(str, reasons)) + ")"
        self._ready.set()

    def receive(self, limit: int, timeout: float) -> list[Message]:
        received: list[Message] = []
        try:
            received.append(_message(self._inbox.get(timeout=timeout)))
            while len(received) < limit:
                received.append(_message(self._inbox.get_nowait()))
        except queue.Empty:
            pass
        return received

    def ack(self, messages: Sequence[Message]) -> None:
        import paho.mqtt.client as mqtt

        for message in messages:
            mid, qos = message.token
            code = self._client.ack(mid, qos)
            if code != mqtt.MQTT_ERR_SUCCESS:
                raise StreamError(f"The MQTT PUBACK could not be sent: {mqtt.error_string(code)}.")

    def close(self) -> None:
        # PUBACKs only sit in paho's queue until its thread writes them: wait until the
        # DISCONNECT queued after them is written, or stopping the thread would drop them
        if self._client.disconnect() == 0:
            self._disconnected.wait(CONNECT_TIMEOUT_S)
        self._client.loop_stop()


def is_topic_filter(topic: str) -> bool:
    """Whether `topic` is a valid MQTT topic filter (MQTT 5.0, section 4.7.1)."""
    if not topic or "\0" in topic or len(topic.encode()) > 65535:
        return False
    levels = topic.split("/")
    for index, level in enumerate(levels):
        if "#" in level and (level != "#" or index != len(levels) - 1):
            return False
        if "+" in level and level != "+":
            return False
    return True


def _message(incoming: Any) -> Message:
    payload = bytes(incoming.payload)
    token = (incoming.mid, incoming.qos)
    return Message(content_position(payload), payload, bool(incoming.dup), token)


def open_mqtt(url: StreamUrl, client_id: str) -> MqttSource:
    return MqttSource(url, client_id)
