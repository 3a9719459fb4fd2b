"""The install's signing keys, one row each in the metadata store (`InstallKeyRecord`).

The audit checkpoints (`core/audit_anchor.py`) and the API's session cookies are signed
with HMAC-SHA256 keys that every server of one database must share: a checkpoint one
server writes is verified by the other, and a cookie one issues is accepted by the other.
A key is made once, in a write session (the writers' lock serialises its check-then-insert
across processes, and the primary key refuses a second row besides), and never changes.

An install older than the table kept its key in a file of its home; the first use moves
that file's key into the store (the file is left where it is and no longer read), so
existing checkpoints and cookies keep verifying.

The trade-off, said once: a key in the database protects the audit checkpoint from someone
who can rewrite the database or the artifact store, not from someone who can rewrite both.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from forgeml.core.store import Store

KEY_BYTES = 32
AUDIT_KEY = "audit"
SESSION_KEY = "session"


def install_key(
    store: Store, name: str, legacy_file: Path | None = None, *, create: bool = True
) -> bytes | None:
    """The key `name` of the store's install: the stored one, else `legacy_file`'s (moved
    into the store), else a new random one; None when none exists and `create` is False.

    Raises:
        ConfigError: `legacy_file` or the stored row is not 64 hex digits.
    """
    from forgeml.core.store import InstallKeyRecord

    with store.session(write=False) as session:
        found = session.get(InstallKeyRecord, name)
        if found is not None:
            return _decoded(found.value, f"The stored {name} key")
    legacy = _read_legacy(legacy_file)
    if legacy is None and not create:
        return None
    with store.session(write=True) as session:
        found = session.get(InstallKeyRecord, name)  # another process may have made it
        if found is None:
            value, origin = legacy or (secrets.token_hex(KEY_BYTES), "generated")
            found = InstallKeyRecord(name=name, value=value, origin=origin)
            session.add(found)
        return _decoded(found.value, f"The stored {name} key")


def _read_legacy(path: Path | None) -> tuple[str, str] | None:
    if path is None or not path.is_file():
        return None
    value = path.read_text().strip()
    _decoded(value, f"The key file {path}")
    return value, str(path)


def _decoded(value: str, what: str) -> bytes:
    try:
        key = bytes.fromhex(value)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"{what} is not {2 * KEY_BYTES} hex digits: restore it, or delete it to make a new key."
        )
    return key
