"""One generation request of the OpenAI routes, and the JSON or server-sent events it answers.

`GenerationCall` runs a prompt off the event loop, whole or streamed; a streamed reply is
one `data: {...}` event per piece, ending with `data: [DONE]`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from fastapi import Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from forgeml.core.errors import ForgemlError
from forgeml.serve.protocols.openai._errors import error_body
from forgeml.serve.protocols.openai._requests import _Sampling
from forgeml.serve.tokens import GenerationStream, LanguageGenerator, TokenConstraint

__all__ = [
    "Chunk",
    "GenerationCall",
    "Opening",
    "error_event",
    "json_response",
    "sse_event",
    "sse_response",
    "usage",
]

_log = logging.getLogger(__name__)


def json_response(body: dict[str, Any]) -> Response:
    """`body` as a JSON response."""
    return Response(orjson.dumps(body), media_type="application/json")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's `usage` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def sse_event(body: dict[str, Any]) -> bytes:
    """`body` as one server-sent event."""
    return b"data: " + orjson.dumps(body) + b"\n\n"


def error_event(error: Exception) -> bytes:
    """The event reporting `error` once a stream's headers are sent, as OpenAI does."""
    if isinstance(error, ForgemlError):
        return sse_event(error_body(500, str(error)))
    _log.exception("generation failed mid-stream", exc_info=error)  # a bug: keep its trace
    return sse_event(error_body(500, "Internal server error; see the server log."))


# chunk(index, text piece or None, finish reason or None) and opening(index, prompt)
Chunk = Callable[[int, str | None, str | None], dict[str, Any]]
Opening = Callable[[int, str], dict[str, Any] | None]


class GenerationCall:
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
                    yield sse_event(first)
                generation = await run_in_threadpool(self.start, prompt)
                async for piece in iterate_in_threadpool(generation):
                    yield sse_event(chunk(index, piece, None))
                yield sse_event(chunk(index, None, generation.finish_reason))
                used[0] += generation.prompt_tokens
                used[1] += generation.completion_tokens
            options = self.request.stream_options
            if options is not None and options.include_usage:
                yield sse_event({**chunk(0, None, None), "choices": [], "usage": usage(*used)})
        except Exception as error:
            yield error_event(error)
        yield b"data: [DONE]\n\n"


def sse_response(events: AsyncIterator[bytes]) -> StreamingResponse:
    """A response streaming `events` as `text/event-stream`."""
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )
