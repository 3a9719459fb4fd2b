"""OpenAI-compatible routes: /v1/models, /v1/embeddings, /v1/completions, /v1/chat/completions.

Request and response bodies follow OpenAI's API reference
(https://platform.openai.com/docs/api-reference), so the `openai` client works unchanged.
Fields the reference defines but these models cannot honour (logprobs, penalties,
logit_bias, user, tools, ...) are accepted and ignored; invalid values are a 400 in
OpenAI's error shape `{"error": {"message", "type", "param", "code"}}`, and an unknown
model a 404 with code "model_not_found".

Chat messages become one prompt for the byte-level language model with this template::

    system: You are terse.
    user: Hello!
    assistant:

one line `ROLE: CONTENT` per message (text parts joined), then `assistant:`; the reply
ends before the model starts a new user turn ("\\nuser:"), at `max_tokens`, or at a
requested stop string.

Token counts in `usage` are exact for the byte-level models (one token per UTF-8 byte);
for embeddings they are an estimate (words), as the encoder's tokenizer belongs to the
runtime behind `OpenAIModels.embed`.

Generation runs in a worker thread; a streamed reply pulls each piece from the thread pool
and sends it as a server-sent event (`data: {...}`), ending with `data: [DONE]`.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Annotated, Any, Literal, Protocol

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, Field, field_validator
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from forgeml.core.errors import ForgemlError, NotFoundError, RateLimitedError
from forgeml.serve.generate import Generation, TextGenerator

__all__ = [
    "ChatCompletionRequest",
    "CompletionRequest",
    "EmbeddingRequest",
    "OpenAIModels",
    "router",
]

MAX_TOKENS_LIMIT = 4096  # generation is one forward pass per byte; bound a request's work
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default for /v1/completions
DEFAULT_CHAT_TOKENS = 128
CHAT_TURN_END = "\nuser:"


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

    def generator(self, name: str) -> TextGenerator:
        """The text generator of language model `name` (errors as `embed`)."""
        ...


# --- requests -----------------------------------------------------------------------------


def _encodable(value: str) -> str:
    # JSON may carry lone UTF-16 surrogates ("\ud800"), which no UTF-8 text can hold
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "the text holds a lone Unicode surrogate, which is not a character"
        ) from None
    return value


Text = Annotated[str, AfterValidator(_encodable)]
NonEmptyText = Annotated[Text, Field(min_length=1)]
Stop = Annotated[list[NonEmptyText], Field(max_length=4)]
Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(gt=0, le=1)]
MaxTokens = Annotated[int, Field(ge=0, le=MAX_TOKENS_LIMIT)]


class StreamOptions(BaseModel):
    """`stream_options`: with `include_usage`, a last chunk carries the token counts."""

    include_usage: bool = False


class _Sampling(BaseModel):
    """Fields shared by completions and chat completions."""

    model: Text
    temperature: Temperature = 1.0
    top_p: TopP = 1.0
    n: int = Field(default=1, description="Choices per prompt; only 1 is supported.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: NonEmptyText | Stop | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"n must be 1 (one choice per prompt), got {value}")
        return value

    def stops(self) -> list[str]:
        """`stop` as a list."""
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class CompletionRequest(_Sampling):
    """Body of POST /v1/completions."""

    prompt: Text | Annotated[list[Text], Field(min_length=1)]
    max_tokens: MaxTokens = DEFAULT_COMPLETION_TOKENS
    echo: bool = False


class TextPart(BaseModel):
    """A text part of a message's content."""

    type: Literal["text"]
    text: Text


class ChatMessage(BaseModel):
    """One message of a conversation."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | list[TextPart] | None = None

    def text(self) -> str:
        """The message's text, parts joined."""
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatCompletionRequest(_Sampling):
    """Body of POST /v1/chat/completions."""

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None

    def token_limit(self) -> int:
        """`max_completion_tokens`, else the older `max_tokens`, else the default."""
        for value in (self.max_completion_tokens, self.max_tokens):
            if value is not None:
                return value
        return DEFAULT_CHAT_TOKENS

    def prompt(self) -> str:
        """The conversation rendered with the module's chat template."""
        lines = [f"{message.role}: {message.text()}\n" for message in self.messages]
        return "".join(lines) + "assistant:"


class EmbeddingRequest(BaseModel):
    """Body of POST /v1/embeddings (text inputs; token-id arrays are not supported)."""

    model: Text
    input: NonEmptyText | Annotated[list[NonEmptyText], Field(min_length=1, max_length=2048)]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)


# --- errors -------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    """What went wrong (OpenAI's error object)."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """Body of every error response of these routes."""

    error: ErrorDetail


# documented in the OpenAPI spec instead of FastAPI's 422: validation errors are a 400 here
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "A bad request, in OpenAI's error shape."},
    "5XX": {"model": ErrorBody, "description": "The model is not ready or failed."},
}


def error_response(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> Response:
    """A JSON error in OpenAI's shape."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _validation_response(error: RequestValidationError) -> Response:
    errors = error.errors()
    if any(item.get("type") == "json_invalid" for item in errors):
        return error_response(400, "The request body is not valid JSON.", None, "invalid_json")
    # a value matching no member of a union fails once per member, each with the member's
    # name appended to the location: report the field once, with every member's reason
    location = [str(part) for part in errors[0].get("loc", ()) if part != "body"]
    related = [item for item in errors if item.get("loc", ())[:2] == errors[0].get("loc", ())[:2]]
    for item in related[1:]:
        other = [str(part) for part in item.get("loc", ()) if part != "body"]
        while location and location != other[: len(location)]:
            location.pop()
    reasons = dict.fromkeys(str(item.get("msg", "is invalid")) for item in related)
    param = ".".join(location) or None
    where = f"'{param}': " if param else "The request body: "
    return error_response(400, where + ", or ".join(reasons) + ".", param)


def _forgeml_response(error: ForgemlError) -> Response:
    message = str(error)
    if isinstance(error, NotFoundError):
        return error_response(404, message, "model", "model_not_found")
    if error.http_status >= 500 or error.http_status in (413, 429):
        response = error_response(error.http_status, message)
        if isinstance(error, RateLimitedError):
            response.headers["Retry-After"] = str(max(1, round(error.retry_after)))
        return response
    # the model cannot do this (e.g. embeddings from a language model): the request's fault
    return error_response(400, message, "model")


class OpenAIRoute(APIRoute):
    """A route whose request and model errors come back in OpenAI's error shape.

    Exception handlers belong to the app, so the mapping happens here instead: these
    routes answer in OpenAI's format whatever app mounts them.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_openai(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError as error:
                return _validation_response(error)
            except ForgemlError as error:
                return _forgeml_response(error)

        return handle_openai


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
        self, generator: TextGenerator, request: _Sampling, limit: int, stop: list[str]
    ) -> None:
        self.generator = generator
        self.request = request
        self.limit = limit
        self.stop = stop
        self.created = int(time.time())

    def start(self, prompt: str) -> Generation:
        request = self.request
        return self.generator.stream(
            prompt, self.limit, request.temperature, request.top_p, self.stop, request.seed
        )

    async def run(self, prompt: str) -> tuple[Generation, str]:
        """A finished generation and its text, computed in a worker thread."""

        def finish() -> tuple[Generation, str]:
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
        except ForgemlError as error:  # headers are sent: report in the stream, as OpenAI does
            body = {"message": str(error), "type": "server_error", "param": None, "code": None}
            yield _event({"error": body})
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


async def _completions(generator: TextGenerator, body: CompletionRequest) -> Response:
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


async def _chat(generator: TextGenerator, body: ChatCompletionRequest) -> Response:
    call = _Call(generator, body, body.token_limit(), [CHAT_TURN_END, *body.stops()])
    prompt = body.prompt()
    ident, model = f"chatcmpl-{uuid.uuid4().hex}", body.model
    if body.stream:

        def chunk(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
            delta = {} if text is None else {"content": text}
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": call.created,
                "model": model,
                "choices": [
                    {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }

        def opening(index: int, prompt: str) -> dict[str, Any]:
            first = chunk(index, "", None)
            first["choices"][0]["delta"]["role"] = "assistant"
            return first

        return _stream(call.events([prompt], chunk, opening))
    generation, text = await call.run(prompt)
    message = {"role": "assistant", "content": text}
    return _json(
        {
            "id": ident,
            "object": "chat.completion",
            "created": call.created,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": generation.finish_reason}
            ],
            "usage": _usage(generation.prompt_tokens, generation.completion_tokens),
        }
    )
