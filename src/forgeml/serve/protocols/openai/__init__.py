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

import base64
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from forgeml.core.errors import ForgemlError, NotFoundError
from forgeml.serve.protocols.openai._errors import (
    ERROR_RESPONSES,
    OpenAIRoute,
    error_body,
    error_response,
)
from forgeml.serve.protocols.openai._requests import (
    CHAT_TURN_END,
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    _Sampling,
)
from forgeml.serve.protocols.openai._tools import (
    ChatPlan,
    chat_messages,
    plan_for,
    reply_deltas,
)
from forgeml.serve.tokens import GenerationStream, LanguageGenerator, TokenConstraint

__all__ = [
    "CHAT_TURN_END",
    "ChatCompletionRequest",
    "CompletionRequest",
    "EmbeddingRequest",
    "OpenAIModels",
    "chat_messages",
    "router",
]

_log = logging.getLogger(__name__)


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


# --- responses ----------------------------------------------------------------------------


def _json(body: dict[str, Any]) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _event(body: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _error_event(error: Exception) -> bytes:
    """The event reporting `error` once a stream's headers are sent, as OpenAI does."""
    if isinstance(error, ForgemlError):
        return _event(error_body(500, str(error)))
    _log.exception("generation failed mid-stream", exc_info=error)  # a bug: keep its trace
    return _event(error_body(500, "Internal server error; see the server log."))


def _encode(vector: list[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "float":
        return vector
    import numpy as np

    # the client decodes base64 as little-endian float32
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


# chunk(index, text piece or None, finish reason or None) and opening(index, prompt)
Chunk = Callable[[int, str | None, str | None], dict[str, Any]]
Opening = Callable[[int, str], dict[str, Any] | None]


class _Call:
    """One generation request: the generator, the settings and the response envelope."""

    def __init__(
        self,
        generator: LanguageGenerator,
        request: _Sampling,
        limit: int,
        stop: list[str],
        constraint: TokenConstraint | None = None,
    ) -> None:
        self.generator = generator
        self.request = request
        self.limit = limit
        self.stop = stop
        self.constraint = constraint
        self.created = int(time.time())

    def start(self, prompt: str) -> GenerationStream:
        request = self.request
        return self.generator.stream(
            prompt,
            self.limit,
            request.temperature,
            request.top_p,
            self.stop,
            request.seed,
            self.constraint,
        )

    async def run(self, prompt: str) -> tuple[GenerationStream, str]:
        """A finished generation and its text, computed in a worker thread."""

        def finish() -> tuple[GenerationStream, str]:
            generation = self.start(prompt)
            return generation, "".join(generation)

        return await run_in_threadpool(finish)

    async def events(
        self, prompts: list[str], chunk: Chunk, opening: Opening
    ) -> AsyncIterator[bytes]:
        """SSE events: `opening` and `chunk` per piece for each prompt, usage, `[DONE]`."""
        used = [0, 0]
        try:
            for index, prompt in enumerate(prompts):
                first = opening(index, prompt)
                if first is not None:
                    yield _event(first)
                generation = await run_in_threadpool(self.start, prompt)
                async for piece in iterate_in_threadpool(generation):
                    yield _event(chunk(index, piece, None))
                yield _event(chunk(index, None, generation.finish_reason))
                used[0] += generation.prompt_tokens
                used[1] += generation.completion_tokens
            options = self.request.stream_options
            if options is not None and options.include_usage:
                yield _event({**chunk(0, None, None), "choices": [], "usage": _usage(*used)})
        except Exception as error:
            yield _error_event(error)
        yield b"data: [DONE]\n\n"


def _stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def _label(request: Request, model: str) -> None:
    # the server's request metrics read the model from the request state: it is in the body
    request.state.model = model


# --- routes -------------------------------------------------------------------------------


def router(models: OpenAIModels) -> APIRouter:
    """The OpenAI-compatible routes over `models`, for an app to include.

    Args:
        models: The served models (embeddings from encoders, text from language models).

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
        return _json({"object": "list", "data": [card(name) for name in models.names()]})

    @api.get("/v1/models/{model}", summary="Describe one served model (OpenAI)")
    async def retrieve_model(model: str) -> Response:
        if model not in models.names():
            raise NotFoundError(f"The model '{model}' does not exist on this server.")
        return _json(card(model))

    @api.post("/v1/embeddings", summary="Embed texts with an encoder model (OpenAI)")
    async def embeddings(body: EmbeddingRequest, request: Request) -> Response:
        _label(request, body.model)
        return await _embeddings(models, body)

    @api.post("/v1/completions", summary="Continue prompts with a language model (OpenAI)")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        _label(request, body.model)
        return await _completions(models.generator(body.model), body)

    @api.post("/v1/chat/completions", summary="Reply to a conversation (OpenAI)")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        _label(request, body.model)
        return await _chat(models.generator(body.model), body)

    return api


async def _embeddings(models: OpenAIModels, body: EmbeddingRequest) -> Response:
    texts = [body.input] if isinstance(body.input, str) else body.input
    vectors = await models.embed(body.model, texts)
    size = len(vectors[0]) if vectors else 0
    if body.dimensions is not None and body.dimensions != size:
        message = (
            f"The model '{body.model}' makes {size}-dimensional vectors, not {body.dimensions}."
        )
        return error_response(400, message, "dimensions")
    data = [
        {"object": "embedding", "index": index, "embedding": _encode(vector, body.encoding_format)}
        for index, vector in enumerate(vectors)
    ]
    # an estimate: the encoder's own tokenizer belongs to the runtime, so count words
    words = sum(len(text.split()) for text in texts)
    usage = {"prompt_tokens": words, "total_tokens": words}
    return _json({"object": "list", "data": data, "model": body.model, "usage": usage})


async def _completions(generator: LanguageGenerator, body: CompletionRequest) -> Response:
    call = _Call(generator, body, body.max_tokens, body.stops())
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    envelope = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": call.created,
        "model": body.model,
    }

    def choice(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
        return {"index": index, "text": text or "", "finish_reason": finish, "logprobs": None}

    if body.stream:

        def chunk(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
            return {**envelope, "choices": [choice(index, text, finish)]}

        def opening(index: int, prompt: str) -> dict[str, Any] | None:
            return chunk(index, prompt, None) if body.echo and prompt else None

        return _stream(call.events(prompts, chunk, opening))
    choices, used = [], [0, 0]
    for index, prompt in enumerate(prompts):
        generation, text = await call.run(prompt)
        choices.append(
            choice(index, prompt + text if body.echo else text, generation.finish_reason)
        )
        used = [used[0] + generation.prompt_tokens, used[1] + generation.completion_tokens]
    return _json({**envelope, "choices": choices, "usage": _usage(*used)})


async def _chat(generator: LanguageGenerator, body: ChatCompletionRequest) -> Response:
    plan = plan_for(generator, body)
    stops = [*generator.chat_stops, *body.stops()]
    call = _Call(generator, body, body.token_limit(), stops, plan.constraint)
    ident, model = f"chatcmpl-{uuid.uuid4().hex}", body.model

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": call.created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    if body.stream and plan.tool_mode != "none":  # calls are known once the reply is whole
        return _stream(_buffered_events(call, plan, chunk))
    if body.stream:

        def piece(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
            return chunk({} if text is None else {"content": text}, finish)

        def opening(index: int, prompt: str) -> dict[str, Any]:
            return chunk({"role": "assistant", "content": ""}, None)

        return _stream(call.events([plan.prompt], piece, opening))
    generation, text = await call.run(plan.prompt)
    message, finish = plan.reply(text, generation.finish_reason or "stop")
    return _json(
        {
            "id": ident,
            "object": "chat.completion",
            "created": call.created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(generation.prompt_tokens, generation.completion_tokens),
        }
    )


async def _buffered_events(
    call: _Call, plan: ChatPlan, chunk: Callable[[dict[str, Any], str | None], dict[str, Any]]
) -> AsyncIterator[bytes]:
    """SSE events of a reply that may call tools: generated whole, then sent in pieces."""
    try:
        generation, text = await call.run(plan.prompt)
        message, finish = plan.reply(text, generation.finish_reason or "stop")
        yield _event(chunk({"role": "assistant", "content": ""}, None))
        for delta in reply_deltas(message):
            yield _event(chunk(delta, None))
        yield _event(chunk({}, finish))
        options = call.request.stream_options
        if options is not None and options.include_usage:
            used = _usage(generation.prompt_tokens, generation.completion_tokens)
            yield _event({**chunk({}, None), "choices": [], "usage": used})
    except Exception as error:
        yield _error_event(error)
    yield b"data: [DONE]\n\n"
