"""`forgeml agent run|approve|show` in remote mode: the server drives the run within its
budgets and the CLI follows it until it stops, printing what the local command prints."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from forgeml.auth import issue_token
from tests.agents import conftest as agents
from tests.agents.conftest import ChatServer
from tests.auth._accounts import fast_settings, person
from tests.cli._served import Forgeml, Served, served_on
from tests.cli.conftest import assert_cli_error
from tests.conftest import CliResult
from tests.tracking import conftest as tracking

# the fixtures of the agent and tracking tests, used here too
chat_server = agents.chat_server
mlflow_template = tracking.mlflow_template


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> Iterator[Served]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        with served_on("sqlite", tmp_path_factory) as home:
            shutil.copyfile(mlflow_template, home.home / "mlflow.db")
            yield home


def _spec(tmp_path: Path, chat: ChatServer, **tool: object) -> str:
    spec = {"model": {"url": chat.url, "name": "smol"}, "tools": [{"name": "calculator", **tool}]}
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def _run_id(result: CliResult) -> str:
    return result.stdout.split()[1].rstrip(":")


def _without(result: CliResult, run_id: str) -> tuple[int, str, str]:
    return result.code, result.stdout.replace(run_id, "RUN"), result.stderr.replace(run_id, "RUN")


def test_a_run_that_waits_then_is_approved_prints_alike(
    forgeml: Forgeml,
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, chat_server, requires_approval=True)
    outputs = []
    for side in (forgeml, forgeml.remote):
        chat_server.call("calculator", {"expression": "2 ** 10"})
        chat_server.say("2 to the 10th is 1024.")
        waiting = side("agent", "run", spec, "2 ** 10?")
        run_id = _run_id(waiting)
        approved = side("agent", "approve", run_id, "c1")
        outputs.append([_without(waiting, run_id), _without(approved, run_id)])
        # the run, saved under the home, shows alike on both sides
        assert forgeml("agent", "show", run_id, "--json").stdout == (
            forgeml.remote("agent", "show", run_id, "--json").stdout
        )

    local, remote = outputs
    assert remote == local
    assert "waiting: calculator" in local[0][1] and "1024" in local[1][1]


def test_a_run_out_of_steps_fails_alike(
    forgeml: Forgeml,
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, chat_server)
    results = []
    for side in (forgeml, forgeml.remote):
        chat_server.call("calculator", {"expression": "1 + 1"})
        result = side("agent", "run", spec, "loop", "--max-steps", "1", "--json")
        run_id = json.loads(result.stdout)["run_id"]
        results.append((result.code, result.stderr.replace(run_id, "RUN")))

    assert results[1] == results[0]
    assert results[0][0] == 1 and "stopped (max_steps)" in results[0][1]


def test_an_unknown_run_is_refused_alike(forgeml: Forgeml) -> None:
    local, remote = forgeml("agent", "show", "nosuch"), forgeml.remote("agent", "show", "nosuch")

    assert (remote.code, remote.stderr) == (local.code, local.stderr)
    assert local.code == 1


def test_a_remote_run_lands_in_the_callers_project_and_is_reached_there_only(
    forgeml: Forgeml, chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = forgeml.served
    person(served.workspace, fast_settings(tmp_path), "tara", "maintainer", "team-a")
    served.tokens["tara"] = issue_token(served.workspace, "tara", "cli", actor="tester")[1]
    spec = _spec(tmp_path, chat_server, requires_approval=True)
    chat_server.call("calculator", {"expression": "2 ** 10"})
    monkeypatch.setenv("FORGEML_PROJECT", "team-a")

    waiting = forgeml.remote("agent", "run", spec, "2 ** 10?", "--json", token="tara")

    assert waiting.code == 0, waiting
    run_id = json.loads(waiting.stdout)["run_id"]
    assert json.loads(waiting.stdout)["project"] == "team-a"
    # default's owner is no member of team-a: it neither reads nor approves the run
    monkeypatch.delenv("FORGEML_PROJECT")
    for command in (("show", run_id), ("approve", run_id, "c1")):
        refused = forgeml.remote("agent", *command)
        assert_cli_error(refused, f"olivia may not agents:{command[0].replace('show', 'read')}")
        assert "'team-a'" in refused.stderr
    monkeypatch.setenv("FORGEML_PROJECT", "team-a")
    chat_server.say("1024")
    done = forgeml.remote("agent", "approve", run_id, "c1", "--json", token="tara")
    assert (done.code, json.loads(done.stdout)["answer"]) == (0, "1024")
