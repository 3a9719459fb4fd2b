"""Seeding for benchmarks/control_plane.py: N finished runs, 50 params and 50 metrics each.

The rows are written straight into the tables (MLflow's `runs`, `params`, `metrics`,
`latest_metrics`, and forgeml's `runs`), in one transaction per table chunk: one HTTP call
or one `log_batch` per run would take hours at 100k runs, and both servers read the rows
the same way whichever way they were written. PostgreSQL gets them through COPY, SQLite
through executemany. A fresh PostgreSQL database is made per run and dropped after.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PARAMS = 50
METRICS = 50
RUNS_PER_NAME = 1_000  # run names repeat (`sweep-<i % (count // RUNS_PER_NAME)>`)
MODELS = 4  # params.model takes MODELS values, so its equality keeps 1 run in 4
_CHUNK = 2_000  # runs per transaction
_START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SeededRun:
    """What both stores hold of one run."""

    run_id: str
    name: str
    status: str
    started: datetime
    params: dict[str, str]
    metrics: dict[str, float]


def make_runs(count: int, seed: int = 0) -> Iterator[SeededRun]:
    """`count` runs, one second apart, 90% FINISHED (of each name too), `accuracy` uniform
    in [0, 1), about RUNS_PER_NAME to a name."""
    rng = random.Random(seed)
    names = max(1, count // RUNS_PER_NAME)
    for i in range(count):
        params = {"model": f"mlp{i % MODELS}", "lr": f"{rng.random():.6f}"}
        params |= {f"p{k:02d}": f"value-{rng.randrange(1000)}" for k in range(PARAMS - 2)}
        metrics = {"accuracy": rng.random()}
        metrics |= {f"m{k:02d}": rng.random() for k in range(METRICS - 1)}
        yield SeededRun(
            run_id=uuid.UUID(int=rng.getrandbits(128)).hex,
            name=f"sweep-{i % names}",
            # every tenth run of each name failed (not `i % 10`: it aligns with the names)
            status="FINISHED" if (i // names) % 10 else "FAILED",
            started=_START + timedelta(seconds=i),
            params=params,
            metrics=metrics,
        )


def _chunks(runs: Iterator[SeededRun]) -> Iterator[list[SeededRun]]:
    chunk: list[SeededRun] = []
    for run in runs:
        chunk.append(run)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _mlflow_rows(chunk: Sequence[SeededRun], experiment_id: str) -> dict[str, list[tuple]]:
    rows: dict[str, list[tuple]] = {"runs": [], "params": [], "metrics": [], "latest_metrics": []}
    for run in chunk:
        ms = int(run.started.timestamp() * 1000)
        rows["runs"].append(
            (run.run_id, run.name, "LOCAL", "", "", "bench", run.status, ms, ms + 60_000,
             "", "active", f"file:///nowhere/{run.run_id}", int(experiment_id))
        )  # fmt: skip
        rows["params"] += [(key, value, run.run_id) for key, value in run.params.items()]
        for key, value in run.metrics.items():
            rows["metrics"].append((key, value, ms, run.run_id, 0, False))
            rows["latest_metrics"].append((key, value, ms, 0, False, run.run_id))
    return rows


_COLUMNS = {
    "runs": "run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
    "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id",
    "params": "key, value, run_uuid",
    "metrics": "key, value, timestamp, run_uuid, step, is_nan",
    "latest_metrics": "key, value, timestamp, step, is_nan, run_uuid",
}


def _write(raw: Any, postgres: bool, table: str, rows: list[tuple]) -> None:
    cursor = raw.cursor()
    if postgres:
        with cursor.copy(f"COPY {table} ({_COLUMNS[table]}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join("?" * len(rows[0]))
        cursor.executemany(f"INSERT INTO {table} ({_COLUMNS[table]}) VALUES ({marks})", rows)
    cursor.close()


def _forgeml_rows(chunk: Sequence[SeededRun]) -> list[dict[str, Any]]:
    return [
        {
            "id": run.run_id,
            "name": run.name,
            "experiment": "bench",
            "status": run.status,
            "config": run.params,
            "started_at": run.started,
            "heartbeat_at": run.started,
            "ended_at": run.started + timedelta(minutes=1),
            "lease_seconds": 30,
            "pid": 1,
            "host": "bench",
            "metrics": run.metrics,
            "created_by": "bench",
        }
        for run in chunk
    ]


def seed(
    forgeml_url: str,
    mlflow_url: str,
    experiment_id: str,
    count: int,
    mlflow_count: int | None = None,
) -> None:
    """Write `count` runs into forgeml's store and the first `mlflow_count` of them (all
    by default) into MLflow's (whose schemas exist already)."""
    from forgeml.core.store import RunRecord

    postgres = mlflow_url.startswith("postgresql")
    mlflow_engine, forgeml_engine = create_engine(mlflow_url), create_engine(forgeml_url)
    left = count if mlflow_count is None else mlflow_count
    try:
        for chunk in _chunks(make_runs(count)):
            if left > 0:
                raw = mlflow_engine.raw_connection()
                try:
                    for table, rows in _mlflow_rows(chunk[:left], experiment_id).items():
                        _write(raw, postgres, table, rows)
                    raw.commit()
                finally:
                    raw.close()
                left -= len(chunk)
            with forgeml_engine.begin() as connection:
                connection.execute(RunRecord.__table__.insert(), _forgeml_rows(chunk))
        if postgres:  # fresh statistics, as autovacuum would give a store that grew slowly
            for engine in (mlflow_engine, forgeml_engine):
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.execute(text("ANALYZE"))
    finally:
        mlflow_engine.dispose()
        forgeml_engine.dispose()


@contextlib.contextmanager
def fresh_databases(admin_url: str, names: Sequence[str]) -> Iterator[list[str]]:
    """New PostgreSQL databases next to `admin_url`'s, one per name, dropped afterwards;
    yields their URLs."""
    suffix = secrets.token_hex(4)
    wanted = [f"cpbench_{name}_{suffix}" for name in names]
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            for database in wanted:
                connection.execute(text(f'CREATE DATABASE "{database}"'))
        base = make_url(admin_url)
        yield [base.set(database=database).render_as_string(False) for database in wanted]
    finally:
        with admin.connect() as connection:
            for database in wanted:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        admin.dispose()
