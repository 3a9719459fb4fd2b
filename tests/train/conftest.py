"""Prepared workspaces for training tests, built once per session and copied per test.

Building the Adult data (ingest -> clean -> validate -> split -> features, as
examples/adult/README.md does) and migrating a fresh MLflow database cost seconds;
copying the finished FORGEML_HOME folder costs milliseconds. Tests outside tests/train
use the plain functions (`copy_adult_home`, `copy_empty_home`) from their own fixtures.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.configfile import load_yaml
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.tracking import open_client
from tests.conftest import SHARED_DATA  # the one place that finds ../shared

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
EXAMPLES = REPO / "examples"
ADULT_CSV = SHARED_DATA / "adult" / "adult.data"
SST2_DIR = SHARED_DATA / "sst2"

# `forgeml train examples/adult/train.yaml` shortened to a few steps on fewer rows
ADULT_CONFIG = EXAMPLES / "adult" / "train.yaml"
QUICK = ("--set", "epochs=null", "--set", "max_steps=20", "--set", "schedule.warmup_steps=0")


def quick(*overrides: str) -> list[str]:
    """`--set` arguments for a short Adult run plus `overrides` (each `key=value`)."""
    args = list(QUICK)
    for item in overrides:
        args += ["--set", item]
    return args


def _build_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The FORGEML_HOME `build` makes, built once per session (shared by every module)."""
    root = factory.getbasetemp() / "templates" / name
    home = root / "home"
    done = root / ".done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        home.mkdir(parents=True)
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("MLFLOW_TRACKING_URI", raising=False)
            workspace = Workspace(Settings(home=home, user="tester"))
            try:
                build(home)
                # a migrated MLflow store: creating one takes seconds, copying it does not
                open_client(workspace)
                _ = workspace.store
            finally:
                workspace.close()
        done.touch()
    return home


def _prepare_adult(home: Path) -> None:
    workspace = Workspace(Settings(home=home, user="tester"))
    recipes = EXAMPLES / "adult"
    try:
        pipeline.add(workspace, "adult", ADULT_CSV, IngestOptions())
        pipeline.derive(workspace, "clean", "adult", load_yaml(recipes / "clean.yaml"))
        pipeline.derive(workspace, "validate", "adult", load_yaml(recipes / "expectations.yaml"))
        split = {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 0}
        pipeline.derive(workspace, "split", "adult", split)
        pipeline.derive(workspace, "features", "adult", load_yaml(recipes / "features.yaml"))
    finally:
        workspace.close()


def empty_template(factory: pytest.TempPathFactory) -> Path:
    """A FORGEML_HOME with migrated forgeml and MLflow databases and nothing else."""
    return _build_once(factory, "empty", lambda home: None)


def adult_template(factory: pytest.TempPathFactory) -> Path:
    """A FORGEML_HOME after examples/adult/README.md's data steps (adult@v4 is the split).

    Skips the test when the shared Adult data is missing.
    """
    if not ADULT_CSV.is_file():
        pytest.skip(f"the Adult data set is missing at {ADULT_CSV}")
    return _build_once(factory, "adult", _prepare_adult)


# The runs of `trained_adult_template`, oldest first: (name, `--set` overrides, model).
TRAINED_RUNS = (
    ("adult-mlp", ("optimizer.lr=0.01", "max_steps=30"), "adult-mlp@v1"),
    ("adult-mlp", ("optimizer.lr=1e-5", "max_steps=5", "seed=1"), "adult-mlp@v2"),
    ("adult-small", ("name=adult-small", "model.params.hidden=[8]"), "adult-small@v1"),
    ("adult-mlp", ("data.target=nosuch",), None),  # FAILED: no such column
)


def _train_adult_runs(home: Path, factory: pytest.TempPathFactory) -> None:
    from forgeml.core.errors import ForgemlError
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    shutil.copytree(adult_template(factory), home, dirs_exist_ok=True)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        for _, overrides, model in TRAINED_RUNS:
            config = load_config(str(ADULT_CONFIG), list(QUICK[1::2]) + list(overrides))
            if model is None:
                with pytest.raises(ForgemlError):
                    run_training(workspace, config)
            else:
                run_training(workspace, config)
    finally:
        workspace.close()


def trained_adult_template(factory: pytest.TempPathFactory) -> Path:
    """The prepared Adult workspace plus the runs and models of TRAINED_RUNS.

    Its MLflow experiments keep their files in the template's own folder, so copies are
    for reading runs and models (and moving aliases), not for training more runs.
    """
    adult_template(factory)
    return _build_once(factory, "adult-trained", lambda home: _train_adult_runs(home, factory))


def copy_home(template: Path, home: Path) -> Path:
    shutil.copytree(template, home)
    return home


def copy_adult_home(factory: pytest.TempPathFactory, home: Path) -> Path:
    """A private copy of the prepared Adult workspace at `home`."""
    return copy_home(adult_template(factory), home)


def copy_empty_home(factory: pytest.TempPathFactory, home: Path) -> Path:
    """A private copy of the empty, migrated workspace at `home`."""
    return copy_home(empty_template(factory), home)


def subprocess_env(home: Path) -> dict[str, str]:
    """The environment of a `forgeml` child process writing to `home`."""
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    env.update(FORGEML_HOME=str(home), FORGEML_USER="tester", PYTHONPATH=str(SRC))
    env.pop("FORGEML_DB_URL", None)
    env.pop("FORGEML_ARTIFACTS_URL", None)
    return env


def forgeml_command(*args: str) -> list[str]:
    """The `forgeml ...` command line run by this interpreter (no installed script needed)."""
    return [sys.executable, "-c", "from forgeml.cli import main; main()", *args]


@pytest.fixture
def adult_home(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tmp_path/home` (the `cli` fixture's FORGEML_HOME) holding the prepared Adult data."""
    return copy_adult_home(tmp_path_factory, tmp_path / "home")


@pytest.fixture
def adult_workspace(adult_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """The prepared Adult workspace opened through the SDK."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workspace = Workspace(Settings(home=adult_home, user="tester"))
    yield workspace
    workspace.close()


# The models of `trained_text_template`: an SST-2 MiniLM classifier and a byte-level GPT
TEXT_MODELS = ("sst2-minilm@v1", "pydoc-gpt@v1")


def _write_corpus(root: Path) -> Path:
    """A small English text corpus (SST-2 sentences) as text files, for the tiny GPT."""
    lines = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[1:801]
    root.mkdir(parents=True)
    for part in range(8):
        chunk = [line.split("\t")[-1] for line in lines[part * 100 : (part + 1) * 100]]
        (root / f"part{part}.txt").write_text("\n".join(chunk) + "\n", encoding="utf-8")
    return root


def _train_text_models(home: Path, factory: pytest.TempPathFactory) -> None:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig

    workspace = Workspace(Settings(home=home, user="tester"))
    scratch = factory.mktemp("text-sources")
    lines = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[:401]
    (scratch / "sst2.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    split = {"ratios": [0.8, 0.1, 0.1], "seed": 0}
    try:
        pipeline.add(workspace, "sst2", scratch / "sst2.tsv", IngestOptions())
        pipeline.derive(workspace, "split", "sst2", split)
        pipeline.add(
            workspace, "pydoc", _write_corpus(scratch / "corpus"), IngestOptions(format="text")
        )
        pipeline.derive(workspace, "split", "pydoc", split)
        common = {"max_steps": 10, "batch_size": 16, "seed": 0, "schedule": {"warmup_steps": 0}}
        text = {
            "name": "sst2-minilm",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "text_classifier", "params": {"max_length": 48}},
            "optimizer": {"name": "adamw", "lr": 5e-5},
            **common,
        }
        gpt = {
            "name": "pydoc-gpt",
            "data": {"dataset": "pydoc", "text_column": "text", "target": None},
            "model": {
                "name": "tiny_gpt",
                "params": {"block_size": 64, "n_layer": 2, "n_head": 2, "n_embd": 64},
            },
            "optimizer": {"name": "adamw", "lr": 3e-3},
            **common,
        }
        for config in (text, gpt):
            run_training(workspace, TrainConfig.model_validate(config))
    finally:
        workspace.close()


def trained_text_template(factory: pytest.TempPathFactory) -> Path:
    """A FORGEML_HOME holding TEXT_MODELS, trained for 10 steps each on SST-2 text.

    `sst2-minilm@v1` is a MiniLM text classifier (labels "0"/"1", max_length 48) over 400
    SST-2 rows; `pydoc-gpt@v1` a 2-layer byte-level GPT (block 64) over SST-2 sentences.
    Skips the test when the shared SST-2 data is missing.
    """
    if not (SST2_DIR / "train.tsv").is_file():
        pytest.skip(f"the SST-2 data set is missing at {SST2_DIR}")
    return _build_once(factory, "text-trained", lambda home: _train_text_models(home, factory))
