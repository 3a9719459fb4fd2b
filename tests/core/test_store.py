from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text

from forgeml.core.store import AuditEvent, open_store
from forgeml.core.store import _engine as store_module
from forgeml.core.store._engine import HEAD_REVISION, StoreUnavailableError


def test_migrations_create_every_table(backend_url: str) -> None:
    store = open_store(backend_url)
    tables = set(inspect(store.engine).get_table_names())
    assert {"datasets", "dataset_versions", "dataset_lineage", "feature_specs"} <= tables
    assert {"audit_events", "alembic_version"} <= tables
    assert {"pipeline_runs", "pipeline_step_runs", "pipeline_cache"} <= tables
    assert {"pipeline_triggers", "pipeline_firings"} <= tables
    with store.engine.connect() as connection:
        assert connection.scalar(text("SELECT version_num FROM alembic_version")) == HEAD_REVISION
    store.dispose()


def test_reopening_is_idempotent(backend_url: str) -> None:
    open_store(backend_url).dispose()
    store = open_store(backend_url)
    with store.session() as session:
        assert session.scalars(select(AuditEvent)).all() == []
    store.dispose()


def _store_at(backend_url: str, revision: str) -> list[str]:
    """Create the store at `revision` (not head); its tables."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    if backend_url.startswith("sqlite:///"):
        Path(backend_url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    engine = create_engine(backend_url)
    config = Config()
    config.set_main_option(
        "script_location", str(Path(store_module.__file__).parents[1] / "migrations")
    )
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    tables = inspect(engine).get_table_names()
    engine.dispose()
    return tables


def test_a_store_at_the_previous_revision_is_migrated_to_head(backend_url: str) -> None:
    assert "pipeline_runs" not in _store_at(backend_url, "0004")

    store = open_store(backend_url)

    assert "pipeline_cache" in inspect(store.engine).get_table_names()
    store.dispose()


def test_a_store_with_pipelines_gains_triggers_and_firings(backend_url: str) -> None:
    assert "pipeline_triggers" not in _store_at(backend_url, "0005")

    store = open_store(backend_url)

    tables = inspect(store.engine).get_table_names()
    assert {"pipeline_runs", "pipeline_triggers", "pipeline_firings"} <= set(tables)
    unique = inspect(store.engine).get_unique_constraints("pipeline_firings")
    assert [sorted(constraint["column_names"]) for constraint in unique] == [
        ["event", "trigger_id"]
    ]
    store.dispose()


def test_a_store_with_triggers_gains_the_feedback_table(backend_url: str) -> None:
    assert "feedback" not in _store_at(backend_url, "0006")

    store = open_store(backend_url)

    assert "feedback" in inspect(store.engine).get_table_names()
    unique = inspect(store.engine).get_unique_constraints("feedback")
    assert [sorted(c["column_names"]) for c in unique] == [["model", "request_id", "row"]]
    store.dispose()


def test_a_store_with_prompts_gains_the_prompt_splits_table(backend_url: str) -> None:
    assert "prompt_splits" not in _store_at(backend_url, "0010")

    store = open_store(backend_url)

    columns = {c["name"] for c in inspect(store.engine).get_columns("prompt_splits")}
    assert columns == {"name", "alias", "weight", "updated_at"}
    store.dispose()


def test_a_store_with_prompt_splits_gains_the_account_tables(backend_url: str) -> None:
    assert "users" not in _store_at(backend_url, "0011")

    store = open_store(backend_url)

    tables = set(inspect(store.engine).get_table_names())
    assert {"users", "projects", "memberships", "tokens", "login_attempts"} <= tables
    unique = inspect(store.engine).get_unique_constraints("users")
    assert ["external_issuer", "external_subject"] in [c["column_names"] for c in unique]
    columns = {c["name"] for c in inspect(store.engine).get_columns("tokens")}
    assert {"secret_hash", "scopes", "expires_at", "revoked_at", "last_used_at"} <= columns
    assert "secret" not in columns
    store.dispose()


def test_a_store_at_0013_gains_the_labelling_tables(backend_url: str) -> None:
    assert "label_tasks" not in _store_at(backend_url, "0013")

    store = open_store(backend_url)

    tables = set(inspect(store.engine).get_table_names())
    assert {"label_tasks", "label_leases", "label_annotations"} <= tables
    unique = inspect(store.engine).get_unique_constraints("label_annotations")
    assert ["task_id", "item", "annotator"] in [c["column_names"] for c in unique]
    store.dispose()


def test_a_store_at_0016_gains_the_run_list_index_by_name_and_status(backend_url: str) -> None:
    _store_at(backend_url, "0016")

    store = open_store(backend_url)

    indexes = {i["name"]: i["column_names"] for i in inspect(store.engine).get_indexes("runs")}
    # led by the project since 0019
    assert indexes["ix_runs_project_name_status_started_at_id"] == [
        "project", "name", "status", "started_at", "id",
    ]  # fmt: skip
    assert indexes["ix_runs_project_name_started_at_id"] == ["project", "name", "started_at", "id"]
    store.dispose()


def test_a_store_at_0018_keeps_its_resources_in_the_default_project(backend_url: str) -> None:
    _store_at(backend_url, "0018")
    from sqlalchemy import create_engine

    engine = create_engine(backend_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO datasets (id, name, created_at, created_by) "
                "VALUES ('d1', 'iris', '2026-01-01 00:00:00', 'ann')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO queues (name, weight, reclaimable, created_at, created_by) "
                "VALUES ('q', 1, false, '2026-01-01 00:00:00', 'ann')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO jobs (id, name, kind, spec, queue, priority, owner, state, "
                "executor, attempts, cancel_requested, submitted_at, updated_at) VALUES "
                "('j1', 'train', 'command', '{}', 'q', 0, 'ann', 'PENDING', 'local', 0, "
                "false, '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
    engine.dispose()

    store = open_store(backend_url)

    inspector = inspect(store.engine)
    for table in ("datasets", "runs", "model_versions", "jobs", "deployments"):
        column = next(c for c in inspector.get_columns(table) if c["name"] == "project")
        assert column["nullable"] is False
    assert ["project"] in [i["column_names"] for i in inspector.get_indexes("datasets")]
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("runs")}
    assert indexes["ix_runs_project_started_at_id"] == ["project", "started_at", "id"]
    assert "ix_runs_started_at_id" not in indexes
    with store.engine.connect() as connection:
        assert connection.scalar(text("SELECT project FROM datasets WHERE id = 'd1'")) == "default"
        assert connection.scalar(text("SELECT project FROM jobs WHERE id = 'j1'")) == "default"
    store.dispose()


def test_sqlite_uses_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'forgeml.db'}")
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    store.dispose()


def test_a_failed_transaction_leaves_nothing(backend_url: str) -> None:
    from datetime import UTC, datetime

    store = open_store(backend_url)
    with pytest.raises(RuntimeError), store.session() as session:
        session.add(
            AuditEvent(
                seq=1,
                at=datetime.now(UTC),
                actor="a",
                action="x",
                object_ref="o",
                payload={},
                payload_digest="d",
                prev_hash="p",
                hash="h",
            )
        )
        session.flush()
        raise RuntimeError("crash mid-transaction")
    with store.session() as session:
        assert session.scalars(select(AuditEvent)).all() == []
    store.dispose()


def test_unreachable_database_is_one_clear_error() -> None:
    with pytest.raises(StoreUnavailableError, match="Cannot open the metadata store"):
        open_store("postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2")


# (the revision before, {table: (row id, INSERT of that row)}) of each migration that gave a
# kind a project: rows written before it land in `default`
PROJECT_MIGRATIONS = {
    "prompts": (
        "0019",
        {
            "prompt_versions": (
                "p1",
                "INSERT INTO prompt_versions (id, name, version, digest, kind, content, "
                "created_by, created_at) VALUES ('p1', 'qa', 1, 'd', 'text', '{}', 'ann', "
                "'2026-01-01 00:00:00')",
            )
        },
    ),
    "rag": (
        "0021",
        {
            "rag_indexes": (
                "i1",
                "INSERT INTO rag_indexes (id, name, created_at, created_by) "
                "VALUES ('i1', 'docs', '2026-01-01 00:00:00', 'ann')",
            )
        },
    ),
    "pipelines": (
        "0022",
        {
            "pipeline_runs": (
                "r1",
                "INSERT INTO pipeline_runs (id, name, file, spec, state, created_at, created_by) "
                "VALUES ('r1', 'train', 'p.yaml', '{}', 'SUCCEEDED', '2026-01-01 00:00:00', 'ann')",
            ),
            "pipeline_triggers": (
                "t1",
                "INSERT INTO pipeline_triggers (id, name, file, overrides, kind, subject, cursor, "
                "created_at, created_by) VALUES ('t1', 'nightly', 'p.yaml', '[]', 'cron', "
                "'0 3 * * *', 'x', '2026-01-01 00:00:00', 'ann')",
            ),
        },
    ),
    "alerts and keys": (
        "0023",
        {
            "alerts": (
                "a1",
                "INSERT INTO alerts (id, fingerprint, rule, labels, annotations, state, "
                "started_at, source, updated_at) VALUES ('a1', 'f', 'Drift', '{}', '{}', "
                "'firing', '2026-01-01 00:00:00', 'forgeml', '2026-01-01 00:00:00')",
            ),
            "api_keys": (
                "k1",
                "INSERT INTO api_keys (id, prefix, name, salt, secret_hash, scopes, created_at, "
                "created_by) VALUES ('k1', 'fml_abc', 'ci', 's', 'h', '[\"*\"]', "
                "'2026-01-01 00:00:00', 'ann')",
            ),
        },
    ),
}


@pytest.mark.parametrize("kind", sorted(PROJECT_MIGRATIONS))
def test_a_store_before_a_kinds_project_keeps_its_rows_in_the_default_project(
    backend_url: str, kind: str
) -> None:
    revision, rows = PROJECT_MIGRATIONS[kind]
    _store_at(backend_url, revision)
    from sqlalchemy import create_engine

    engine = create_engine(backend_url)
    with engine.begin() as connection:
        for _, insert in rows.values():
            connection.execute(text(insert))
    engine.dispose()

    store = open_store(backend_url)

    inspector = inspect(store.engine)
    for table, (row, _) in rows.items():
        column = next(c for c in inspector.get_columns(table) if c["name"] == "project")
        assert column["nullable"] is False
        assert ["project"] in [i["column_names"] for i in inspector.get_indexes(table)]
        with store.engine.connect() as connection:
            found = connection.scalar(text(f"SELECT project FROM {table} WHERE id = '{row}'"))
            assert found == "default", table
    store.dispose()


def test_a_store_at_0023_gains_a_project_on_labelling_tasks(backend_url: str) -> None:
    _store_at(backend_url, "0023")

    store = open_store(backend_url)

    inspector = inspect(store.engine)
    column = next(c for c in inspector.get_columns("label_tasks") if c["name"] == "project")
    assert column["nullable"] is False
    assert ["project"] in [i["column_names"] for i in inspector.get_indexes("label_tasks")]
    store.dispose()


def test_a_store_at_0019_gains_the_curve_previews_table(backend_url: str) -> None:
    assert "curve_previews" not in _store_at(backend_url, "0019")

    store = open_store(backend_url)

    inspector = inspect(store.engine)
    assert inspector.get_pk_constraint("curve_previews")["constrained_columns"] == [
        "run_id", "key",
    ]  # fmt: skip
    foreign = inspector.get_foreign_keys("curve_previews")
    assert [(f["referred_table"], f["constrained_columns"]) for f in foreign] == [
        ("runs", ["run_id"])
    ]
    store.dispose()
