from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.train.conftest import ADULT_CONFIG, copy_adult_home

DEPLOYMENT = "adult-loop"

POLICY = f"""
name: adult
deployment: {DEPLOYMENT}
model: adult-mlp@production
on_alerts: [ForgemlDriftDetected]
retrain:
  data: adult
  overrides: [epochs=null, max_steps=60, optimizer.lr=0.01, schedule.warmup_steps=0,
              early_stopping=null]
gate: {{metric: accuracy, margin: 0.0, slices: {{sex: 0.5}}}}
canary: {{weight: 50, seconds: 3, min_requests: 5, poll_seconds: 0.5}}
"""


def champion_home(home: Path, factory: pytest.TempPathFactory) -> Workspace:
    """A copy of the Adult workspace with a weak champion at adult-mlp@production."""
    from forgeml.tracking import promote
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    copy_adult_home(factory, home)
    workspace = Workspace(Settings(home=home, user="tester"))
    config = load_config(
        str(ADULT_CONFIG),
        ["epochs=null", "max_steps=4", "optimizer.lr=1e-4", "schedule.warmup_steps=0",
         "early_stopping=null"],
    )  # fmt: skip
    run_training(workspace, config)
    promote(workspace, "adult-mlp", 1, "production", "accuracy", force=True)
    return workspace


@pytest.fixture(scope="module")
def champion(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = champion_home(tmp_path_factory.mktemp("loop") / "home", tmp_path_factory)
        try:
            yield workspace
        finally:
            workspace.close()
