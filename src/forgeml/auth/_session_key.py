"""The session-signing key: 32 random bytes made at first use, per install, mode 0600.

No default or built-in key exists (Label Studio CVE-2023-43791: a shipped SECRET_KEY let
anyone forge sessions). A session cookie is a session token plus its HMAC-SHA256 under this
key, so a cookie is refused before the database is asked unless this install signed it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from forgeml.core.errors import ConfigError

_KEY_BYTES = 32


def load_session_key(path: Path) -> bytes:
    """The key in `path`, made (0600, atomically) when the file does not exist.

    Raises:
        ConfigError: the file is readable by others, or not a key.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(_KEY_BYTES))
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"The session key {path} is readable by other users: run chmod 600 on it "
            "(or delete it to sign everyone out and make a new one)."
        )
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:
        raise ConfigError(f"The session key {path} is not 64 hex digits: delete it to make one.")
    return key


def sign(key: bytes, token: str) -> str:
    """`token` with its signature, as a cookie carries it."""
    return f"{token}.{hmac.new(key, token.encode(), hashlib.sha256).hexdigest()}"


def unsign(key: bytes, cookie: str) -> str | None:
    """The token in a signed `cookie`, or None when the signature is not this install's."""
    token, _, mac = cookie.rpartition(".")
    expected = hmac.new(key, token.encode(), hashlib.sha256).hexdigest()
    return token if token and hmac.compare_digest(mac, expected) else None
