"""An API error answer turned back into the `ForgemlError` the local code raises.

The server answers every `ForgemlError` with its `http_status` and `{"error": SENTENCE,
"code": CODE}` (`forgeml.api._app`); the client raises the class `CODE` names in the one
table (`forgeml.core.errors.ERROR_CODES`), with the server's sentence, so the CLI prints the
same line and exits with the same code (a `UsageError` on the server exits 2 here too). An
answer without a code (a proxy's, an older server's) falls back to its status.
"""

from __future__ import annotations

from typing import Any

from forgeml.core.errors import (
    ERROR_CODES,
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
    """The error an answer with `status` and JSON `body` (`{"error", "code"}`) stands for."""
    sentence = body.get("error") if isinstance(body, dict) else None
    if not isinstance(sentence, str) or not sentence:
        sentence = f"The forgeml server answered HTTP {status} without an error sentence."
    if status == 429:
        return RateLimitedError(sentence, float(headers.get("Retry-After", "1")))
    code = body.get("code") if isinstance(body, dict) else None
    named = ERROR_CODES.get(code) if isinstance(code, str) else None
    return _sentence_only(named or _BY_STATUS.get(status, ForgemlError))(sentence)


def _sentence_only(cls: type[ForgemlError]) -> type[ForgemlError]:
    """`cls`, or its nearest base made from a sentence alone (a class that also takes a
    row list, a sequence number or a wait answers as its base: the exit code is the same)."""
    for base in cls.__mro__:
        if "__init__" not in vars(base) and issubclass(base, ForgemlError):
            return base
    return ForgemlError
