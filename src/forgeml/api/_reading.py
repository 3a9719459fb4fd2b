"""GET and HEAD requests read: their store sessions take no writers' lock.

A list or a show must not wait behind a long write (an upload's transaction, a bulk
import) nor hold up writers; inside `reading()` every `Store.session()` is a read session
(`core.store`), which also refuses any write a GET route might attempt. The two GETs that
write (the OIDC callback signs the browser in; the runs' reaper on its cadence) ask for a
write session themselves or are left out here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from forgeml.core.reading import reading

# the OIDC callback creates the session it signs the browser in with
_WRITING_GETS = ("/api/v1/auth/oidc/",)


class ReadOnlyGets:
    """ASGI middleware: a GET or HEAD request is served inside `reading()`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in ("GET", "HEAD")
            or scope["path"].startswith(_WRITING_GETS)
        ):
            await self.app(scope, receive, send)
            return
        # the scope's context is copied into the threads that run the sync handlers
        with reading():
            await self.app(scope, receive, send)


class Cadence:
    """Says `due()` at most once every `every` seconds of `clock` (first call: due)."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._next = float("-inf")
        self._lock = threading.Lock()

    def due(self) -> bool:
        now = self.clock()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self.every
            return True
