"""Request ids: every inference request a model server answers carries one.

The id is the caller's `x-request-id` header when it sends a usable one (at most
`MAX_LENGTH` printable ASCII characters, no space, quote or backslash), else one minted
here: a random prefix drawn once per process and a counter, so ids are unique across
replicas and restarts without drawing randomness per request. KServe v2's body `id` wins over both
(the protocol echoes it). The id goes back in the `x-request-id` response header on
every protocol, in a v2 response's `id`, and into the request log, and it is what
`POST /v2/models/NAME/feedback` names to label a prediction later.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any

from starlette.types import Scope

HEADER = b"x-request-id"
MAX_LENGTH = 128
SCOPE_KEY = "forgeml.request_id"  # where the app keeps a request's id in its ASGI scope


class RequestIds:
    """Mints ids `<prefix>-<n>`: a per-process random prefix and a counter."""

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix or secrets.token_hex(6)
        self._counter = itertools.count(1)

    def mint(self) -> str:
        """A new id, unique to this process (and, by its prefix, across processes)."""
        return f"{self.prefix}-{next(self._counter)}"


def usable(value: str) -> bool:
    """Whether a caller's id can be kept as is (short printable ASCII, no space or quote)."""
    return (
        0 < len(value) <= MAX_LENGTH
        and value.isascii()
        and value.isprintable()
        and not any(c in value for c in ' "\\')
    )


def incoming(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The caller's usable `x-request-id`, if it sent one."""
    for key, value in headers:
        if key == HEADER:
            text = value.decode("latin-1")
            return text if usable(text) else None
    return None


def request_id_of(scope: Scope) -> str:
    """The id the app gave the request of `scope` (minted by `assign` on the way in)."""
    found: Any = scope.get(SCOPE_KEY)
    return found if isinstance(found, str) else ""


def set_request_id(scope: Scope, value: str) -> None:
    """Answer the request of `scope` under `value` (a v2 body's own `id`)."""
    scope[SCOPE_KEY] = value
