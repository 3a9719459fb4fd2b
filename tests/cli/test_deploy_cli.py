from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.serve.test_deployments import adult_records, kill_servers, server_pids
from tests.train.conftest import copy_home, trained_adult_template

Cli = Callable[..., CliResult]


@pytest.fixture
def models_home(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The `cli` fixture's FORGEML_HOME holding the trained Adult models."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")
    kill_servers("cli-adult")


def test_deploy_help_describes_the_model_form_and_the_subcommands(cli: Cli) -> None:
    result = cli("deploy", "--help")
    assert result.code == 0, result.stderr
    for text in ("MODEL_REF --name NAME", "--canary", "list", "show", "rollback", "delete"):
        assert text in result.stdout
    create = cli("deploy", "adult-mlp@v1", "--help")
    assert create.code == 0 and "--replicas" in create.stdout and "--weight" in create.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_deploy_list_show_check_rollback_delete_from_the_cli(cli: Cli, models_home: Path) -> None:
    # options before the model reference work as well as after it
    created = json_out(
        cli("deploy", "--name", "cli-adult", "adult-mlp@v1", "--shadow", "adult-small", "--json")
    )
    assert (created["status"], created["revision"]) == ("ready", 1)
    assert created["spec"]["shadow"] == {"model": "adult-small@v1"}
    assert created["spec"]["model_ref"] == "adult-mlp@v1"
    roles = {replica["role"]: replica for replica in created["replicas"]}
    assert sorted(roles) == ["primary", "shadow"]
    assert sorted(server_pids("cli-adult")) == sorted(r["pid"] for r in created["replicas"])
    response = httpx.post(
        f"{roles['shadow']['url']}/v1/models/cli-adult:predict",
        json={"instances": adult_records(2)},
        timeout=10,
    )
    assert response.status_code == 200 and len(response.json()["predictions"]) == 2

    listed = json_out(cli("deploy", "list", "--json"))
    assert [(d["name"], d["status"]) for d in listed] == [("cli-adult", "ready")]
    shown = json_out(cli("deploy", "show", "cli-adult", "--json"))
    assert shown["replicas"] == created["replicas"]
    checked = json_out(cli("deploy", "check", "--json"))
    assert [r["status"] for r in checked[0]["replicas"]] == ["ready", "ready"]
    table = cli("deploy", "show", "cli-adult")
    assert table.code == 0 and "cli-adult" in table.stdout and "shadow" in table.stdout

    assert_cli_error(
        cli("deploy", "adult-mlp@v1", "--name", "cli-adult", "--shadow", "adult-small"),
        "already runs this spec",
    )
    assert_cli_error(cli("deploy", "rollback", "cli-adult"), "no earlier revision")

    deleted = cli("deploy", "delete", "cli-adult")
    assert deleted.code == 0, deleted.stderr
    assert "deleted deployment cli-adult" in deleted.stdout
    assert server_pids("cli-adult") == []
    assert json_out(cli("deploy", "list", "--json")) == []
    assert [d["status"] for d in json_out(cli("deploy", "list", "--deleted", "--json"))] == [
        "deleted"
    ]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_deployment_that_cannot_start_exits_1_and_is_recorded_failed(
    cli: Cli, models_home: Path
) -> None:
    # adult-mlp@v1 has no model.onnx: its onnx server exits, with the reason in its log
    result = cli("deploy", "adult-mlp@v1", "--name", "cli-adult", "--runtime", "onnx")
    assert_cli_error(result, "Deployment 'cli-adult' did not start: its primary replica")
    assert server_pids("cli-adult") == []
    shown = json_out(cli("deploy", "show", "cli-adult", "--json"))
    assert (shown["status"], shown["revision"], shown["replicas"]) == ("failed", 0, [])
    log = models_home / "logs" / "deployments" / "cli-adult" / "r1-primary-1.log"
    last_line = log.read_text().strip().splitlines()[-1].strip()
    assert last_line in shown["error"] and last_line in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-model", "--name", "cli-adult"], "Model 'no-such-model' is not registered"),
        (["adult-mlp@v1", "--name", "cli-adult", "--replicas", "0"], "at least 1, not 0"),
        (
            ["adult-mlp@v1", "--name", "cli-adult", "--canary", "adult-small", "--weight", "150"],
            "from 0 to 100, not 150",
        ),
        (["adult-mlp@v1", "--name", "cli-adult", "--weight", "5"], "needs a canary model"),
        (["adult-mlp@v1", "--name", "a/b"], "Invalid deployment name 'a/b'"),
        (["show", "nowhere"], "No deployment is named 'nowhere'"),
        (["rollback", "nowhere"], "No deployment is named 'nowhere'"),
        (["delete", "nowhere"], "No deployment is named 'nowhere'"),
    ],
)
def test_bad_deploy_input_exits_1_with_one_sentence_and_records_nothing(
    cli: Cli, models_home: Path, args: list[str], message: str
) -> None:
    assert_cli_error(cli("deploy", *args), message)
    assert json_out(cli("deploy", "list", "--deleted", "--json")) == []
    assert server_pids("cli-adult") == []


def test_deploy_help_lists_the_autoscale_options(cli: Cli) -> None:
    create = cli("deploy", "adult-mlp@v1", "--help")
    assert create.code == 0
    for option in ("--min-replicas", "--max-replicas", "--target-inflight", "--target-p99-ms"):
        assert option in create.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--min-replicas", "3", "--max-replicas", "2"], "cannot be more than --max-replicas"),
        (["--max-replicas", "2"], "both --min-replicas and --max-replicas"),
        (
            [
                "--min-replicas",
                "0",
                "--max-replicas",
                "2",
                "--target-inflight",
                "2",
                "--target-p99-ms",
                "100",
            ],
            "Choose one",
        ),
        (["--target-p99-ms", "100"], "needs replica bounds"),
    ],
)
def test_bad_autoscale_options_exit_1_with_one_sentence_and_record_nothing(
    cli: Cli, options: list[str], message: str
) -> None:
    assert_cli_error(cli("deploy", "adult-mlp@v1", "--name", "cli-auto", *options), message)
    assert json_out(cli("deploy", "list", "--json", "--deleted")) == []
