"""A chat request's plan for an instruct LM: its prompt, its constraint, its reply's shape.

`plan_chat(body, tokenizer)` renders the prompt (tools declared unless `tool_choice` is
"none"), and picks the schema the reply is decoded under: the tool-calls schema for
"required" or a named function (at most `body.tool_call_limit(server cap)` calls), else
the `response_format`'s (`json_object` or `json_schema`), else none. The decode loop
generates under `plan.constraint`; `plan.reply(text, finish_reason)` then makes the
choice's `message` and `finish_reason`: tool calls (finish "tool_calls") or content.

A constrained reply cut by `max_tokens` is answered as OpenAI does: finish "length" and
the partial text as content. One that finished is checked against its schema
(`structured.check_reply`); if it does not validate, the decoder failed, and the request
gets a 500 naming the cause (`ConstraintFailedError`), never an invalid body presented as
valid. With "auto" the model may write `<tool_call>` blocks of its own accord; a block that
does not parse, is off its tool's schema, or makes more calls than allowed is returned as
content rather than failing the request (as vLLM's Hermes parser does).

`plan_for(generator, body)` is the routes' entry: a Hugging Face model (one with a
`tokenizer`) is planned as above; a byte-level model has no tokenizer to constrain or to
declare tools with, so a request for tools or a JSON reply is refused with a 400.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forgeml.core.errors import ConfigError, ConstraintFailedError, InvalidDataError
from forgeml.serve.protocols.openai._requests import (
    ChatCompletionRequest,
    JsonObjectFormat,
    JsonSchemaResponseFormat,
    NamedToolChoice,
)
from forgeml.serve.structured import check_reply, json_schema_constraint
from forgeml.serve.tokens import LanguageGenerator, TokenConstraint
from forgeml.serve.tool_calls import (
    DEFAULT_MAX_TOOL_CALLS,
    ParsedCall,
    calls_schema,
    new_call_id,
    parse_tool_calls,
    text_before_calls,
)
from forgeml.serve.tool_prompt import render_chat

__all__ = ["ChatPlan", "chat_messages", "plan_chat", "plan_for", "reply_deltas", "tool_call_dict"]


@dataclass(frozen=True)
class ChatPlan:
    """How to answer one chat request: the prompt, the constraint, how to read the reply.

    Attributes:
        prompt: The rendered conversation, ending where the reply starts.
        constraint: What the decode loop masks each step to, or None.
        tool_mode: "none", "auto", "required" or "named".
        tools: The request's tools as OpenAI dicts ([] without tools).
        new_id: Makes tool call ids (`call_<hex>`); tests pass their own.
        schema: The JSON schema the reply is decoded under (None: free text).
        max_calls: The most tool calls the reply may make.
    """

    prompt: str
    constraint: TokenConstraint | None
    tool_mode: str
    tools: list[dict[str, Any]]
    new_id: Callable[[], str] = field(default=new_call_id)
    schema: dict[str, Any] | None = None
    max_calls: int = DEFAULT_MAX_TOOL_CALLS

    def reply(self, text: str, finish_reason: str) -> tuple[dict[str, Any], str]:
        """The choice's `message` and `finish_reason` for the generated `text`.

        Raises:
            ConstraintFailedError: a constrained reply that finished yet does not match its
                schema (or a forced call that does not parse): the decoder's fault, not
                the request's, so the server answers 500 naming the cause.
        """
        content = {"role": "assistant", "content": text}
        if self.schema is not None:
            if finish_reason == "length":  # cut at max_tokens: what was written, as OpenAI
                return content, "length"
            check_reply(text, self.schema)
        calls: list[ParsedCall] = []
        if self.tool_mode in ("required", "named"):
            try:
                calls = parse_tool_calls(text, self.tools, self.new_id)
            except InvalidDataError as error:
                raise ConstraintFailedError(
                    f"Constrained decoding failed: the forced tool call does not parse: {error}"
                ) from None
        elif self.tool_mode == "auto" and "<tool_call>" in text:
            try:
                calls = parse_tool_calls(text, self.tools, self.new_id)
            except InvalidDataError:
                calls = []  # not a usable call: the text is the answer
            if len(calls) > self.max_calls:
                calls = []  # more calls than the request allows: not usable either
        if not calls:
            return content, finish_reason
        before = text_before_calls(text) if self.tool_mode == "auto" else ""
        message = {
            "role": "assistant",
            "content": before or None,
            "tool_calls": [tool_call_dict(call) for call in calls],
        }
        return message, "tool_calls"


def tool_call_dict(call: ParsedCall) -> dict[str, Any]:
    """A parsed call in OpenAI's `message.tool_calls` shape."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _message_dicts(body: ChatCompletionRequest) -> list[dict[str, Any]]:
    messages = []
    for message in body.messages:
        shaped = message.model_dump(exclude_none=True, exclude={"content"})
        messages.append({**shaped, "content": message.text()})
    return messages


def _schema(
    body: ChatCompletionRequest, tools: list[dict[str, Any]], mode: str, max_calls: int
) -> dict[str, Any] | None:
    """The JSON schema the reply is decoded under, or None for free text."""
    if mode in ("required", "named"):
        choice = body.tool_choice
        name = choice.function.name if isinstance(choice, NamedToolChoice) else None
        return calls_schema(tools, name, max_calls)
    response_format = body.response_format
    if isinstance(response_format, JsonObjectFormat):
        return {"type": "object"}
    if isinstance(response_format, JsonSchemaResponseFormat):
        return response_format.json_schema.schema_ or {}
    return None


def plan_chat(
    body: ChatCompletionRequest,
    tokenizer: Any,
    new_id: Callable[[], str] = new_call_id,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> ChatPlan:
    """The plan for answering `body` with a model whose tokenizer is `tokenizer`.

    Args:
        body: The validated chat completion request.
        tokenizer: The model's Hugging Face tokenizer (its chat template renders).
        new_id: Makes tool call ids.
        max_tool_calls: The server's cap on the calls of one reply.

    Returns:
        The prompt, the constraint (None when the reply is free text) and `reply`.

    Raises:
        ConfigError: the tokenizer has no chat template, or a schema cannot be enforced.
    """
    tools = [tool.model_dump(exclude_none=True) for tool in body.tools or []]
    mode = body.tool_mode()
    max_calls = body.tool_call_limit(max_tool_calls)
    prompt = render_chat(tokenizer, _message_dicts(body), tools if mode != "none" else None)
    schema = _schema(body, tools, mode, max_calls)
    constraint = None if schema is None else json_schema_constraint(tokenizer, schema)
    return ChatPlan(prompt, constraint, mode, tools, new_id, schema, max_calls)


def plan_for(
    generator: LanguageGenerator,
    body: ChatCompletionRequest,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> ChatPlan:
    """The plan for answering `body` with `generator`, whatever kind of model it is.

    `max_tool_calls` is the server's cap on the calls of one reply.

    Raises:
        ConfigError: a model without a tokenizer (byte-level) was asked for tools or a
            JSON reply, or a Hugging Face model's tokenizer has no chat template.
    """
    tokenizer = getattr(generator, "tokenizer", None)
    if tokenizer is not None:
        return plan_chat(body, tokenizer, max_tool_calls=max_tool_calls)
    wanted = _structured_fields(body)
    if wanted:
        raise ConfigError(
            f"The model '{body.model}' is a byte-level model without a tokenizer, so it "
            f"cannot honour {wanted}; send the request without it."
        )
    return ChatPlan(generator.chat_prompt(chat_messages(body)), None, "none", [])


def chat_messages(body: ChatCompletionRequest) -> list[dict[str, str]]:
    """The request's messages as chat-template turns (`developer` is a system turn)."""
    roles = {"developer": "system"}
    return [
        {"role": roles.get(message.role, message.role), "content": message.text()}
        for message in body.messages
    ]


def _structured_fields(body: ChatCompletionRequest) -> str:
    """What of `body` needs a tokenizer ("" when nothing does)."""
    if body.tools and body.tool_mode() != "none":
        return "'tools'"
    response_format = body.response_format
    if isinstance(response_format, JsonSchemaResponseFormat):
        return "'response_format' json_schema"
    if isinstance(response_format, JsonObjectFormat):
        return "'response_format' json_object"
    return ""


def reply_deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished reply `message` as the `delta`s of its streamed chunks (after the role).

    Content comes first; tool calls follow in one delta, each with its `index`, as
    OpenAI's `delta.tool_calls` carry them.
    """
    deltas: list[dict[str, Any]] = []
    if message.get("content"):
        deltas.append({"content": message["content"]})
    calls = message.get("tool_calls") or []
    if calls:
        deltas.append({"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]})
    return deltas
