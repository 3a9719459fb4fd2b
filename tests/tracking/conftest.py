from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import AuditEvent, DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.tracking._mlflow import open_client
from tests.data.conftest import write_table_csv


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty, migrated MLflow database: creating one costs seconds, copying it does not."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=tmp_path_factory.mktemp("mlflow-template")))
        open_client(workspace)
        return workspace.settings.home / "mlflow.db"


@pytest.fixture(scope="module")
def tracking_workspace(
    tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path
) -> Iterator[Workspace]:
    """One workspace per test module, on a copy of the template MLflow database."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        home = tmp_path_factory.mktemp("tracking") / "home"
        home.mkdir()
        shutil.copyfile(mlflow_template, home / "mlflow.db")
        workspace = Workspace(Settings(home=home, user="tester"))
        yield workspace
        workspace.close()


@pytest.fixture(scope="module")
def dataset_version(
    tracking_workspace: Workspace, tmp_path_factory: pytest.TempPathFactory
) -> DatasetVersion:
    csv = write_table_csv(tmp_path_factory.mktemp("csv") / "toy.csv")
    return pipeline.add(tracking_workspace, "toy", csv, IngestOptions()).version


def make_bundle(folder: Path, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    save_file(
        {"layer.weight": rng.standard_normal((4, 3)).astype(np.float32)},
        folder / "model.safetensors",
    )
    model = {
        "architecture": "mlp",
        "params": {"hidden": [4]},
        "task": "classification",
        "class_names": ["no", "yes"],
    }
    (folder / "model.json").write_text(json.dumps(model), encoding="utf-8")
    (folder / "feature_spec.json").write_text(json.dumps({"columns": ["age"]}), encoding="utf-8")
    return folder


def audit_actions(workspace: Workspace, object_ref: str | None = None) -> list[str]:
    query = select(AuditEvent).order_by(AuditEvent.seq)
    if object_ref is not None:
        query = query.where(AuditEvent.object_ref == object_ref)
    with workspace.store.session() as session:
        return [event.action for event in session.scalars(query)]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_workspace(
    request: pytest.FixtureRequest, tmp_path: Path, mlflow_template: Path
) -> Iterator[Workspace]:
    """A workspace whose forgeml store is SQLite, then PostgreSQL (MLflow's stays SQLite)."""
    db_url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        home = tmp_path / "home"
        home.mkdir()
        shutil.copyfile(mlflow_template, home / "mlflow.db")
        workspace = Workspace(Settings(home=home, db_url=db_url, user="tester"))
        yield workspace
        workspace.close()
