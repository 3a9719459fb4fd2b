"""The API's limits on what one request or one caller may hold (issue 15's "Limits")."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
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

    @property
    def max_command_body_bytes(self) -> int:
        """The largest JSON body of `POST /api/v1/commands`: an upload at the byte limit in
        base64 (4 bytes for 3), with room for its folders' tars (2 KiB a member: a header,
        a long name's and the padding) and 64 KiB for the command line and the JSON."""
        raw = self.max_upload_bytes + self.max_upload_members * 2048 + (64 << 10)
        return -(-raw // 3) * 4


async def receive_to_file(request: Request, path: Path, max_bytes: int, what: str) -> int:
    """Write the request's body to `path` as it arrives, a chunk at a time (never whole in
    memory); returns its size. `what` names the upload in the error.

    Raises:
        PayloadTooLargeError: the body (as declared, or as received) is over `max_bytes`;
            what was written is left for the caller to remove.
    """
    received = 0
    with open(path, "wb") as handle:
        async for chunk in _chunks_within(request, max_bytes, what):
            received += len(chunk)
            handle.write(chunk)
    return received


async def receive_body(request: Request, max_bytes: int, what: str) -> bytearray:
    """The request's body, read a chunk at a time and refused as soon as it is over
    `max_bytes`, so that no more than that is ever held. `what` names it in the error.

    Raises:
        PayloadTooLargeError: the body (as declared, or as received) is over `max_bytes`.
    """
    body = bytearray()
    async for chunk in _chunks_within(request, max_bytes, what):
        body += chunk
    return body  # not copied into a `bytes`: the body is held once


async def _chunks_within(request: Request, max_bytes: int, what: str) -> AsyncIterator[bytes]:
    too_large = PayloadTooLargeError(
        f"{what} is larger than this server's limit of {max_bytes:,} bytes."
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > max_bytes:
            raise too_large
        yield chunk


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
