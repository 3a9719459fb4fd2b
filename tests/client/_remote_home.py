"""A workspace served by the control plane with accounts, shared by the client and remote
CLI tests: the Adult data prepared, trained model versions (one promoted), a failed run, a
queued job, a gateway key, and an owner's and a viewer's token."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._thread import api_in_thread
from forgeml.auth import issue_token
from forgeml.core.config import Settings
from forgeml.core.errors import ForgemlError
from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key
from tests.auth._accounts import fast_settings, person
from tests.train.conftest import ADULT_CONFIG, ADULT_CSV, QUICK, copy_home, trained_adult_template


@dataclass(frozen=True)
class RemoteHome:
    home: Path
    db_url: str | None
    url: str
    tokens: dict[str, str]
    job_id: str


def _train(workspace: Workspace) -> None:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    run_training(workspace, load_config(str(ADULT_CONFIG), list(QUICK[1::2])))
    with pytest.raises(ForgemlError):  # a FAILED run: no such column
        run_training(workspace, load_config(str(ADULT_CONFIG), [*QUICK[1::2], "data.target=x"]))


def _queued_job(workspace: Workspace) -> str:
    from forgeml.scheduler.submit import submit_and_run

    fields = {"command": ["true"], "name": "noop", "queue": "default"}
    return str(submit_and_run(workspace, fields, detach=True, wait=False).id)


@contextmanager
def remote_home(
    factory: pytest.TempPathFactory, backend: str, db_url: str | None = None
) -> Iterator[RemoteHome]:
    """The workspace built (`sqlite`: a copy of the trained Adult template; `postgresql`: the
    same data and a run trained into `db_url`) and served, with accounts."""
    from forgeml.tracking import promote

    tmp = factory.mktemp(f"remote-{backend}")
    home = tmp / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        if db_url is None:
            copy_home(trained_adult_template(factory), home)
        workspace = Workspace(Settings(home=home, db_url=db_url, user="tester"))
        try:
            if db_url is not None:
                _prepare_on(workspace)
                _train(workspace)
            promote(workspace, "adult-mlp", 1, "production", "accuracy", "max", True)
            job_id = _queued_job(workspace)
            create_key(workspace, "web", rate_per_s=5.0)
            tokens = _accounts(workspace, tmp)
            authorizer = AccountsAuthorizer(workspace, fast_settings(tmp))
            with api_in_thread(workspace, authorizer=authorizer) as url:
                yield RemoteHome(home, db_url, url, tokens, job_id)
        finally:
            workspace.close()


def _accounts(workspace: Workspace, tmp: Path) -> dict[str, str]:
    settings = fast_settings(tmp)
    tokens = {}
    for name, role in (("olivia", "owner"), ("victor", "viewer")):
        person(workspace, settings, name, role)
        tokens[name] = issue_token(workspace, name, "cli", actor="tester")[1]
    return tokens


def _prepare_on(workspace: Workspace) -> None:
    from forgeml.core.configfile import load_yaml
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions

    recipes = ADULT_CONFIG.parent
    pipeline.add(workspace, "adult", ADULT_CSV, IngestOptions())
    pipeline.derive(workspace, "clean", "adult", load_yaml(recipes / "clean.yaml"))
    pipeline.derive(workspace, "validate", "adult", load_yaml(recipes / "expectations.yaml"))
    split = {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 0}
    pipeline.derive(workspace, "split", "adult", split)
    pipeline.derive(workspace, "features", "adult", load_yaml(recipes / "features.yaml"))
