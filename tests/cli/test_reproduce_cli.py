"""`forgeml runs reproduce`: a run's recorded config trained again, on its data or newer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, json_out
from tests.cli.test_train_cli import adult  # noqa: F401 (the fixture)
from tests.conftest import CliResult
from tests.train.conftest import ADULT_CONFIG, quick

Cli = Callable[..., CliResult]


def _store(tmp_path: Path) -> dict[str, int]:
    from sqlalchemy import func, select

    from forgeml.core.store import JobRecord, RunRecord

    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        with workspace.store.session() as session:
            return {
                "runs": session.scalar(select(func.count()).select_from(RunRecord)) or 0,
                "jobs": session.scalar(select(func.count()).select_from(JobRecord)) or 0,
            }
    finally:
        workspace.close()


def test_reproduce_gives_the_same_metrics_on_the_same_data(adult: Cli) -> None:  # noqa: F811
    first = json_out(adult("train", str(ADULT_CONFIG), *quick(), "--set", "seed=3", "--json"))

    again = json_out(adult("runs", "reproduce", first["run_id"][:8], "--json"))
    by_model = json_out(adult("runs", "reproduce", first["model"], "--json"))

    for metric in ("accuracy", "test_accuracy", "f1_macro", "roc_auc"):
        assert again["metrics"][metric] == pytest.approx(first["metrics"][metric], abs=1e-3)
        assert by_model["metrics"][metric] == pytest.approx(first["metrics"][metric], abs=1e-3)
    shown = json_out(adult("runs", "show", again["run_id"], "--json"))
    assert shown["dataset"] == json_out(adult("runs", "show", first["run_id"], "--json"))["dataset"]
    assert shown["config"]["seed"] == 3


def test_reproduce_on_other_data_and_overrides(adult: Cli) -> None:  # noqa: F811
    first = json_out(adult("train", str(ADULT_CONFIG), *quick(), "--json"))
    dataset = json_out(adult("runs", "show", first["run_id"], "--json"))["dataset"]

    other = json_out(
        adult("runs", "reproduce", first["run_id"], "--data", dataset, "--set", "seed=7", "--json")
    )

    shown = json_out(adult("runs", "show", other["run_id"], "--json"))
    assert shown["config"]["seed"] == 7
    assert shown["dataset"] == dataset


def test_reproduce_refuses_bad_references_and_records_nothing(
    adult: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    first = json_out(adult("train", str(ADULT_CONFIG), *quick(), "--json"))
    before = _store(tmp_path)

    assert_cli_error(adult("runs", "reproduce", "nosuch-run"), "Run 'nosuch-run' does not exist")
    assert_cli_error(adult("runs", "reproduce", "nosuch@production"), "nosuch")
    assert_cli_error(adult("runs", "reproduce", first["run_id"], "--data", "nosuch"), "nosuch")
    assert_cli_error(adult("runs", "reproduce", first["run_id"], "--set", "epochs=-1"), "epochs")

    assert _store(tmp_path) == before
