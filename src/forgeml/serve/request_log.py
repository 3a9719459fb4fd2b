"""A sampled log of requests and responses (JSON lines), for the drift monitor to read.

Sampling and redaction are decided on the request path (a random draw and a dict copy);
serialising and writing happen in a writer thread, so the log never slows a response.
A record: `{"ts", "id", "model", "version", "protocol", "instances", "outputs"}` (`id`:
the request id, `forgeml.serve.request_ids`), where
`instances` are the raw rows as sent, with every redacted field's value replaced.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from pathlib import Path
from typing import Any

import orjson

REDACTED = "[REDACTED]"
_STOP = object()
_log = logging.getLogger(__name__)


def redact(value: Any, fields: frozenset[str]) -> Any:
    """A copy of `value` with the value of every dict key in `fields` replaced, at any depth."""
    if isinstance(value, dict):
        return {k: REDACTED if k in fields else redact(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(item, fields) for item in value]
    return value


class RequestLog:
    """Appends a sample of requests to `path` from a background thread."""

    def __init__(
        self, path: Path, sample_rate: float, redacted: list[str], seed: int | None = None
    ) -> None:
        self.path = path
        self.sample_rate = sample_rate
        self.redacted = frozenset(redacted)
        self._random = random.Random(seed)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if sample_rate > 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._thread = threading.Thread(target=self._write, name="request-log", daemon=True)
            self._thread.start()

    def record(
        self,
        model: str,
        version: str,
        protocol: str,
        instances: list[Any],
        outputs: Any,
        request_id: str = "",
    ) -> None:
        """Queue one request for the log if the sample draw selects it."""
        if self._thread is None or self._random.random() >= self.sample_rate:
            return
        entry = {
            "ts": time.time(),
            "id": request_id,
            "model": model,
            "version": version,
            "protocol": protocol,
            "instances": redact(instances, self.redacted),
            "outputs": redact(outputs, self.redacted),
        }
        self._queue.put(entry)

    def close(self) -> None:
        """Write what is queued and stop the writer."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(10)
            self._thread = None

    def _write(self) -> None:
        with self.path.open("ab") as sink:
            while True:
                entry = self._queue.get()
                if entry is _STOP:
                    return
                try:
                    sink.write(orjson.dumps(entry, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
                    if self._queue.empty():  # flush per burst, not per line
                        sink.flush()
                except (TypeError, OSError) as error:  # a log line must never stop serving
                    _log.warning("request log: could not write an entry: %s", error)
