"""Identifiers, names, digests and object references (`NAME`, `NAME@vN`, `NAME@<digest>`)."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from forgeml.core.errors import InvalidNameError, UsageError

# the grammars of names and references, also published in the API's OpenAPI document
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
# NAME, NAME@vN, NAME@<digest prefix>, NAME@ALIAS
REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(@[A-Za-z0-9_-]+)?$"
_NAME = re.compile(NAME_PATTERN)
_VERSION = re.compile(r"^v(\d+)$")
_DIGEST = re.compile(r"^[0-9a-f]{4,64}$")
_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")


def new_id() -> str:
    """A fresh random identifier (32 hex characters)."""
    return uuid.uuid4().hex


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(payload: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys) for hashing and storage."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def json_digest(payload: Any) -> str:
    """sha256 of the canonical JSON of `payload`."""
    return sha256_bytes(canonical_json(payload))


def validate_name(name: str, kind: str = "name") -> str:
    """Return `name` if it is a plain identifier, else raise `InvalidNameError`.

    Names become file and table identifiers, so path separators, `..` and leading dots
    are refused, and with them everything a path or URL decoder could turn into one
    (`%2e`, `#`, `;`, NUL, a drive letter's `:`); `fullmatch`, because `$` would let a
    trailing newline through.
    """
    if ".." in name or "/" in name or "\\" in name or not _NAME.fullmatch(name):
        # repr: a newline or NUL in a hostile name must not split the sentence or a log line
        shown = repr(name if len(name) <= 130 else name[:128] + "...")
        raise InvalidNameError(
            f"Invalid {kind} {shown}: use letters, digits, '.', '_' or '-' "
            "(start with a letter or digit, no '/' or '..', at most 128 characters)."
        )
    return name


def validate_alias(alias: str, max_length: int = 128) -> str:
    """Return `alias` if it can name a version (`NAME@ALIAS`), else raise `UsageError`.

    `latest` and `vN` are refused: they already name versions, so an alias called so
    would be shadowed.
    """
    if (
        not _ALIAS.fullmatch(alias)
        or len(alias) > max_length
        or _VERSION.fullmatch(alias)
        or alias.lower() == "latest"
    ):
        raise UsageError(
            f"Invalid alias '{alias}': use letters, digits, '_' or '-', "
            "and not 'latest' or v<number> (those already name versions)."
        )
    return alias


@dataclass(frozen=True)
class Ref:
    """A parsed reference: `name`, optionally pinned by version number or digest prefix."""

    name: str
    version: int | None = None
    digest_prefix: str | None = None

    def __str__(self) -> str:
        if self.version is not None:
            return f"{self.name}@v{self.version}"
        if self.digest_prefix is not None:
            return f"{self.name}@{self.digest_prefix}"
        return self.name


def parse_ref(text: str, kind: str = "reference") -> Ref:
    """Parse `NAME`, `NAME@vN` or `NAME@<hex digest prefix, 4+ chars>`."""
    name, sep, selector = text.partition("@")
    validate_name(name, kind)
    if not sep:
        return Ref(name)
    if match := _VERSION.fullmatch(selector):
        return Ref(name, version=int(match.group(1)))
    if _DIGEST.fullmatch(selector):
        return Ref(name, digest_prefix=selector)
    raise UsageError(
        f"Invalid {kind} '{text}': after '@' give vN (a version number) "
        "or at least 4 hex characters of a digest."
    )
