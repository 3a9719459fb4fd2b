"""OpenAI-compatible routes: /v1/models, /v1/embeddings, /v1/completions, /v1/chat/completions.

Request and response bodies follow OpenAI's API reference
(https://platform.openai.com/docs/api-reference), so the `openai` client works unchanged.
Fields the reference defines but these models cannot honour (logprobs, penalties,
logit_bias, user, ...) are accepted and ignored; invalid values are a 400 in
OpenAI's error shape `{"error": {"message", "type", "param", "code"}}`, and an unknown
model a 404 with code "model_not_found".

Chat messages become one prompt with the model's own chat format: a Hugging Face model's
chat template, with `tools` declared in it (`_tools.plan_chat`), or for the byte-level
models one line `ROLE: CONTENT` per message, then `assistant:`. A Hugging Face model
honours `tools`, `tool_choice` and `response_format` by constrained decoding; its reply
carries `message.tool_calls` and finish reason "tool_calls" when it calls tools. A streamed
request with tools is generated whole first (a call is only known once it parses) and then
sent as content and one `delta.tool_calls` chunk. The byte-level models have no tokenizer
to do this with, and answer such requests with a 400. The reply ends
at the model's end of turn (its EOS, or a new "\\nuser:" line), at `max_tokens`, or at a
requested stop string.

Token counts in `usage` are the model tokenizer's (one token per UTF-8 byte for the
byte-level models); for embeddings they are an estimate (words), as the encoder's
tokenizer belongs to the runtime behind `OpenAIModels.embed`.

Generation runs off the event loop (a Hugging Face model's decode thread batches
concurrent requests); a streamed reply pulls each piece from the thread pool and sends it
as a server-sent event (`data: {...}`), ending with `data: [DONE]`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, Protocol

from fastapi import APIRouter, Request, Response

from forgeml.core.errors import NotFoundError
from forgeml.serve.protocols.openai._chat import chat as _chat
from forgeml.serve.protocols.openai._completions import completions as _completions
from forgeml.serve.protocols.openai._embeddings import embeddings as _embeddings
from forgeml.serve.protocols.openai._errors import ERROR_RESPONSES, OpenAIRoute
from forgeml.serve.protocols.openai._generation import json_response
from forgeml.serve.protocols.openai._records import Generated, RecordGeneration, recorder
from forgeml.serve.protocols.openai._requests import (
    CHAT_TURN_END,
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
)
from forgeml.serve.protocols.openai._tools import chat_messages
from forgeml.serve.tokens import LanguageGenerator
from forgeml.serve.tool_calls import DEFAULT_MAX_TOOL_CALLS

__all__ = [
    "CHAT_TURN_END",
    "ChatCompletionRequest",
    "CompletionRequest",
    "EmbeddingRequest",
    "Generated",
    "OpenAIModels",
    "RecordGeneration",
    "chat_messages",
    "router",
]


class OpenAIModels(Protocol):
    """The models a server offers through the OpenAI routes."""

    def names(self) -> list[str]:
        """Served model names."""
        ...

    def embed(self, name: str, texts: list[str]) -> Awaitable[list[list[float]]]:
        """One vector per text from encoder model `name`.

        Raises NotFoundError for an unknown model, InvalidDataError or UsageError when
        the model is not an encoder.
        """
        ...

    def generator(self, name: str) -> LanguageGenerator:
        """The text generator of language model `name` (errors as `embed`)."""
        ...


def _label(request: Request, model: str) -> None:
    # the server's request metrics read the model from the request state: it is in the body
    request.state.model = model


# --- routes -------------------------------------------------------------------------------


def router(
    models: OpenAIModels,
    record: RecordGeneration | None = None,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> APIRouter:
    """The OpenAI-compatible routes over `models`, for an app to include.

    Args:
        models: The served models (embeddings from encoders, text from language models).
        record: Called once per answered completion or chat completion (for the request
            log); None: nothing is recorded.
        max_tool_calls: The most tool calls one chat reply may make (a request may ask
            for fewer; `parallel_tool_calls` false is 1).

    Returns:
        A router with /v1/models, /v1/models/{model}, /v1/embeddings, /v1/completions and
        /v1/chat/completions; its errors use OpenAI's error shape.
    """
    api = APIRouter(route_class=OpenAIRoute, tags=["openai"], responses=ERROR_RESPONSES)
    created = int(time.time())

    def card(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": created, "owned_by": "forgeml"}

    @api.get("/v1/models", summary="List the served models (OpenAI)")
    async def list_models() -> Response:
        return json_response({"object": "list", "data": [card(name) for name in models.names()]})

    @api.get("/v1/models/{model}", summary="Describe one served model (OpenAI)")
    async def retrieve_model(model: str) -> Response:
        if model not in models.names():
            raise NotFoundError(f"The model '{model}' does not exist on this server.")
        return json_response(card(model))

    @api.post("/v1/embeddings", summary="Embed texts with an encoder model (OpenAI)")
    async def embeddings(body: EmbeddingRequest, request: Request) -> Response:
        _label(request, body.model)
        return await _embeddings(models, body)

    @api.post("/v1/completions", summary="Continue prompts with a language model (OpenAI)")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        _label(request, body.model)
        prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        done = recorder(record, request, body.model, list(prompts))
        return await _completions(models.generator(body.model), body, done)

    @api.post("/v1/chat/completions", summary="Reply to a conversation (OpenAI)")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        _label(request, body.model)
        messages = [m.model_dump(mode="json", exclude_none=True) for m in body.messages]
        done = recorder(record, request, body.model, [messages]) if record else None
        return await _chat(models.generator(body.model), body, done, max_tool_calls)

    return api
