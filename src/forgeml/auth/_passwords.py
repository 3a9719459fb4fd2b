"""Passwords, hashed with Argon2id (argon2-cffi; RFC 9106), a memory-hard function."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from forgeml.auth._settings import AuthSettings
from forgeml.core.errors import UsageError

MIN_LENGTH = 12
MAX_LENGTH = 1024


class Passwords:
    """Hashes and checks passwords at the cost `settings` sets."""

    def __init__(self, settings: AuthSettings) -> None:
        self._hasher = PasswordHasher(
            time_cost=settings.argon2_time_cost,
            memory_cost=settings.argon2_memory_kib,
            parallelism=settings.argon2_parallelism,
        )
        # checked against when the account is unknown, so that takes as long as a wrong
        # password for a known one (no telling which names exist from the timing)
        self._decoy = self._hasher.hash("forgeml decoy password")

    def hash(self, password: str) -> str:
        """The Argon2id hash of `password` (a fresh salt each time).

        Raises:
            UsageError: the password is too short or too long.
        """
        if len(password) < MIN_LENGTH:
            raise UsageError(f"A password has at least {MIN_LENGTH} characters.")
        if len(password) > MAX_LENGTH:
            raise UsageError(f"A password has at most {MAX_LENGTH} characters.")
        return self._hasher.hash(password)

    def verify(self, stored: str | None, password: str) -> bool:
        """Whether `password` matches `stored` (None: no password; the decoy is checked)."""
        if len(password) > MAX_LENGTH:
            return False
        try:
            return self._hasher.verify(stored or self._decoy, password) and stored is not None
        except (VerificationError, InvalidHashError):
            return False
