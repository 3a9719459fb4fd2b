"""Who is calling: the key from `Authorization: Bearer` or `x-api-key`, verified and cached.

Verifying a key runs scrypt (tens of milliseconds, 16 MiB), so results are cached in memory
for `ttl_s` seconds, keyed by a sha256 of the presented key (never the key itself). The cost
of the cache: a key revoked in the store keeps working for at most `ttl_s` more seconds in a
running gateway; a wrong secret is cached as a failure for as long, so guessing is no faster.
Once a secret has passed the KDF, its key's record is only re-read when the verdict expires
(is it revoked, what are its scopes and limits now): the secret cannot have changed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from forgeml.core.errors import AuthenticationError
from forgeml.core.workspace import Workspace
from forgeml.gateway._keys import VerifiedKey, reread_key, verify_key

# a cache entry: when it expires, and the key or the error it resolved to
_Entry = tuple[float, VerifiedKey | AuthenticationError]
# bound memory under a flood of random keys; past it the cache starts again empty
_MAX_ENTRIES = 10_000


def presented_key(authorization: str | None, x_api_key: str | None) -> str:
    """The key a request carries.

    Raises:
        AuthenticationError: neither header holds one.
    """
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    if x_api_key and x_api_key.strip():
        return x_api_key.strip()
    raise AuthenticationError(
        "No API key: send 'Authorization: Bearer fml_...' or an 'x-api-key' header."
    )


class KeyCache:
    """Verified keys (and failures) remembered for `ttl_s` seconds."""

    def __init__(
        self,
        workspace: Workspace,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._workspace = workspace
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[bytes, _Entry] = {}
        # presented keys whose secret passed the KDF -> their key id
        self._proven: dict[bytes, str] = {}

    def cached(self, presented: str) -> VerifiedKey | None:
        """The cached verdict, if fresh: the key, or raises its cached error; else None."""
        entry = self._entries.get(hashlib.sha256(presented.encode()).digest())
        if entry is None or entry[0] < self._clock():
            return None
        if isinstance(entry[1], AuthenticationError):
            raise AuthenticationError(str(entry[1]))
        return entry[1]

    def verify(self, presented: str) -> VerifiedKey:
        """Check against the store (blocking: the KDF, unless this secret passed it before).

        Raises:
            AuthenticationError: malformed, unknown, wrong or revoked key.
        """
        digest = hashlib.sha256(presented.encode()).digest()
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        if len(self._proven) >= _MAX_ENTRIES:
            self._proven.clear()
        proven = self._proven.get(digest)
        try:
            if proven is None:
                verified = verify_key(self._workspace, presented)
            else:
                verified = reread_key(self._workspace, proven)
        except AuthenticationError as error:
            self._entries[digest] = (self._clock() + self._ttl_s, error)
            raise
        self._proven[digest] = verified.id
        self._entries[digest] = (self._clock() + self._ttl_s, verified)
        return verified
