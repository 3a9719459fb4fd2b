from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgeml.core.config import get_settings
from tests.agents.conftest import ChatServer
from tests.cli.conftest import assert_cli_error
from tests.conftest import CliResult

Cli = Any
ABOVE_ZERO = "Input should be greater than 0 (got 0)."


@pytest.fixture
def agent_cli(
    cli: Cli, tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch
) -> Cli:
    """The cli on a home whose MLflow database is a copy of the migrated template."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "home").mkdir()
    shutil.copyfile(mlflow_template, tmp_path / "home" / "mlflow.db")
    return cli


def write_spec(tmp_path: Path, chat: ChatServer, **extra: Any) -> Path:
    spec = {"model": {"url": chat.url, "name": "smol"}, "tools": [{"name": "calculator"}]}
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec | extra), encoding="utf-8")
    return path


def as_json(result: CliResult) -> dict[str, Any]:
    return json.loads(result.stdout)


def test_agent_run_calls_a_tool_through_the_openai_client_and_answers(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.call("calculator", {"expression": "6 * 7"})
    chat_server.say("6 times 7 is 42.")

    result = agent_cli("agent", "run", write_spec(tmp_path, chat_server), "6 times 7?", "--json")

    assert (result.code, result.stderr) == (0, "")
    reply = as_json(result)
    assert (reply["stop_reason"], reply["answer"], reply["steps"]) == (
        "answered",
        "6 times 7 is 42.",
        2,
    )
    assert len(reply["trace_ids"]) == 1
    first, second = chat_server.requests
    assert first["tools"][0]["function"]["name"] == "calculator"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "42"}

    shown = agent_cli("agent", "show", reply["run_id"], "--json")
    assert as_json(shown)["messages"] == reply["messages"]


def test_a_call_needing_approval_waits_for_agent_approve(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path
) -> None:
    spec = write_spec(
        tmp_path, chat_server, tools=[{"name": "calculator", "requires_approval": True}]
    )
    chat_server.call("calculator", {"expression": "2 ** 10"})

    waiting = agent_cli("agent", "run", spec, "2 to the 10th?")

    assert waiting.code == 0
    run_id = waiting.stdout.split()[1].rstrip(":")
    assert "awaiting_approval" in waiting.stdout
    assert f"forgeml agent approve {run_id} c1" in waiting.stdout

    chat_server.say("1024")
    done = agent_cli("agent", "approve", run_id, "c1", "--json")

    assert (done.code, as_json(done)["answer"]) == (0, "1024")
    assert chat_server.requests[-1]["messages"][-1]["content"] == "1024"

    again = agent_cli("agent", "approve", run_id, "c1")
    assert again.code == 1
    assert (
        again.stderr
        == f"error: Agent run {run_id} is not waiting for approval (it stopped: answered).\n"
    )


def test_a_spent_budget_is_exit_1_with_one_sentence_and_the_run_saved(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path
) -> None:
    for _ in range(3):
        chat_server.call("calculator", {"expression": "1 + 1"})

    result = agent_cli(
        "agent", "run", write_spec(tmp_path, chat_server), "loop", "--max-steps", "2", "--json"
    )

    assert result.code == 1
    reply = as_json(result)
    assert (reply["stop_reason"], reply["steps"]) == ("max_steps", 2)
    assert result.stderr == (
        f"error: Agent run {reply['run_id']} stopped (max_steps) without an answer.\n"
    )


@pytest.mark.parametrize(
    ("args", "extra", "sentence"),
    [
        (["--max-steps", "0"], {}, "key 'budgets.max_steps': " + ABOVE_ZERO),
        ([], {"budgets": {"max_tokens": 0}}, "key 'budgets.max_tokens': " + ABOVE_ZERO),
        (
            [],
            {"tools": [{"name": "shell"}]},
            "key 'tools.0.name': unknown tool 'shell' (built-in tools: "
            "calculator, http_get, predict, rag_search, sql_query).",
        ),
    ],
)
def test_a_zero_budget_or_an_unknown_tool_is_one_sentence_and_exit_1(
    cli: Cli,
    chat_server: ChatServer,
    tmp_path: Path,
    args: list[str],
    extra: dict[str, Any],
    sentence: str,
) -> None:
    spec = write_spec(tmp_path, chat_server, **extra)

    result = cli("agent", "run", spec, "task", *args)

    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"error: {spec}: {sentence}\n"
    assert chat_server.requests == []


def test_approve_without_anything_to_approve_is_a_usage_error(cli: Cli) -> None:
    result = cli("agent", "approve", "abc")

    assert result.code == 2
    assert result.stderr == "error: Name a CALL_ID to approve, --approve TOOL or --deny CALL_ID.\n"


def test_approving_a_tool_the_agent_does_not_have_is_a_usage_error(
    cli: Cli, chat_server: ChatServer, tmp_path: Path
) -> None:
    result = cli("agent", "run", write_spec(tmp_path, chat_server), "task", "--approve", "shell")

    assert result.code == 2
    assert (
        result.stderr
        == "error: Cannot approve shell: the agent has no such tool (tools: calculator).\n"
    )


def test_a_spec_whose_key_variable_is_unset_is_one_sentence_and_no_model_call(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGEML_TEST_NO_KEY", raising=False)
    spec = write_spec(tmp_path, chat_server)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["key_env"] = "FORGEML_TEST_NO_KEY"
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")

    result = agent_cli("agent", "run", spec, "task")

    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == (
        "error: The environment variable FORGEML_TEST_NO_KEY holding the API key is not set.\n"
    )
    assert chat_server.requests == []


def test_showing_a_run_that_was_never_saved_is_one_sentence_and_exit_1(cli: Cli) -> None:
    result = cli("agent", "show", "nosuch")

    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == "error: There is no saved agent run nosuch.\n"


def _in(monkeypatch: pytest.MonkeyPatch, project: str) -> None:
    monkeypatch.setenv("FORGEML_PROJECT", project)
    get_settings.cache_clear()


def test_a_run_belongs_to_forgeml_project_and_is_approved_there_only(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_spec(
        tmp_path, chat_server, tools=[{"name": "calculator", "requires_approval": True}]
    )
    chat_server.call("calculator", {"expression": "2 ** 10"})
    _in(monkeypatch, "team-a")
    waiting = as_json(agent_cli("agent", "run", spec, "2 to the 10th?", "--json"))
    run_id = waiting["run_id"]
    assert (waiting["stop_reason"], waiting["project"]) == ("awaiting_approval", "team-a")

    _in(monkeypatch, "team-b")
    refused = agent_cli("agent", "approve", run_id, "c1")

    assert_cli_error(refused, f"Agent run '{run_id}' belongs to the project 'team-a', not")
    # read by its id from any project, still waiting, its tool never run
    shown = as_json(agent_cli("agent", "show", run_id, "--json"))
    assert (shown["stop_reason"], len(chat_server.requests)) == ("awaiting_approval", 1)
    _in(monkeypatch, "team-a")
    chat_server.say("1024")
    done = agent_cli("agent", "approve", run_id, "c1", "--json")
    assert (done.code, as_json(done)["answer"]) == (0, "1024")


def test_a_runs_tools_reach_forgeml_projects_indexes_only(
    agent_cli: Cli, chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days.\n")
    _in(monkeypatch, "team-a")
    assert agent_cli("rag", "index", "kb-a", docs).code == 0
    spec = write_spec(
        tmp_path, chat_server, tools=[{"name": "rag_search", "options": {"index": "kb-a"}}]
    )
    _in(monkeypatch, "team-b")

    refused = agent_cli("agent", "run", spec, "Refunds?")

    assert_cli_error(refused, "RAG index 'kb-a' belongs to the project 'team-a', not 'team-b'")
    assert chat_server.requests == []
    assert not (tmp_path / "home" / "agents" / "runs").exists() or not list(
        (tmp_path / "home" / "agents" / "runs").glob("*.json")
    )
