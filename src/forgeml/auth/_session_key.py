"""The session-signing key: 32 random bytes made at first use, per install.

It is kept in the metadata store (`core/install_keys.py`), so every server of one database
accepts the cookies of the others (a team behind a load balancer); an older install's
FORGEML_HOME/auth/session.key is moved there on first use. A key file named in the
settings (`FORGEML_AUTH_SESSION_KEY_FILE`, mode 0600, made when missing) is used instead.

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
from typing import TYPE_CHECKING

from forgeml.core.errors import ConfigError
from forgeml.core.install_keys import SESSION_KEY, install_key

if TYPE_CHECKING:
    from forgeml.auth._settings import AuthSettings
    from forgeml.core.workspace import Workspace

_KEY_BYTES = 32
LEGACY_FILE = Path("auth") / "session.key"  # in FORGEML_HOME, before the key moved to the store


def session_key(workspace: Workspace, settings: AuthSettings) -> bytes:
    """The key that signs `workspace`'s session cookies: the settings' key file when one
    is named, else the store's key (shared by every server of the database).

    Raises:
        ConfigError: the key file is readable by others, or a key is not 64 hex digits.
    """
    if settings.session_key_file is not None:
        return load_session_key(settings.session_key_file)
    legacy = Path(workspace.settings.home) / LEGACY_FILE
    key = install_key(workspace.store, SESSION_KEY, legacy)
    assert key is not None  # made when missing (create=True)
    return key


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
