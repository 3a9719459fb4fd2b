from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from forgeml.core.errors import ForgemlError, InvalidDataError, NotFoundError
from forgeml.serve.protocols.openai._requests import ChatCompletionRequest
from forgeml.serve.protocols.openai._tools import ChatPlan, plan_chat
from forgeml.serve.structured import json_schema_constraint
from forgeml.serve.tool_calls import calls_schema, parse_tool_calls
from forgeml.serve.tool_prompt import render_chat
from tests.serve._smollm2 import SmolLM2, greedy, load_smollm2

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 20}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]


@pytest.fixture(scope="session")
def smollm2(smollm2_bundle: Path) -> SmolLM2:
    return load_smollm2(smollm2_bundle)


def _ids() -> Any:
    counter = itertools.count()
    return lambda: f"call_{next(counter):024x}"


def _request(**fields: Any) -> ChatCompletionRequest:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    return ChatCompletionRequest.model_validate({**body, **fields})


@pytest.mark.parametrize(
    ("choice", "names"),
    [
        ("required", {"get_weather", "get_time"}),
        ({"type": "function", "function": {"name": "get_time"}}, {"get_time"}),
    ],
)
def test_forced_tool_call_is_a_valid_call_of_a_declared_tool(
    smollm2: SmolLM2, choice: Any, names: set[str]
) -> None:
    body = _request(tools=TOOLS, tool_choice=choice, parallel_tool_calls=False)
    plan = plan_chat(body, smollm2.tokenizer, _ids())
    text, finish = greedy(smollm2, plan.prompt, plan.constraint, 48)
    message, reason = plan.reply(text, finish)
    assert reason == "tool_calls"
    [call] = message["tool_calls"]
    assert call["id"] == "call_" + "0" * 24 and call["type"] == "function"
    assert call["function"]["name"] in names
    tool = next(t for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    jsonschema.validate(json.loads(call["function"]["arguments"]), tool["function"]["parameters"])


def test_calls_schema_is_an_array_of_any_declared_call() -> None:
    schema = calls_schema(TOOLS, parallel=False)
    jsonschema.validators.Draft202012Validator.check_schema(schema)
    good = [{"name": "get_time", "arguments": {"zone": "UTC"}}]
    jsonschema.validate(good, schema)
    for bad in ([], good * 2, [{"name": "get_time", "arguments": {"city": "Oslo"}}]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_calls_schema_hoists_tool_definitions_to_its_root() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"when": {"$ref": "#/$defs/day"}},
                "required": ["when"],
                "$defs": {"day": {"enum": ["mon", "tue"]}},
            },
        },
    }
    schema = calls_schema([tool], "book")
    assert schema["$defs"] == {"day": {"enum": ["mon", "tue"]}}
    jsonschema.validate([{"name": "book", "arguments": {"when": "mon"}}], schema)


def test_parser_reads_tool_call_blocks_and_bare_arrays() -> None:
    call_json = '{"name": "get_time", "arguments": {"zone": "UTC"}}'
    text = f"Let me check.\n<tool_call>\n{call_json}\n</tool_call>"
    [call] = parse_tool_calls(text, TOOLS, _ids())
    assert (call.name, json.loads(call.arguments)) == ("get_time", {"zone": "UTC"})
    bare = '[{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}]'
    assert [c.name for c in parse_tool_calls(bare, TOOLS)] == ["get_weather"]
    assert parse_tool_calls("It is sunny.", TOOLS) == []


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
            "The arguments of the call to 'get_weather' are off its schema at the top: "
            "'unit' is a required property.",
        ),
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "K"}}',
            "The arguments of the call to 'get_weather' are off its schema at unit: 'K' is "
            "not one of ['celsius', 'fahrenheit'].",
        ),
        (
            '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
            "The model called 'rm_rf', which is not a declared tool.",
        ),
        (
            '<tool_call>{"name": "get_time", "arguments": {"zone": </tool_call>',
            "The model's tool call is not valid JSON (Expecting value at character 42).",
        ),
    ],
)
def test_parser_rejects_a_bad_call_with_one_sentence(text: str, sentence: str) -> None:
    with pytest.raises(InvalidDataError) as caught:
        parse_tool_calls(text, TOOLS)
    assert str(caught.value) == sentence


def test_auto_mode_returns_an_off_schema_call_as_text(smollm2: SmolLM2) -> None:
    plan = plan_chat(_request(tools=TOOLS), smollm2.tokenizer, _ids())
    assert plan.constraint is None and "<tools>" in plan.prompt
    off = '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    assert plan.reply(off, "stop") == ({"role": "assistant", "content": off}, "stop")
    good = 'Sure.<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>'
    message, reason = plan.reply(good, "stop")
    assert reason == "tool_calls" and message["content"] == "Sure."


@pytest.mark.parametrize("mode", ["required", "named"])
def test_a_finished_constrained_call_that_does_not_parse_is_a_server_bug(mode: str) -> None:
    plan = ChatPlan("", None, mode, TOOLS, _ids())
    with pytest.raises(RuntimeError, match="constrained tool-call reply does not parse") as caught:
        plan.reply('[{"name": "rm_rf", "arguments": {}}]', "stop")
    assert not isinstance(caught.value, ForgemlError)  # not a 4xx: the request was fine
    message, reason = plan.reply('[{"name": "get_time", "arguments": {"zone": "U', "length")
    assert reason == "length" and message["content"].startswith('[{"name"')


def test_tool_turns_render_back_into_the_prompt(smollm2: SmolLM2) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'},
    }
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    ]
    prompt = render_chat(smollm2.tokenizer, messages, TOOLS)
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\nYou are a function calling")
    assert '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>' in prompt
    assert "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tool_choice_none_hides_the_tools(smollm2: SmolLM2) -> None:
    plan = plan_chat(_request(tools=TOOLS, tool_choice="none"), smollm2.tokenizer)
    assert "<tools>" not in plan.prompt and plan.constraint is None


def test_response_format_json_schema_constrains_the_reply(smollm2: SmolLM2) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    body = _request(
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    )
    plan = plan_chat(body, smollm2.tokenizer)
    # what it generates is proved in test_structured.py and, served, in test_llm_tools.py
    assert plan.constraint is not None and plan.tool_mode == "none"
    assert plan.constraint.allowed([]) == json_schema_constraint(smollm2.tokenizer, schema).allowed(
        []
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "the function 'nope' is not in tools",
        ),
        ({"tool_choice": "required"}, "'required' or a named function needs 'tools'"),
        ({"tools": [WEATHER, WEATHER]}, "the function 'get_weather' is declared twice"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "String should match pattern",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "s", "schema": {"type": "integer", "minimum": 1}},
                }
            },
            "The JSON schema uses 'minimum' at #",
        ),
        (
            {"messages": [{"role": "tool", "content": "12:00"}]},
            "a message with role 'tool' needs the 'tool_call_id' it answers",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "tool", "tool_call_id": "call_9", "content": "x"},
                ]
            },
            "the tool message for 'call_9' does not answer a tool call",
        ),
        (
            {"messages": [{"role": "user", "content": "hi", "tool_calls": []}]},
            "only an assistant message can carry 'tool_calls'",
        ),
        ({"response_format": {"type": "yaml"}}, "does not match any of the expected tags"),
    ],
)
def test_request_validation_names_the_problem(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _request(**fields)
    assert message in str(caught.value)


def test_a_valid_tool_request_parses() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    body = _request(
        messages=[
            {"role": "user", "content": "Time?"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        ],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        response_format={"type": "json_object"},
    )
    assert body.tool_mode() == "named" and body.parallel_tool_calls
    assert _request().tool_mode() == "none" and _request(tools=TOOLS).tool_mode() == "auto"


class _NoModels:
    """A server with no models: request validation answers before any model is looked up."""

    def names(self) -> list[str]:
        return []

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        raise NotFoundError(f"The model '{name}' does not exist on this server.")

    def generator(self, name: str) -> Any:
        raise NotFoundError(f"The model '{name}' does not exist on this server.")


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
            "'tool_choice': the function 'nope' is not in tools.",
        ),
        (
            {"response_format": {"type": "json_object"}, "tool_choice": "required"},
            "tool_choice",
            "'tool_choice': 'required' or a named function needs 'tools'.",
        ),
    ],
)
def test_the_route_answers_a_bad_tool_request_with_a_400_naming_it(
    fields: dict[str, Any], param: str, message: str
) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from forgeml.serve.protocols.openai import router

    app = FastAPI()
    app.include_router(router(_NoModels()))
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], **fields}
    with TestClient(app) as http:
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["message"]) == (param, message)
