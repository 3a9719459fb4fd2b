"""A workspace with one Adult model trained as a scheduler job, for the model-card tests;
the serve template (adult-mlp@v1..., sst2-minilm@v1) for the explanation tests.

`adult-mlp@v1` is trained for 20 steps with the example's slices (sex, race) inside job
`card-train`, whose one attempt carries measured figures as the scheduler records them, so
the card has lineage, per-slice metrics and compute to cite. Built once per session.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.ids import new_id
from forgeml.core.store import JobAttemptRecord, JobRecord, QueueRecord
from forgeml.core.workspace import Workspace
from tests.serve.conftest import serve_template  # the explanation tests' models
from tests.train.conftest import ADULT_CONFIG, QUICK, _build_once, adult_template, copy_home

CARD_MODEL = "adult-mlp@v1"
CARD_JOB = "card-train"
# the attempt's measured use: 12.5 s wall, 20 CPU-seconds, 2 GPU-seconds, priced at 0.0042
ATTEMPT = {"wall_seconds": 12.5, "cpu_seconds": 20.0, "gpu_seconds": 2.0, "cost": 0.0042}


def _job(workspace: Workspace) -> str:
    job_id = new_id()
    started = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    with workspace.store.session() as session:
        if session.get(QueueRecord, "default") is None:
            session.add(QueueRecord(name="default", weight=1, capability=None,
                                    reclaimable=True, created_by="tester"))  # fmt: skip
            session.flush()
        session.add(JobRecord(id=job_id, name=CARD_JOB, kind="train", spec={}, queue="default",
                              priority=100, owner="tester", state="SUCCEEDED", executor="local",
                              model_name="adult-mlp"))  # fmt: skip
        session.flush()
        session.add(JobAttemptRecord(
            id=new_id(), job_id=job_id, number=1, state="SUCCEEDED", executor="local",
            nodes=["local"], started_at=started, ended_at=started + timedelta(seconds=12.5),
            heartbeat_at=started, exit_code=0, memory_gb_seconds=6.0, peak_memory_gb=0.5,
            **ATTEMPT,
        ))  # fmt: skip
    return job_id


def _train_in_a_job(home: Path, factory: pytest.TempPathFactory) -> None:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    shutil.copytree(adult_template(factory), home, dirs_exist_ok=True)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("FORGEML_JOB_ID", _job(workspace))  # the run's job, as a job runs it
            run_training(workspace, load_config(str(ADULT_CONFIG), list(QUICK[1::2])))
    finally:
        workspace.close()


def carded_template(factory: pytest.TempPathFactory) -> Path:
    """The FORGEML_HOME described in this module's docstring (copy it to change it)."""
    adult_template(factory)
    return _build_once(factory, "adult-carded", lambda home: _train_in_a_job(home, factory))


@pytest.fixture
def card_home(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the carded workspace at `tmp_path/home` (the `cli` fixture's)."""
    return copy_home(carded_template(tmp_path_factory), tmp_path / "home")


@pytest.fixture
def card_workspace(card_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workspace = Workspace(Settings(home=card_home, user="tester"))
    yield workspace
    workspace.close()


__all__ = ["serve_template"]
