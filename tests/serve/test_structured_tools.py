from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from forgeml.core.errors import ConstraintFailedError, InvalidDataError, NotFoundError
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
    schema = calls_schema(TOOLS, max_calls=1)
    jsonschema.validators.Draft202012Validator.check_schema(schema)
    good = [{"name": "get_time", "arguments": {"zone": "UTC"}}]
    jsonschema.validate(good, schema)
    for bad in ([], good * 2, [{"name": "get_time", "arguments": {"city": "Oslo"}}]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    jsonschema.validate(good * 3, calls_schema(TOOLS, max_calls=3))
    with pytest.raises(jsonschema.ValidationError, match="is too long"):
        jsonschema.validate(good * 4, calls_schema(TOOLS, max_calls=3))


@pytest.mark.parametrize(
    ("fields", "server_cap", "max_items"),
    [
        ({}, 8, 8),  # the server's default cap
        ({"parallel_tool_calls": False}, 8, 1),
        ({"max_tool_calls": 3}, 8, 3),
        ({"max_tool_calls": 50}, 8, 8),  # never above the server's cap
        ({}, 2, 2),
        ({"parallel_tool_calls": False, "max_tool_calls": 5}, 8, 1),
    ],
)
def test_the_forced_call_schema_gets_max_items_from_the_request_or_the_server(
    smollm2: SmolLM2, fields: dict[str, Any], server_cap: int, max_items: int
) -> None:
    body = _request(tools=TOOLS, tool_choice="required", **fields)
    plan = plan_chat(body, smollm2.tokenizer, _ids(), server_cap)
    assert plan.schema is not None and plan.schema["maxItems"] == max_items
    assert plan.max_calls == max_items


def test_the_enforcer_allows_a_second_call_only_under_a_cap_above_one(smollm2: SmolLM2) -> None:
    one_call = '[{"name": "get_time", "arguments": {"zone": "UTC"}}'
    ids = smollm2.tokenizer.encode(one_call, add_special_tokens=False)
    commas = {}
    for cap in (1, 2):
        constraint = json_schema_constraint(smollm2.tokenizer, calls_schema(TOOLS, max_calls=cap))
        for end in range(len(ids)):  # token by token, as the decode loop asks
            constraint.allowed(ids[:end])
        allowed = constraint.allowed(ids)
        texts = [smollm2.tokenizer.decode([token]).lstrip() for token in allowed]
        commas[cap] = [text for text in texts if text.startswith(",")]
        assert any(text.startswith("]") for text in texts)  # the array may close either way
    assert commas[1] == [] and commas[2] != []


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


def test_auto_mode_returns_more_calls_than_allowed_as_text(smollm2: SmolLM2) -> None:
    plan = plan_chat(_request(tools=TOOLS, parallel_tool_calls=False), smollm2.tokenizer, _ids())
    call = '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>'
    assert plan.reply(call, "stop")[1] == "tool_calls"
    assert plan.reply(call + call, "stop") == (
        {"role": "assistant", "content": call + call},
        "stop",
    )


@pytest.mark.parametrize("mode", ["required", "named"])
def test_a_finished_constrained_call_off_its_schema_is_a_500_naming_the_cause(mode: str) -> None:
    schema = calls_schema(TOOLS, "get_time" if mode == "named" else None, 1)
    plan = ChatPlan("", None, mode, TOOLS, _ids(), schema, 1)
    with pytest.raises(ConstraintFailedError, match="does not match its JSON schema") as caught:
        plan.reply('[{"name": "rm_rf", "arguments": {}}]', "stop")
    assert caught.value.http_status == 500  # not a 4xx: the request was fine
    two = json.dumps([{"name": "get_time", "arguments": {"zone": "UTC"}}] * 2)
    with pytest.raises(ConstraintFailedError, match=r"at the top \('maxItems': .* is too long"):
        plan.reply(two, "stop")
    with pytest.raises(ConstraintFailedError, match="the reply is not JSON"):
        plan.reply('[{"name": "get_time"', "stop")
    message, reason = plan.reply('[{"name": "get_time", "arguments": {"zone": "U', "length")
    assert reason == "length" and message == {
        "role": "assistant",
        "content": '[{"name": "get_time", "arguments": {"zone": "U',
    }


def test_a_finished_json_reply_off_its_schema_is_a_500_and_a_cut_one_is_length() -> None:
    overlapping = {"oneOf": [{"type": "string", "maxLength": 20}, {"type": "string"}]}
    plan = ChatPlan("", None, "none", [], _ids(), overlapping)
    with pytest.raises(ConstraintFailedError) as caught:
        plan.reply('"Paris"', "stop")
    assert str(caught.value).startswith(
        "Constrained decoding failed: the reply does not match its JSON schema at the top "
        "('oneOf': 'Paris' is valid under each of "
    )
    assert str(caught.value).endswith("), which the decoder did not enforce.")
    assert plan.reply('"' + "x" * 30 + '"', "stop")[1] == "stop"
    assert plan.reply('"Par', "length") == ({"role": "assistant", "content": '"Par'}, "length")
    json_object = ChatPlan("", None, "none", [], _ids(), {"type": "object"})
    with pytest.raises(ConstraintFailedError, match=r"'type': \[1\] is not of type 'object'"):
        json_object.reply("[1]", "stop")


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
        ({"tools": TOOLS, "max_tool_calls": 0}, "Input should be greater than or equal to 1"),
        (
            {"response_format": {"type": "json_object"}, "stop": ["}"]},
            "'stop' cannot be combined with a JSON reply",
        ),
        (
            {"tools": TOOLS, "tool_choice": "required", "stop": "]"},
            "'stop' cannot be combined with a JSON reply",
        ),
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
