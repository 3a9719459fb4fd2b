"""A workspace with one whole lineage chain, built once per session and copied by each test
module: the Adult file ingested and prepared (tests/train/conftest.py's template), one short
run that registers `adult-mlp@v1`, a version registered with it as parent (as a fine-tune or
a mitigation registers), and a deployment recorded serving both (primary and canary)
without starting its processes."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.train.conftest import ADULT_CONFIG, ADULT_CSV, QUICK, _build_once, adult_template

MODEL = "adult-mlp@v1"
CHILD = "adult-mlp-mitigated@v1"
DEPLOYMENT = "adult-api"


def chain_template(factory: pytest.TempPathFactory) -> Path:
    """The FORGEML_HOME of the chain (build once; copy it to write nothing into it)."""
    adult_template(factory)
    return _build_once(factory, "lineage-chain", lambda home: _build(home, factory))


def copy_chain(factory: pytest.TempPathFactory, home: Path) -> Path:
    shutil.copytree(chain_template(factory), home)
    return home


def adult_digest() -> str:
    """The sha256 of the raw Adult file, which the ingest recipe records."""
    return hashlib.sha256(ADULT_CSV.read_bytes()).hexdigest()


def _build(home: Path, factory: pytest.TempPathFactory) -> None:
    from forgeml.serve._supervisor import ServerProcess
    from forgeml.serve.deployments import _records, build_spec
    from forgeml.tracking import attach_run, download_bundle, get_model_version, register_model
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    shutil.copytree(adult_template(factory), home, dirs_exist_ok=True)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        run_training(workspace, load_config(str(ADULT_CONFIG), [*QUICK[1::2], "max_steps=5"]))
        model = get_model_version(workspace, MODEL)
        bundle = download_bundle(workspace, model, home / "bundle")
        handle = attach_run(workspace, model.run_id)
        register_model(workspace, handle, CHILD.partition("@")[0], bundle, parent=MODEL)
        spec = build_spec(workspace, MODEL, canary=CHILD, canary_weight=10)
        # the records `deploy` writes once its replicas are ready; no process is started
        servers = [ServerProcess(os.getpid(), port, home / "serve.log") for port in (1, 2)]
        _records.switch(workspace, DEPLOYMENT, spec, servers, "deployment.create")
    finally:
        workspace.close()
