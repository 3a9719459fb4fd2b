from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, select

from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.data.catalog import Recorded
from forgeml.data.ingest import IngestOptions


@dataclass(frozen=True)
class StoreSnapshot:
    """Every row of every table, and every stored blob, at one moment."""

    tables: dict[str, list[str]]
    blobs: frozenset[str]


def snapshot_store(workspace: Workspace) -> StoreSnapshot:
    metadata = MetaData()
    metadata.reflect(workspace.store.engine)
    tables = {}
    with workspace.store.engine.connect() as connection:
        for table in metadata.sorted_tables:
            rows = connection.execute(select(table)).all()
            tables[table.name] = sorted(repr(tuple(row)) for row in rows)
    root = Path(workspace.artifacts.root)
    blobs = frozenset(
        str(path.relative_to(root)) for path in (root / "sha256").rglob("*") if path.is_file()
    )
    return StoreSnapshot(tables, blobs)


def leftover_temp_files(workspace: Workspace) -> list[Path]:
    return sorted((Path(workspace.artifacts.root) / "tmp").rglob("*"))


def audit_events(workspace: Workspace) -> list[AuditEvent]:
    with workspace.store.session() as session:
        return list(session.scalars(select(AuditEvent).order_by(AuditEvent.seq)))


def add(workspace: Workspace, name: str, source: Path, **options: object) -> Recorded:
    return pipeline.add(workspace, name, source, IngestOptions.model_validate(options))


def edit_recipe(workspace: Workspace, ref: str, **params: Any) -> None:
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
        recipe = dict(version.recipe)
        recipe["params"] = {**recipe["params"], **params}
        version.recipe = recipe


def assert_one_sentence(message: str) -> None:
    assert message, "empty error message"
    assert "\n" not in message, message
    assert "Traceback" not in message, message
    assert len(message) < 500, message


def write_table_csv(path: Path, rows: int = 120, offset: int = 0) -> Path:
    """A small CSV with ints, floats, text, e-mails and a skewed binary label."""
    cities = ["Oslo", "Rome", "Lima"]
    lines = ["id,age,score,city,email,label"]
    for i in range(offset, offset + rows):
        label = "yes" if i % 4 == 0 else "no"
        lines.append(
            f"{i},{20 + i % 50},{(i * 37) % 100 / 10},{cities[i % 3]},user{i}@example.com,{label}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    return write_table_csv(tmp_path / "small.csv")
