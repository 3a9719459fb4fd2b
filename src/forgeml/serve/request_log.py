"""A sampled log of requests and responses (JSON lines), for the drift monitor to read.

Sampling and redaction are decided on the request path (a random draw and a dict copy);
serialising and writing happen in a writer thread, so the log never slows a response.
Every replica of a deployment appends to the same file, each burst of whole lines in one
write, so lines of different processes never interleave.
A record: `{"ts", "id", "model", "version", "protocol", "instances", "outputs"}` (`id`:
the request id, `forgeml.serve.request_ids`), where
`instances` are the raw rows as sent, with every redacted field's value replaced; a
generation whose request named the prompt version it was rendered from
(`forgeml.serve.prompt_refs`) also has `"prompt": "NAME@vN"`. The OpenAI routes log a chat
request's messages as its one instance and the reply message as its output, and a
completion request's prompts and texts.
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
        prompt: str = "",
    ) -> None:
        """Queue one request for the log if the sample draw selects it.

        `prompt` is the `NAME@vN` the request was rendered from ("": none named).
        """
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
        if prompt:
            entry["prompt"] = prompt
        self._queue.put(entry)

    @property
    def enabled(self) -> bool:
        """Whether any request can be kept (a sample rate above 0)."""
        return self._thread is not None

    def close(self) -> None:
        """Write what is queued and stop the writer."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(10)
            self._thread = None

    def _write(self) -> None:
        # unbuffered, one write per burst of whole lines: the replicas of a deployment
        # append to one log (O_APPEND), and a line must never interleave with another's
        with self.path.open("ab", buffering=0) as sink:
            while True:
                lines, stop = self._burst()
                if lines:
                    try:
                        sink.write(b"".join(lines))
                    except OSError as error:  # a log line must never stop serving
                        _log.warning("request log: could not write entries: %s", error)
                if stop:
                    return

    def _burst(self) -> tuple[list[bytes], bool]:
        """What is queued now, serialised (waiting for the first entry); and whether to stop."""
        lines: list[bytes] = []
        entry = self._queue.get()
        while entry is not _STOP:
            try:
                lines.append(orjson.dumps(entry, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            except TypeError as error:
                _log.warning("request log: could not write an entry: %s", error)
            try:
                entry = self._queue.get_nowait()
            except queue.Empty:
                return lines, False
        return lines, True
