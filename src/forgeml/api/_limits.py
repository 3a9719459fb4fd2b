"""The API's limits on what one request or one caller may hold (issue 15's "Limits")."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

from forgeml.core.errors import PayloadTooLargeError, RateLimitedError


@dataclass(frozen=True)
class ApiLimits:
    """Limits of an app: the largest upload body, the files and folders one upload may
    unpack to (`POST /api/v1/commands`), and concurrent log streams per caller."""

    max_upload_bytes: int = 1 << 30
    max_upload_members: int = 10_000
    max_log_streams: int = 8


async def receive_to_file(request: Request, path: Path, max_bytes: int, what: str) -> int:
    """Write the request's body to `path` as it arrives, a chunk at a time (never whole in
    memory); returns its size. `what` names the upload in the error.

    Raises:
        PayloadTooLargeError: the body (as declared, or as received) is over `max_bytes`;
            what was written is left for the caller to remove.
    """
    too_large = PayloadTooLargeError(
        f"{what} is larger than this server's limit of {max_bytes:,} bytes."
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    received = 0
    with open(path, "wb") as handle:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_bytes:
                raise too_large
            handle.write(chunk)
    return received


class StreamSlots:
    """How many log streams each caller holds; one more than the limit is a 429."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, actor: str) -> None:
        """Hold one slot for `actor` (give it back with `give`).

        Raises:
            RateLimitedError: `actor` already holds `limit` streams.
        """
        with self._lock:
            if self._held[actor] >= self.limit:
                raise RateLimitedError(
                    f"{actor} already follows {self.limit} log streams, this server's limit; "
                    "close one first.",
                    retry_after=1.0,
                )
            self._held[actor] += 1

    def give(self, actor: str) -> None:
        with self._lock:
            self._held[actor] -= 1

    def held(self, actor: str) -> int:
        with self._lock:
            return self._held[actor]

    @contextmanager
    def slot(self, actor: str) -> Iterator[None]:
        self.take(actor)
        try:
            yield
        finally:
            self.give(actor)
