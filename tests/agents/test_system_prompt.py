"""An agent's system prompt from the prompt registry: rendered once, recorded as NAME@vN."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgeml.agents import AgentSpec, RunState, ToolRegistry, run_loop
from forgeml.agents.calculator import calculator_tool
from forgeml.agents.state import load_state, save_state
from tests.agents.conftest import (
    BUDGETS,
    ChatServer,
    RecordingTracer,
    ScriptedModel,
    calls,
    new_state,
    text,
)
from tests.agents.test_cli import agent_cli, as_json, write_spec  # noqa: F401  (the fixture)

Cli = Any
HEADER = "x-forgeml-prompt"


def create_prompt(cli: Cli, tmp_path: Path, name: str, content: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    result = cli("prompts", "create", name, "--file", path, "--json")
    assert (result.code, result.stderr) == (0, "")
    return str(json.loads(result.stdout)["ref"])


TEXT_PROMPT = {
    "template": "You help {{ team }} with: {{ task }}",
    "variables": [{"name": "team"}, {"name": "task"}],
}


def saved_runs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home" / "agents" / "runs").glob("*.json"))


def test_a_text_prompt_is_the_system_message_and_every_call_carries_its_version(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    create_prompt(agent_cli, tmp_path, "helper", TEXT_PROMPT)
    spec = write_spec(
        tmp_path, chat_server, system_prompt="helper", system_variables={"team": "finance"}
    )
    chat_server.call("calculator", {"expression": "6 * 7"})
    chat_server.say("42.")

    result = agent_cli("agent", "run", spec, "6 times 7?", "--json")

    assert (result.code, result.stderr) == (0, "")
    reply = as_json(result)
    assert reply["prompt_ref"] == "helper@v1"
    first, second = chat_server.requests
    assert first["messages"] == [
        {"role": "system", "content": "You help finance with: 6 times 7?"},
        {"role": "user", "content": "6 times 7?"},
    ]
    assert second["messages"][0] == first["messages"][0]
    assert [headers.get(HEADER) for headers in chat_server.headers] == ["helper@v1"] * 2
    shown = as_json(agent_cli("agent", "show", reply["run_id"], "--json"))
    assert shown["prompt_ref"] == "helper@v1"


def test_a_chat_prompts_messages_go_before_the_task(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    create_prompt(
        agent_cli,
        tmp_path,
        "fewshot",
        {
            "messages": [
                {"role": "system", "template": "Answer in {{ n }} words."},
                {"role": "user", "template": "2 + 2?"},
                {"role": "assistant", "template": "Four."},
            ],
            "variables": [{"name": "n", "type": "integer"}],
        },
    )
    spec = write_spec(tmp_path, chat_server, system_prompt="fewshot@v1", system_variables={"n": 3})
    chat_server.say("It is 42.")

    result = agent_cli("agent", "run", spec, "6 times 7?", "--json")

    assert (result.code, result.stderr) == (0, "")
    assert chat_server.requests[0]["messages"] == [
        {"role": "system", "content": "Answer in 3 words."},
        {"role": "user", "content": "2 + 2?"},
        {"role": "assistant", "content": "Four."},
        {"role": "user", "content": "6 times 7?"},
    ]
    assert chat_server.headers[0][HEADER] == "fewshot@v1"


def test_a_resumed_run_keeps_its_prompt_version_when_the_alias_moved(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    create_prompt(agent_cli, tmp_path, "helper", TEXT_PROMPT)
    assert agent_cli("prompts", "alias", "helper@v1", "production").code == 0
    spec = write_spec(
        tmp_path,
        chat_server,
        system_prompt="helper@production",
        system_variables={"team": "ops"},
        tools=[{"name": "calculator", "requires_approval": True}],
    )
    chat_server.call("calculator", {"expression": "2 ** 10"})
    waiting = as_json(agent_cli("agent", "run", spec, "2 to the 10th?", "--json"))
    assert (waiting["stop_reason"], waiting["prompt_ref"]) == ("awaiting_approval", "helper@v1")

    moved = dict(TEXT_PROMPT, template="Changed: {{ team }} {{ task }}")
    assert create_prompt(agent_cli, tmp_path, "helper", moved) == "helper@v2"
    assert agent_cli("prompts", "alias", "helper@v2", "production").code == 0
    chat_server.say("1024")
    done = as_json(agent_cli("agent", "approve", waiting["run_id"], "c1", "--json"))

    assert (done["stop_reason"], done["prompt_ref"]) == ("answered", "helper@v1")
    assert [headers[HEADER] for headers in chat_server.headers] == ["helper@v1"] * 2
    assert chat_server.requests[1]["messages"][0]["content"] == "You help ops with: 2 to the 10th?"


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (
            {"system_prompt": "nosuch"},
            "Cannot use system_prompt nosuch: Prompt 'nosuch' does not exist "
            "(see `forgeml prompts list`).",
        ),
        (
            {"system_prompt": "helper@v7", "system_variables": {"team": "x"}},
            "Cannot use system_prompt helper@v7: Prompt 'helper' has no version v7 "
            "(its versions are v1..v1).",
        ),
        (
            {"system_prompt": "helper@staging", "system_variables": {"team": "x"}},
            "Cannot use system_prompt helper@staging: Prompt 'helper' has no alias 'staging' "
            "(its aliases: none).",
        ),
        ({"system_prompt": "helper"}, "Prompt helper@v1 needs the variable 'team'."),
        (
            {"system_prompt": "helper", "system_variables": {"team": "x", "tone": "dry"}},
            "Prompt helper@v1 has no variable 'tone' (it declares: task, team).",
        ),
    ],
)
def test_a_bad_ref_or_variable_is_one_sentence_exit_1_and_nothing_saved(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
    extra: dict[str, Any],
    sentence: str,
) -> None:
    create_prompt(agent_cli, tmp_path, "helper", TEXT_PROMPT)

    result = agent_cli("agent", "run", write_spec(tmp_path, chat_server, **extra), "task")

    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"error: {sentence}\n"
    assert chat_server.requests == []
    assert saved_runs(tmp_path) == []


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (
            {"system": "Be brief.", "system_prompt": "helper"},
            "key 'system_prompt': give either 'system' or 'system_prompt', not both.",
        ),
        (
            {"system_variables": {"team": "x"}},
            "key 'system_variables': give them with a 'system_prompt' to render.",
        ),
        (
            {"system_prompt": "helper", "system_variables": {"task": "x"}},
            "key 'system_variables.task': the run's task fills 'task'; remove it.",
        ),
        (
            {"system_prompt": "helper@no/pe"},
            "key 'system_prompt': 'helper@no/pe' is not NAME, NAME@vN or NAME@ALIAS.",
        ),
        (
            {"system_prompt": "../x"},
            "key 'system_prompt': Invalid prompt name '../x': use letters, digits, '.', '_' "
            "or '-' (start with a letter or digit, no '/' or '..', at most 128 characters).",
        ),
    ],
)
def test_a_spec_mixing_system_keys_or_a_malformed_ref_is_refused_when_loaded(
    cli: Cli, chat_server: ChatServer, tmp_path: Path, extra: dict[str, Any], sentence: str
) -> None:
    spec = write_spec(tmp_path, chat_server, **extra)

    result = cli("agent", "run", spec, "task")

    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"error: {spec}: {sentence}\n"
    assert chat_server.requests == []


def test_a_state_saved_before_prompt_refs_still_loads(tmp_path: Path) -> None:
    state = RunState(run_id="old", spec={}, messages=[])
    save_state(tmp_path, state)
    path = tmp_path / "agents" / "runs" / "old.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["prompt_ref"]
    path.write_text(json.dumps(data), encoding="utf-8")

    assert load_state(tmp_path, "old").prompt_ref is None


def test_a_spec_with_a_system_prompt_survives_its_saved_round_trip() -> None:
    spec = AgentSpec.model_validate(
        {"model": {"url": "http://x/v1", "name": "m"}, "system_prompt": "helper@v2"}
    )

    assert AgentSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_every_chat_span_and_model_call_of_the_run_carries_its_prompt_version() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "2 + 2"})), text("4")])
    tracer = RecordingTracer()
    state = new_state()
    state.prompt_ref = "helper@v3"

    run_loop(model, ToolRegistry([calculator_tool(False)]), state, BUDGETS, tracer=tracer)

    assert [seen["prompt"] for seen in model.seen] == ["helper@v3", "helper@v3"]
    by_kind = {}
    for span in tracer.spans:
        by_kind.setdefault(span["kind"], []).append(span["attributes"].get("forgeml.prompt"))
    assert by_kind["CHAT_MODEL"] == ["helper@v3", "helper@v3"]
    assert by_kind["AGENT"] == ["helper@v3"]


def test_a_run_with_the_specs_own_system_sends_no_prompt_version() -> None:
    model = ScriptedModel([text("4")])
    tracer = RecordingTracer()

    run_loop(model, ToolRegistry([]), new_state(), BUDGETS, tracer=tracer)

    assert model.seen[0]["prompt"] is None
    assert all("forgeml.prompt" not in span["attributes"] for span in tracer.spans)
