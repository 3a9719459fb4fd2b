"""Read-only scopes: inside `reading()`, every `Store.session()` is a read session.

Kept out of `forgeml.core.store` so the CLI can open a scope without importing SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_reading: ContextVar[bool] = ContextVar("forgeml_store_reading", default=False)


@contextmanager
def reading() -> Iterator[None]:
    """Within this block (this thread or task, and threads it hands work to with its
    context), `Store.session()` opens read sessions: no writers' lock, writes refused."""
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


def is_reading() -> bool:
    """Whether the caller is inside `reading()`."""
    return _reading.get()
