"""An API error answer turned back into the `ForgemlError` the local code raises.

The server answers every `ForgemlError` with its `http_status` and `{"error": SENTENCE}`
(`forgeml.api._app`); the client raises, for that status, the class the local code raises,
with the server's sentence, so the CLI prints the same line and exits with the same code.
Several classes share a status (409: a job's or a key's state, a name taken); they share
their exit code too, which is what the CLI's parity rests on.
"""

from __future__ import annotations

from typing import Any

from forgeml.core.errors import (
    AlreadyExistsError,
    AuthenticationError,
    BadGatewayError,
    ForgemlError,
    IntegrityError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServiceUnavailableError,
    UpstreamTimeoutError,
)

_BY_STATUS: dict[int, type[ForgemlError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: AlreadyExistsError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    500: IntegrityError,
    502: BadGatewayError,
    503: ServiceUnavailableError,
    504: UpstreamTimeoutError,
}


def error_for(status: int, body: Any, headers: Any) -> ForgemlError:
    """The error an answer with `status` and JSON `body` (`{"error": SENTENCE}`) stands for."""
    sentence = body.get("error") if isinstance(body, dict) else None
    if not isinstance(sentence, str) or not sentence:
        sentence = f"The forgeml server answered HTTP {status} without an error sentence."
    if status == 429:
        return RateLimitedError(sentence, float(headers.get("Retry-After", "1")))
    return _BY_STATUS.get(status, ForgemlError)(sentence)
