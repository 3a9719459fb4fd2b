"""The contract of a data source: fetch a URL into a local raw file that `ingest` reads.

A source is one object per kind of URL (a database, an object store, a web API, a crawl).
`fetch` writes what it read into a working folder and says whether the source is *live*
(a table or a web page can change under the same URL): the raw bytes of a live source are
kept in the artifact store, so `data rebuild` replays the version from them instead of
asking the source again. A source that is not live (an object in a bucket) is re-read on
rebuild and its digest compared, as a local file is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forgeml.core.errors import UsageError

MiB = 1024 * 1024
_SECRET_PARAM = re.compile(r"key|token|secret|passw|signature|^sig$|credential|auth", re.I)


class SourceOptions(BaseModel):
    """How to read a source URL; each source takes the fields that apply to it."""

    model_config = ConfigDict(extra="forbid")

    table: str | None = Field(
        None, description="Database table to read whole ('schema.table' or 'table')."
    )
    query: str | None = Field(
        None, description="One read-only SELECT to run instead of reading a whole table."
    )
    chunk_rows: int = Field(
        10_000, ge=1, description="Rows fetched from a database per round trip."
    )
    json_path: str | None = Field(
        None,
        description="Dotted path to the list of records in each JSON answer (e.g. "
        "'data.items'); the answer itself when it is a list.",
    )
    next: str | None = Field(
        None,
        description="Dotted path to the next page's URL in each JSON answer (e.g. "
        "'links.next'); pages end when it is missing or null.",
    )
    cursor: str | None = Field(
        None,
        description="Cursor pagination as PARAM=PATH: send the value at dotted PATH of each "
        "answer as query parameter PARAM of the next request (e.g. 'after=meta.cursor').",
    )
    max_pages: int = Field(
        1000, ge=1, description="At most this many pages of a JSON API, or of a crawl."
    )
    same_host: bool = Field(
        True, description="A crawl follows links to the start URL's host (and port) only."
    )
    rate: float = Field(
        1.0,
        ge=0,
        description="A crawl waits this many seconds between requests to one host (longer "
        "when its robots.txt asks with Crawl-delay).",
    )
    allow_private: bool = Field(
        False,
        description="Allow private, loopback and link-local addresses (refused by default: "
        "the SSRF guard).",
    )
    timeout: float = Field(30.0, gt=0, description="Seconds to wait for each HTTP answer.")
    retries: int = Field(
        3, ge=0, description="Retries of an HTTP request after a network error, 429 or 5xx."
    )
    max_bytes: int = Field(
        512 * MiB, ge=1, description="Refuse a web source larger than this many bytes in all."
    )

    @field_validator("cursor")
    @classmethod
    def _cursor_shape(cls, value: str | None) -> str | None:
        if value is not None and not all(part.strip() for part in value.partition("=")[::2]):
            raise ValueError("give the cursor as PARAM=PATH, e.g. 'after=meta.cursor'")
        return value


@dataclass
class Fetched:
    """What a source read.

    Attributes:
        raw: the local file (or folder) holding the bytes read.
        format: the ingest format of the file `readable` returns ('auto' to detect it).
        live: the source may answer differently later: keep `raw` for rebuilds.
        params: what the recipe records to describe (and, when not live, re-read) the
            source; never a secret.
    """

    raw: Path
    format: str
    live: bool
    params: dict[str, Any] = field(default_factory=dict)


class Source(Protocol):
    """One kind of source URL."""

    kind: str

    def accepts(self, url: str) -> bool:
        """Whether `url` is one this source reads."""
        ...

    def fetch(self, url: str, options: SourceOptions, workdir: Path) -> Fetched:
        """Read `url` into `workdir`.

        Raises:
            SourceError: the source cannot be reached or refuses the request.
            UsageError: options that do not apply to this source, or are missing.
        """
        ...

    def readable(self, fetched: Fetched, workdir: Path) -> Path:
        """The file `ingest` reads from the raw bytes (usually `fetched.raw` itself)."""
        ...

    def recorded_url(self, url: str) -> str:
        """`url` as the recipe records it and messages show it: no password, token or key."""
        ...


def redact_secrets(url: str) -> str:
    """`url` with the password of its user part and the values of query parameters that
    look secret (`api_key`, `token`, `X-Amz-Signature`, ...) replaced by `***`."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}" if ":" in user else netloc
    query = "&".join(
        f"{name}=***" if _SECRET_PARAM.search(name) else f"{name}={value}" if sep else name
        for name, sep, value in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def refuse_options(kind: str, options: SourceOptions, names: tuple[str, ...]) -> None:
    """Raise UsageError when an option that does not apply to `kind` was set."""
    for name in names:
        if getattr(options, name) not in (None, False):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} does not apply to {kind} sources; leave it out.")


def dotted(document: Any, path: str | None) -> Any:
    """The value at dotted `path` in a JSON document (the document itself for None)."""
    value = document
    for key in (path or "").split(".") if path else []:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value
