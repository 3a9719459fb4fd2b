"""A deployment serves its own project's models only: `forgeml deploy` (local, or remote as
a job), the API's traffic change and a pipeline's deploy or canary step all run a spec
through `apply_spec`, which refuses a model version of another project before any replica
starts, with nothing recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import OtherProjectError
from forgeml.core.ids import new_id
from forgeml.core.store import ModelVersionRecord, RunRecord
from forgeml.core.workspace import Workspace
from forgeml.serve import _supervisor
from forgeml.serve.deployments import _records, deploy
from tests.cli.conftest import assert_cli_error
from tests.conftest import CliResult

REFUSED = "Model 'mlp-a' belongs to the project 'team-a', not 'team-b'"


class ReplicasStartedError(Exception):
    """Raised in place of starting replicas: the spec got past every check."""


def register(workspace: Workspace, name: str, project: str) -> None:
    """Version 1 of model `name` in `project`, as registration records it (no bundle: no
    replica is started here)."""
    with workspace.store.session() as session:
        run = RunRecord(id=new_id(), project=project, name="probe", experiment="probe",
                        status="FINISHED", config={}, lease_seconds=60, pid=1, host="test",
                        created_by="tester")  # fmt: skip
        session.add(run)
        session.flush()
        session.add(
            ModelVersionRecord(id=new_id(), name=name, version=1, run_id=run.id,
                               project=project, artifact_digest="0" * 64, created_by="tester")
        )  # fmt: skip


@pytest.fixture
def no_replicas(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replica starts (each raises `ReplicasStartedError`), counted."""
    starts: list[int] = []

    def start_all(launches: list[Any], *_: Any) -> list[Any]:
        starts.append(len(launches))
        raise ReplicasStartedError

    monkeypatch.setattr(_supervisor, "start_all", start_all)
    return starts


@pytest.mark.parametrize(
    "models",
    [
        pytest.param({"model_ref": "mlp-a@v1"}, id="primary"),
        pytest.param({"model_ref": "mlp-b@v1", "canary": "mlp-a@v1"}, id="canary"),
        pytest.param({"model_ref": "mlp-b@v1", "shadow": "mlp-a@v1"}, id="shadow"),
    ],
)
def test_a_deployment_refuses_another_projects_model_before_any_replica_starts(
    any_workspace: Workspace, no_replicas: list[int], models: dict[str, str]
) -> None:
    register(any_workspace, "mlp-a", "team-a")
    register(any_workspace, "mlp-b", "team-b")
    in_b = any_workspace.in_project("team-b")

    with pytest.raises(OtherProjectError, match=REFUSED):
        deploy(in_b, "web-b", **models)

    assert no_replicas == [] and _records.find(any_workspace, "web-b") is None
    # the same deployment of team-b's own models gets as far as starting its replicas
    with pytest.raises(ReplicasStartedError):
        deploy(in_b, "web-b", "mlp-b@v1", canary="mlp-b@v1", shadow="mlp-b@v1")
    assert no_replicas == [3]


def test_forgeml_deploy_of_another_projects_model_is_one_sentence_and_exit_1(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_replicas: list[int],
) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        register(workspace, "mlp-a", "team-a")
        register(workspace, "mlp-b", "team-b")
        monkeypatch.setenv("FORGEML_PROJECT", "team-b")

        assert_cli_error(cli("deploy", "mlp-a@v1", "--name", "web-b"), REFUSED)
        assert_cli_error(
            cli("deploy", "mlp-b@v1", "--name", "web-b", "--canary", "mlp-a@v1"), REFUSED
        )
        assert no_replicas == [] and _records.find(workspace, "web-b") is None
    finally:
        workspace.close()


def test_a_pipelines_deploy_and_canary_steps_refuse_another_projects_model(
    any_workspace: Workspace, no_replicas: list[int]
) -> None:
    from forgeml.pipelines.release import run_canary, run_deploy
    from forgeml.pipelines.steps import CanaryStep, DeployStep
    from forgeml.serve.deployments import get_deployment
    from tests.gateway.conftest import add_deployment

    register(any_workspace, "mlp-a", "team-a")
    register(any_workspace, "web-b-model", "team-b")
    in_b = any_workspace.in_project("team-b")
    add_deployment(in_b, "web-b", ["http://127.0.0.1:9"], project="team-b")
    deploy_step = {"name": "deploy", "kind": "deploy", "deployment": "new-b", "model": "mlp-a@v1"}
    canary_step = {"name": "canary", "kind": "canary", "deployment": "web-b", "model": "mlp-a@v1"}

    def never(_: float) -> None:
        pytest.fail("the canary was watched")

    with pytest.raises(OtherProjectError, match=REFUSED):
        run_deploy(in_b, DeployStep.model_validate(deploy_step))
    # without `alias:` the step moves no alias, but the deployment would serve mlp-a
    with pytest.raises(OtherProjectError, match=REFUSED):
        run_canary(in_b, CanaryStep.model_validate(canary_step), clock=lambda: 0.0, sleep=never)

    assert no_replicas == [] and _records.find(any_workspace, "new-b") is None
    assert get_deployment(in_b, "web-b").spec.canary is None
    assert get_deployment(in_b, "web-b").revision == 1


def test_a_remote_forgeml_deploy_of_another_projects_model_fails_its_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from forgeml.auth import issue_token
    from tests.auth._accounts import fast_settings, person
    from tests.cli._served import forgeml_on, scheduling, served
    from tests.train.conftest import SRC

    monkeypatch.setenv("PYTHONPATH", str(SRC))  # the job is `python -m forgeml.cli` of this tree
    monkeypatch.chdir(tmp_path)
    with served(tmp_path) as home, forgeml_on(home, capsys, monkeypatch) as forgeml:
        register(home.workspace, "mlp-a", "team-a")
        person(home.workspace, fast_settings(tmp_path), "mia", "maintainer", "team-b")
        home.tokens["mia"] = issue_token(home.workspace, "mia", "cli", actor="tester")[1]
        monkeypatch.setenv("FORGEML_PROJECT", "team-b")
        with scheduling(home):
            remote = forgeml.remote("deploy", "mlp-a@v1", "--name", "web-b", token="mia")

        assert_cli_error(remote, "The job exited with code 1 (job ")
        assert f"error: {REFUSED}" in remote.stdout
        assert _records.find(home.workspace, "web-b") is None


def test_a_pipelines_deploy_and_canary_steps_refuse_another_projects_deployment(
    any_workspace: Workspace, no_replicas: list[int]
) -> None:
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.pipelines.release import run_canary, run_deploy
    from forgeml.pipelines.steps import CanaryStep, DeployStep
    from forgeml.serve.deployments import get_deployment
    from tests.gateway.conftest import add_deployment

    register(any_workspace, "mlp-b", "team-b")
    add_deployment(any_workspace.in_project("team-a"), "web-a", ["http://127.0.0.1:9"],
                   project="team-a")  # fmt: skip
    in_b = any_workspace.in_project("team-b")
    deploy_step = {"name": "deploy", "kind": "deploy", "deployment": "web-a", "model": "mlp-b@v1"}
    canary_step = {"name": "canary", "kind": "canary", "deployment": "web-a", "model": "mlp-b@v1"}

    def never(_: float) -> None:
        pytest.fail("the canary was watched")

    # the name is team-a's: the step neither takes it as its own nor watches it
    taken = "A deployment called 'web-a' exists already, in the project 'team-a'"
    with pytest.raises(AlreadyExistsError, match=taken):
        run_deploy(in_b, DeployStep.model_validate(deploy_step))
    with pytest.raises(AlreadyExistsError, match=taken):
        run_canary(in_b, CanaryStep.model_validate(canary_step), clock=lambda: 0.0, sleep=never)

    assert no_replicas == []
    assert get_deployment(any_workspace, "web-a").revision == 1
