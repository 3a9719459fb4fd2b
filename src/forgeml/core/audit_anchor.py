"""Signed checkpoints of the audit chain's head, kept outside its table.

The hash chain (`core/audit.py`) shows an edited or removed event, but not the removal of
the newest ones: a shorter chain still verifies. So the head (its seq and hash) is
checkpointed into the artifact store (`audit/checkpoint.json`), signed with HMAC-SHA256
(RFC 2104) under the install's `audit` key, kept in the metadata store so that every
server of one database signs alike (`core/install_keys.py`; an older install's
FORGEML_HOME/`audit.key` is moved there on first use): every `CHECKPOINT_EVERY` events,
once their transaction committed, and at each `audit verify`.
Someone who can rewrite the database but not the artifact store cannot move the checkpoint
back (the key being in the database, rewriting both is not caught), so
`verify` reports a tail that went missing, a tail that was replaced, and a checkpoint that
was rewritten or deleted (the key exists, so a checkpoint was written).

A checkpoint only moves forward; two writers racing can leave the older of two heads,
which is still true, never a head that was not committed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from forgeml.core.errors import AuditChainBrokenError
from forgeml.core.ids import canonical_json
from forgeml.core.install_keys import AUDIT_KEY, install_key

if TYPE_CHECKING:
    from forgeml.core.store import Store

CHECKPOINT_EVERY = 100
KEY_FILE = "audit.key"
CHECKPOINT_KEY = "audit/checkpoint.json"


@dataclass(frozen=True)
class Checkpoint:
    """The chain's head at one moment: `seq` events, the last one hashing to `hash`."""

    seq: int
    hash: str
    at: str


class AuditAnchor:
    """Reads and writes the signed checkpoint of one install (its key and artifact store)."""

    def __init__(self, home: Path, fs: Any, root: str, store: Store) -> None:
        self.legacy_key_path = Path(home) / KEY_FILE  # where installs before 0018 kept it
        self.fs, self.path = fs, f"{root}/{CHECKPOINT_KEY}"
        self.store = store
        self._known: bytes | None = None  # a key never changes once made

    def _key(self, create: bool) -> bytes | None:
        if self._known is None:
            self._known = install_key(self.store, AUDIT_KEY, self.legacy_key_path, create=create)
        return self._known

    @staticmethod
    def _mac(key: bytes, body: dict[str, Any]) -> str:
        return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()

    def read(self) -> Checkpoint | None:
        """The checkpoint, its signature checked; None before the first one was written.

        Raises:
            AuditChainBrokenError: the checkpoint was deleted, or rewritten (its signature
                does not verify under this install's key).
        """
        key = self._key(create=False)
        if key is None:
            return None
        try:
            stored = orjson.loads(self.fs.cat_file(self.path))
        except FileNotFoundError:
            raise AuditChainBrokenError(
                f"The audit checkpoint {self.path} was deleted (this install has written one).",
                0,
            ) from None
        except orjson.JSONDecodeError:
            stored = {}
        body = {name: stored.get(name) for name in ("seq", "hash", "at")}
        if not isinstance(stored.get("mac"), str) or not hmac.compare_digest(
            stored["mac"], self._mac(key, body)
        ):
            raise AuditChainBrokenError(
                f"The audit checkpoint {self.path} was rewritten: its signature does not "
                "verify under this install's key.",
                0,
            )
        return Checkpoint(seq=int(body["seq"]), hash=str(body["hash"]), at=str(body["at"]))

    def write(self, seq: int, head: str, at: datetime | None = None) -> None:
        """Checkpoint the head `seq`/`head`, unless the stored checkpoint is already as new."""
        if seq <= 0:
            return
        key = self._key(create=True)
        assert key is not None  # created above
        try:
            current = self.read()
        except AuditChainBrokenError:
            current = None  # verify reports it; a new checkpoint must not wait on that
        if current is not None and current.seq >= seq:
            return
        moment = (at or datetime.now(UTC)).astimezone(UTC).isoformat()
        body = {"seq": seq, "hash": head, "at": moment}
        data = orjson.dumps({**body, "mac": self._mac(key, body)})
        self.fs.makedirs(self.path.rsplit("/", 1)[0], exist_ok=True)
        temp = f"{self.path}.{os.getpid()}.tmp"
        self.fs.pipe_file(temp, data)
        self.fs.mv(temp, self.path)  # a rename on a local store: readers see old or new


def check_against(checkpoint: Checkpoint, events: int, hash_at: str | None) -> None:
    """Raise unless a chain of `events` events, whose event `checkpoint.seq` hashes to
    `hash_at`, still holds what `checkpoint` recorded.

    Raises:
        AuditChainBrokenError: the newest events are missing, or were replaced.
    """
    if events < checkpoint.seq:
        missing = (
            f"event {checkpoint.seq} is"
            if events + 1 == checkpoint.seq
            else f"events {events + 1} to {checkpoint.seq} are"
        )
        raise AuditChainBrokenError(
            f"Audit log truncated: {missing} missing (the signed checkpoint of "
            f"{checkpoint.at} records {checkpoint.seq} events; the log ends at {events}).",
            events + 1,
        )
    if hash_at != checkpoint.hash:
        raise AuditChainBrokenError(
            f"Audit log broken at event {checkpoint.seq}: it differs from the signed "
            f"checkpoint of {checkpoint.at} (the events up to it were replaced).",
            checkpoint.seq,
        )
