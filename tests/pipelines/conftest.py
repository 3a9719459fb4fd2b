from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from forgeml.core.store import (
    AuditEvent,
    JobRecord,
    PipelineCacheRecord,
    PipelineRunRecord,
    PipelineStepRunRecord,
)
from forgeml.core.workspace import Workspace
from forgeml.pipelines import load_pipeline, run_pipeline

PY = sys.executable

# one command step that writes a file: the smallest pipeline, run through every surface
HELLO_PIPELINE = f"""
name: hello
steps:
  - name: write
    kind: command
    argv: [{PY}, -c, "open('hello.txt', 'w').write('hi')"]
    outputs: {{out: hello.txt}}
"""


@pytest.fixture
def adult_cli(
    cli: Any,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """The `cli` fixture on a copy of the prepared Adult workspace (MLflow in it, not the
    caller's tracking server): what the pipelines that train, tune and release run on."""
    from tests.train.conftest import copy_adult_home

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy_adult_home(tmp_path_factory, tmp_path / "home")
    return cli


@pytest.fixture
def pipe_workspace(sched_workspace: Workspace) -> Workspace:
    """A workspace whose local cluster is 2 CPUs, no GPU, 4 GB (the scheduler tests')."""
    return sched_workspace


def write_pipeline(folder: Path, text: str, name: str = "pipeline.yaml") -> Path:
    path = folder / name
    path.write_text(text.replace("PYTHON", PY), encoding="utf-8")
    return path


def run(workspace: Workspace, path: Path, *overrides: str) -> dict[str, Any]:
    return run_pipeline(workspace, load_pipeline(path, overrides), output=lambda _: None)


def steps_by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["name"]: step for step in summary["steps"]}


def row_counts(workspace: Workspace) -> dict[str, int]:
    """How many rows each table a pipeline run writes to holds."""
    tables = (AuditEvent, JobRecord, PipelineRunRecord, PipelineStepRunRecord, PipelineCacheRecord)
    with workspace.store.session() as session:
        return {
            table.__tablename__: session.scalar(select(func.count()).select_from(table)) or 0
            for table in tables
        }
