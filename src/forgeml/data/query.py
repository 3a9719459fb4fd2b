"""Read-only SQL over dataset versions with DuckDB.

Every dataset is a table under its name (its latest version); a pinned version is a
quoted identifier: `SELECT count(*) FROM "adult@v2"`. A query reads the datasets of its
workspace's project only (FORGEML_PROJECT, or an API request's project). Datasets are
handed to DuckDB as Arrow datasets, and DuckDB's own file access is switched off and
locked, so a query can neither write nor read files outside the store.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pa_dataset
from sqlalchemy import select

from forgeml.core.errors import (
    InvalidNameError,
    NotFoundError,
    QueryError,
    QueryNotAllowedError,
    UsageError,
)
from forgeml.core.store import Dataset
from forgeml.core.workspace import Workspace
from forgeml.data import catalog

_EXPLAIN_PREFIX = re.compile(r"^\s*EXPLAIN(\s+ANALYZE)?\s+", re.IGNORECASE)
_READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN")


def run_query(
    workspace: Workspace, sql: str, limit: int | None = None, timeout_s: float | None = None
) -> pa.Table:
    """Run one read-only SQL statement over the store's datasets.

    Args:
        workspace: the store whose datasets are visible.
        sql: a single SELECT (or EXPLAIN) statement.
        limit: cap on returned rows, applied after the query.
        timeout_s: seconds the statement may run before it is interrupted (default: no limit).

    Raises:
        QueryNotAllowedError: the statement writes, touches files or settings, or names a
            dataset of another project than the workspace's.
        QueryError: the SQL does not parse, fails to run, or runs past `timeout_s`.
        UsageError: more than one statement.
    """
    import duckdb

    connection = duckdb.connect(":memory:")
    # DuckDB has no statement timeout; interrupt() from another thread stops a running one
    timer = threading.Timer(timeout_s, connection.interrupt) if timeout_s is not None else None
    try:
        _check_read_only(connection, sql)
        _register_datasets(workspace, connection, sql)
        connection.execute("SET enable_external_access = false")
        connection.execute("SET lock_configuration = true")
        try:
            if timer is not None:
                timer.daemon = True
                timer.start()
            relation = connection.sql(sql)
            table = relation.to_arrow_table() if relation is not None else pa.table({})
        except duckdb.InterruptException:
            raise QueryError(f"Query ran past its {timeout_s:.3g} s time limit; stopped.") from None
        except duckdb.PermissionException as error:
            raise QueryNotAllowedError(
                f"data query may only read the store's datasets: {_first_line(error)}"
            ) from None
        except duckdb.Error as error:
            raise QueryError(f"Query failed: {_first_line(error)}") from None
    finally:
        if timer is not None:
            timer.cancel()
        connection.close()
    return table.slice(0, limit) if limit is not None else table


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


def _check_read_only(connection: Any, sql: str) -> None:
    import duckdb

    try:
        statements = connection.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(f"Query does not parse: {_first_line(error)}") from None
    if len(statements) != 1:
        raise UsageError(f"data query runs one statement; got {len(statements)}.")
    kind = statements[0].type.name
    if kind not in _READ_ONLY_STATEMENTS:
        raise QueryNotAllowedError(
            f"data query is read-only: {kind} statements are not allowed; use SELECT."
        )


def _refuse_other_project(session: Any, name: str, project: str) -> None:
    """QueryNotAllowedError when table `name` (`NAME` or `NAME@...`) is a dataset of a
    project other than `project`."""
    dataset = name.partition("@")[0]
    found = session.scalar(select(Dataset.project).where(Dataset.name == dataset))
    if found is not None and found != project:
        raise QueryNotAllowedError(
            f"data query reads the datasets of the project '{project}' only; '{dataset}' "
            f"belongs to the project '{found}'."
        )


def _table_names(connection: Any, sql: str) -> set[str]:
    """Names of the base tables the statement reads, from DuckDB's parse tree (no binding)."""
    import orjson

    # only a SELECT serialises, so look through EXPLAIN [ANALYZE] at the query it explains
    select_sql = _EXPLAIN_PREFIX.sub("", sql, count=1)
    tree = orjson.loads(
        connection.execute("SELECT json_serialize_sql(?)", [select_sql]).fetchall()[0][0]
    )
    names: set[str] = set()
    pending: list[Any] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                names.add(node["table_name"])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return names


def _register_datasets(workspace: Workspace, connection: Any, sql: str) -> None:
    """Hand DuckDB the datasets the statement names (and only those: each read is verified),
    refusing one of another project than the workspace's."""
    versions = {}
    names = _table_names(connection, sql)
    with workspace.store.session() as session:
        for name in sorted(names):
            _refuse_other_project(session, name, workspace.project)
            if "@" in name:  # a pinned reference must resolve
                versions[name] = catalog.resolve(session, name)
                continue
            try:
                versions[name] = catalog.resolve(session, name)
            except (NotFoundError, InvalidNameError):
                continue  # not a dataset: DuckDB reports the unknown table itself
    for name, version in versions.items():
        path = catalog.parquet_path(workspace, version)
        connection.register(name, pa_dataset.dataset(str(path), format="parquet"))
