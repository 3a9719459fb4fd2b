"""Databases by SQLAlchemy URL (`postgresql+psycopg://`, `mysql+pymysql://`): a table or
one SELECT, read in a read-only session and streamed in chunks into a raw Parquet file.

Two guards keep a source read-only: the statement must parse as one SELECT (sqlparse), and
the session itself is read-only (PostgreSQL's `default_transaction_read_only`, MySQL's
`SET SESSION TRANSACTION READ ONLY`), so a data-modifying CTE or `SELECT ... INTO` that
passes the first is refused by the server. Rows come through a server-side cursor
(`stream_results`), one chunk at a time, so memory stays bounded whatever the table's size.
The password is used to connect and never recorded: the recipe holds the URL with `***`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from forgeml.core.errors import NotFoundError, QueryNotAllowedError, SourceError, UsageError
from forgeml.data.sources.base import Fetched, SourceOptions, refuse_options

_BACKENDS = ("postgresql", "mysql", "mariadb")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?")
_WEB_OPTIONS = ("json_path", "next", "cursor", "allow_private")


def redact_url(url: str) -> str:
    """`url` with its password replaced by `***` (as SQLAlchemy prints it)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("://", 1)[0] + "://***"


def _scrub(message: str, url: str) -> str:
    """The first line of a driver's message, the URL's password replaced by `***`."""
    from sqlalchemy.engine import make_url

    first = message.strip().splitlines()[0] if message.strip() else "no detail"
    try:
        password = make_url(url).password
    except Exception:
        return "the URL does not parse"
    return first.replace(str(password), "***") if password else first


class DatabaseSource:
    """A table or SELECT of a PostgreSQL or MySQL/MariaDB database."""

    kind = "database"

    def accepts(self, url: str) -> bool:
        scheme = url.split("://", 1)[0].lower()
        return scheme.split("+", 1)[0] in _BACKENDS

    def fetch(self, url: str, options: SourceOptions, workdir: Path) -> Fetched:
        refuse_options(self.kind, options, _WEB_OPTIONS)
        described = _describe(options)
        engine = _engine(url)
        raw = workdir / "rows.parquet"
        try:
            rows = _stream_to_parquet(engine, url, options, raw)
        finally:
            engine.dispose()
        if rows == 0:
            raise SourceError(f"The {described} on {redact_url(url)} returned no rows.")
        params = {"table": options.table, "query": options.query, "rows": rows}
        return Fetched(raw=raw, format="parquet", live=True, params=params)

    def recorded_url(self, url: str) -> str:
        return redact_url(url)

    def readable(self, fetched: Fetched, workdir: Path) -> Path:
        return fetched.raw


def _describe(options: SourceOptions) -> str:
    """How to name what is read in messages, once the options are checked."""
    if (options.table is None) == (options.query is None):
        raise UsageError("A database source needs exactly one of --table or --query.")
    if options.table is not None:
        if not _IDENTIFIER.fullmatch(options.table):
            raise UsageError(
                f"--table {options.table!r} is not a plain table name; give 'table' or "
                "'schema.table', or use --query."
            )
        return f"table {options.table}"
    _check_select(options.query or "")
    return "query"


def _check_select(sql: str) -> None:
    import sqlparse

    statements = [s for s in sqlparse.parse(sql) if str(s).strip().strip(";").strip()]
    if len(statements) != 1:
        raise QueryNotAllowedError(
            f"--query must be one SELECT statement, not {len(statements)}; run them one by one."
        )
    kind = statements[0].get_type()
    if kind != "SELECT":
        raise QueryNotAllowedError(
            f"--query must be a SELECT, and this is {kind.lower()}: sources are read-only."
        )
    # SELECT ... INTO writes a table (PostgreSQL) or a server-side file (MySQL's OUTFILE)
    if any(
        token.ttype in sqlparse.tokens.Keyword and token.normalized == "INTO"
        for token in statements[0].flatten()
    ):
        raise QueryNotAllowedError(
            "--query must not SELECT ... INTO a table, variable or file: sources are read-only."
        )


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
        backend = parsed.get_backend_name()
        read_only: dict[str, Any] = (
            {"options": "-c default_transaction_read_only=on"}
            if backend == "postgresql"
            else {"init_command": "SET SESSION TRANSACTION READ ONLY"}
        )
        return create_engine(parsed, connect_args=read_only, poolclass=_null_pool())
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        raise UsageError(
            f"Cannot use the database URL {redact_url(url)} ({_scrub(str(exc), url)}); "
            "write it as postgresql+psycopg://USER@HOST/DB or mysql+pymysql://USER@HOST/DB."
        ) from None


def _null_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


def _select_table(connection: Any, table: str) -> Any:
    from sqlalchemy import inspect, select, text
    from sqlalchemy import table as table_clause

    schema, _, name = table.rpartition(".")
    if not inspect(connection).has_table(name, schema=schema or None):
        raise NotFoundError(f"The table {table} does not exist in that database.")
    return select(text("*")).select_from(table_clause(name, schema=schema or None))


def _stream_to_parquet(engine: Any, url: str, options: SourceOptions, out: Path) -> int:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    try:
        connection = engine.connect()
    except DBAPIError as exc:
        raise SourceError(f"Cannot read {redact_url(url)}: {_scrub(str(exc.orig), url)}.") from None
    # never committed: whatever a statement might write is rolled back when it closes
    with connection:
        try:
            statement = (
                _select_table(connection, options.table)
                if options.table is not None
                else text(options.query or "")
            )
            result = connection.execution_options(
                stream_results=True, max_row_buffer=options.chunk_rows
            ).execute(statement)
            return _write_chunks(list(result.keys()), result.partitions(options.chunk_rows), out)
        except DBAPIError as exc:
            detail = _scrub(str(exc.orig), url)
            if "read-only" in detail.lower() or "read only" in detail.lower():
                raise QueryNotAllowedError(
                    f"The query tried to write ({detail}); sources are read-only."
                ) from None
            raise SourceError(f"The database refused the query: {detail}.") from None


def _write_chunks(names: list[str], chunks: Any, out: Path) -> int:
    """Write row chunks as Parquet parts, then one file in the schema they all widen to."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise UsageError(
            f"The query returns the column '{duplicate}' more than once; give each an alias."
        )
    parts: list[Path] = []
    for chunk in chunks:
        columns = list(zip(*chunk, strict=True)) if chunk else []
        try:
            arrays = [pa.array(list(values)) for values in columns]
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SourceError(
                f"A column holds values of mixed or unsupported types ({exc}); cast it in --query."
            ) from None
        part = out.with_name(f"part-{len(parts):06d}.parquet")
        pq.write_table(pa.Table.from_arrays(arrays, names=names), part)
        parts.append(part)
    if not parts:
        return 0
    schema = pa.unify_schemas(
        [pq.read_schema(part) for part in parts], promote_options="permissive"
    )
    rows = 0
    with pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            table = pq.read_table(part).cast(schema)
            writer.write_table(table)
            rows += table.num_rows
            part.unlink()
    return rows
