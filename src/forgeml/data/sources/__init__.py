"""Data sources by URL: databases, object stores, web files and JSON APIs, a crawler.

`source_for(url)` picks the source that reads a `data add` URL, in registration order
(databases by their SQLAlchemy scheme, then web URLs, then any fsspec URL);
`get_source(kind)` names one (`crawl` is reached only this way). `register_source` adds
one. Each is imported only when a URL asks for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from forgeml.core.errors import UsageError
from forgeml.data.sources.base import Fetched, Source, SourceOptions

SourceFactory = Callable[[], Source]
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _database() -> Source:
    from forgeml.data.sources.database import DatabaseSource

    return DatabaseSource()


def _web() -> Source:
    from forgeml.data.sources.web import WebSource

    return WebSource()


def _object_store() -> Source:
    from forgeml.data.sources.objectstore import ObjectStoreSource

    return ObjectStoreSource()


def _crawl() -> Source:
    from forgeml.data.sources.crawler import CrawlSource

    return CrawlSource()


_REGISTRY: dict[str, SourceFactory] = {
    "database": _database,
    "web": _web,
    "object store": _object_store,
    "crawl": _crawl,
}


def register_source(kind: str, factory: SourceFactory) -> None:
    """Make `get_source(kind)` build sources with `factory()`; `source_for` tries it last."""
    _REGISTRY[kind] = factory


def source_kinds() -> list[str]:
    """The registered source kinds."""
    return list(_REGISTRY)


def is_url(text: str) -> bool:
    """Whether `text` is a URL (`scheme://...`) rather than a local path."""
    return bool(_URL.match(text))


def get_source(kind: str) -> Source:
    """The source registered as `kind`.

    Raises:
        UsageError: no source of that kind.
    """
    factory = _REGISTRY.get(kind)
    if factory is None:
        raise UsageError(f"Unknown source kind '{kind}': use one of {', '.join(_REGISTRY)}.")
    return factory()


def source_for(url: str) -> Source:
    """The first registered source that reads `url`.

    Raises:
        UsageError: no source reads URLs of that scheme.
    """
    for factory in _REGISTRY.values():
        source = factory()
        if source.accepts(url):
            return source
    scheme = url.split("://", 1)[0]
    raise UsageError(
        f"No source reads {scheme}:// URLs: use a database URL (postgresql+psycopg://, "
        "mysql+pymysql://), http(s)://, or an fsspec URL such as s3://bucket/key."
    )


__all__ = [
    "Fetched",
    "Source",
    "SourceFactory",
    "SourceOptions",
    "get_source",
    "is_url",
    "register_source",
    "source_for",
    "source_kinds",
]
