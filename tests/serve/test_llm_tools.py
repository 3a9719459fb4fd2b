"""Tools and JSON replies end to end: the served SmolLM2 through the real `openai` client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest

from forgeml.prompts.client import ChatClient, ToolCall
from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)
from tests.serve.conftest import LiveServer

pytestmark = pytest.mark.slow

TIME_PARAMETERS = {
    "type": "object",
    "properties": {"zone": {"type": "string", "maxLength": 20}},
    "required": ["zone"],
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a time zone.",
        "parameters": TIME_PARAMETERS,
    },
}
ASK_TIME = [{"role": "user", "content": "What time is it in Tokyo?"}]
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "big": {"type": "boolean"}},
    "required": ["city", "big"],
}


@pytest.fixture(scope="module")
def server(smollm2_server: LiveServer) -> LiveServer:
    return smollm2_server


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
        yield client


def _create(client: openai.OpenAI, **options: Any) -> Any:
    settings: dict[str, Any] = {"model": "smollm2", "temperature": 0, "max_tokens": 48}
    return client.chat.completions.create(**{**settings, **options})


def _assert_valid_call(name: str, arguments: str) -> None:
    assert name == "get_time"
    jsonschema.validate(json.loads(arguments), TIME_PARAMETERS)


def test_a_json_schema_reply_parses_validates_and_streams_token_by_token(
    client: openai.OpenAI,
) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}
    reply = _create(
        client,
        messages=[{"role": "user", "content": "Name a big city as JSON."}],
        response_format=response_format,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    jsonschema.validate(json.loads(choice.message.content), CITY)

    streamed = _create(
        client,
        messages=[{"role": "user", "content": "Name a big city as JSON."}],
        response_format=response_format,
        stream=True,
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in streamed]
    assert len(pieces) > 3 and "".join(pieces) == choice.message.content


def test_required_tool_choice_calls_a_declared_tool_and_the_result_gets_a_text_reply(
    client: openai.OpenAI,
) -> None:
    reply = _create(client, messages=ASK_TIME, tools=[TIME], tool_choice="required")
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    _assert_valid_call(call.function.name, call.function.arguments)

    answered = [
        *ASK_TIME,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "09:30"},
    ]
    second = _create(client, messages=answered, tools=[TIME], tool_choice="none")
    assert second.choices[0].finish_reason in ("stop", "length")
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content


def test_a_streamed_reply_with_tools_sends_the_calls_in_one_chunk_at_the_end(
    client: openai.OpenAI,
) -> None:
    chunks = list(
        _create(
            client,
            messages=ASK_TIME,
            tools=[TIME],
            tool_choice={"type": "function", "function": {"name": "get_time"}},
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    with_calls = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].delta.tool_calls]
    assert len(with_calls) == 1
    [call] = with_calls[0].choices[0].delta.tool_calls
    assert call.index == 0 and call.id.startswith("call_")
    _assert_valid_call(call.function.name, call.function.arguments)
    finishes = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices]
    assert finishes[-1] == "tool_calls" and chunks[-1].usage.completion_tokens > 0


def test_the_chat_client_gets_the_calls_as_tool_call_records(server: LiveServer) -> None:
    model = ChatClient(f"{server.url}/v1", "smollm2", max_retries=0)
    reply = model.chat(ASK_TIME, tools=[TIME], tool_choice="required", max_tokens=48)
    assert reply.finish_reason == "tool_calls" and reply.content is None
    [call] = reply.tool_calls
    assert isinstance(call, ToolCall) and call.id.startswith("call_")
    _assert_valid_call(call.name, call.arguments)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
        },
    },
}
THREE_CITIES = [
    {
        "role": "user",
        "content": "What is the weather in Paris, in London and in Tokyo? "
        "Call get_weather once for each city.",
    }
]


def test_parallel_tool_calls_false_makes_one_call_and_max_tool_calls_caps_the_rest(
    client: openai.OpenAI,
) -> None:
    forced = {"messages": THREE_CITIES, "tools": [WEATHER], "tool_choice": "required"}
    # unbounded by a small cap, SmolLM2 goes on calling until max_tokens cuts it
    uncapped = _create(client, **forced, max_tokens=64)
    assert uncapped.choices[0].finish_reason == "length"
    assert uncapped.choices[0].message.content.count('"get_weather"') >= 3

    one = _create(client, **forced, parallel_tool_calls=False, max_tokens=96)
    two = _create(client, **forced, extra_body={"max_tool_calls": 2}, max_tokens=96)

    for reply, count in ((one, 1), (two, 2)):
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert [call.function.name for call in choice.message.tool_calls] == ["get_weather"] * count
        for call in choice.message.tool_calls:
            jsonschema.validate(
                json.loads(call.function.arguments), WEATHER["function"]["parameters"]
            )


def test_a_constrained_reply_cut_by_max_tokens_finishes_length_with_its_text(
    client: openai.OpenAI,
) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}
    cut = _create(
        client,
        messages=[{"role": "user", "content": "Name a big city as JSON."}],
        response_format=response_format,
        max_tokens=4,
    )
    forced = _create(client, messages=ASK_TIME, tools=[TIME], tool_choice="required", max_tokens=4)

    for reply in (cut, forced):
        choice = reply.choices[0]
        assert choice.finish_reason == "length" and choice.message.tool_calls is None
        assert reply.usage.completion_tokens == 4
        with pytest.raises(json.JSONDecodeError):
            json.loads(choice.message.content)


# the enforcer decodes `oneOf` as `anyOf`: a whole number matches both branches, which
# `oneOf` forbids, so the finished reply does not validate and the server says so
OVERLAPPING = {
    "type": "object",
    "properties": {"legs": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
    "required": ["legs"],
}


@pytest.mark.parametrize("stream", [False, True])
def test_a_finished_reply_off_its_schema_is_a_500_naming_the_cause(
    client: openai.OpenAI, stream: bool
) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "l", "schema": OVERLAPPING}}
    with pytest.raises(openai.APIError) as caught:
        reply = _create(
            client,
            messages=[{"role": "user", "content": "How many legs has a spider? Answer as JSON."}],
            response_format=response_format,
            max_tokens=16,
            seed=7,
            stream=stream,
        )
        if stream:
            list(reply)

    if not stream:
        assert isinstance(caught.value, openai.InternalServerError)
        assert caught.value.status_code == 500
    assert (
        "Constrained decoding failed: the reply does not match its JSON schema at legs "
        "('oneOf': " in caught.value.message
    )
    assert "is valid under each of" in caught.value.message
