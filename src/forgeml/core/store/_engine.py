"""Engines and sessions: SQLite (WAL, foreign keys, busy timeout) or PostgreSQL by URL.

A write session serialises writers (SQLite `BEGIN IMMEDIATE`, a PostgreSQL advisory
lock) so read-then-write sequences (the next version number, the audit chain's head)
cannot interleave between processes. A read session takes no such lock: a deferred
`BEGIN` under WAL on SQLite (readers never wait for the writer), a `REPEATABLE READ
READ ONLY` transaction on PostgreSQL; both refuse writes, so a read session can never
slip a write past the writers' lock. Inside `reading()` (the API's GET routes, the
CLI's list and show commands) every `Store.session()` is a read session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from forgeml.core.errors import ForgemlError
from forgeml.core.reading import is_reading
from forgeml.core.store._json import json_loads

# Bumped with every new migration in core/migrations/versions.
HEAD_REVISION = "0024"
# Any constant works: it only has to be the same for every forgeml process.
_PG_WRITE_LOCK = 0x666F72676D6C
# the execution option that marks a read session's connection (see `_on_begin`)
_READ_ONLY = "forgeml_read_only"


class StoreUnavailableError(ForgemlError):
    """The metadata database cannot be opened."""

    http_status = 503


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook issue BEGIN itself (pysqlite's own is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(_READ_ONLY):
            # deferred: a WAL reader sees the last commit and never waits for the writer
            connection.exec_driver_sql("BEGIN")
            connection.exec_driver_sql("PRAGMA query_only=ON")
            return
        # IMMEDIATE takes the write lock up front, so read-then-write sequences
        # (next version number, audit chain head) cannot interleave between processes.
        connection.exec_driver_sql("PRAGMA query_only=OFF")
        connection.exec_driver_sql("BEGIN IMMEDIATE")


@dataclass
class Store:
    """An opened metadata store."""

    engine: Engine
    sessions: sessionmaker[Session]
    read_sessions: sessionmaker[Session] = field(init=False)

    def __post_init__(self) -> None:
        options: dict[str, Any] = {_READ_ONLY: True}
        if not self.is_sqlite:
            # one snapshot for every query of the session (a page and its cursor agree)
            options |= {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
        self.read_sessions = sessionmaker(
            self.engine.execution_options(**options), expire_on_commit=False
        )

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def session(self, *, write: bool | None = None) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error.

        Args:
            write: True: a write session (the writers' lock); False: a read session (no
                lock, writes refused); None: a read session inside `reading()`, else a
                write session.
        """
        if write is False or (write is None and is_reading()):
            with self.read_sessions.begin() as session:
                yield session
            return
        with self.sessions.begin() as session:
            if not self.is_sqlite:
                # serialise writers on PostgreSQL the way BEGIN IMMEDIATE does on SQLite
                session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_WRITE_LOCK})
            yield session

    def read_session(self) -> AbstractContextManager[Session]:
        """A read session: no writers' lock, writes refused (`session(write=False)`)."""
        return self.session(write=False)

    def dispose(self) -> None:
        self.engine.dispose()


def _current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as connection:
            row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
            connection.rollback()
    except (OperationalError, ProgrammingError):
        return None
    return row[0] if row else None


def upgrade(engine: Engine) -> None:
    """Run Alembic migrations up to head on `engine`."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parents[1] / "migrations"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def open_store(url: str, *, migrate: bool = True) -> Store:
    """Open the store at `url`, creating/migrating its tables when needed.

    Raises:
        StoreUnavailableError: the database cannot be reached or created.
    """
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, pool_pre_ping=not url.startswith("sqlite"), json_deserializer=json_loads
    )
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    try:
        if migrate and _current_revision(engine) != HEAD_REVISION:
            upgrade(engine)
    except OperationalError as error:
        engine.dispose()
        raise StoreUnavailableError(
            f"Cannot open the metadata store at {engine.url.render_as_string()}: {error.orig}."
        ) from None
    return Store(engine, sessionmaker(engine, expire_on_commit=False))
