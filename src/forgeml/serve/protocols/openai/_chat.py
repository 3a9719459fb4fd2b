"""POST /v1/chat/completions: a conversation answered by a language model.

The request's plan (`_tools.plan_for`) gives the prompt, the constraint and how to read
the reply; a streamed reply that may call tools is generated whole first (a call is only
known once it parses), then sent as content and one `delta.tool_calls` chunk. A streamed
JSON reply (`response_format`) goes out token by token and is checked against its schema
when it finishes: if it does not validate, an error event takes the place of the finish.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Response

from forgeml.serve.protocols.openai._generation import (
    GenerationCall,
    error_event,
    json_response,
    sse_event,
    sse_response,
    usage,
)
from forgeml.serve.protocols.openai._records import Done
from forgeml.serve.protocols.openai._requests import ChatCompletionRequest
from forgeml.serve.protocols.openai._tools import ChatPlan, plan_for, reply_deltas
from forgeml.serve.tokens import LanguageGenerator
from forgeml.serve.tool_calls import DEFAULT_MAX_TOOL_CALLS

__all__ = ["chat"]


async def chat(
    generator: LanguageGenerator,
    body: ChatCompletionRequest,
    done: Done | None = None,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> Response:
    """The chat completion (or its event stream) answering `body` with `generator`.

    `done` is called with `[reply message]` once the reply is complete; `max_tool_calls`
    is the server's cap on the calls of one reply.
    """
    plan = plan_for(generator, body, max_tool_calls)
    stops = [*generator.chat_stops, *body.stops()]
    call = GenerationCall(generator, body, body.token_limit(), stops, plan.constraint)
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
        return sse_response(_buffered_events(call, plan, chunk, done))
    if body.stream:
        pieces: list[str] = []

        def piece(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
            if text is not None:
                pieces.append(text)
            elif finish is not None:
                # raises for a JSON reply off its schema: the stream ends in an error event
                message, finish = plan.reply("".join(pieces), finish)
                if done is not None:
                    done([message])
            return chunk({} if text is None else {"content": text}, finish)

        def opening(index: int, prompt: str) -> dict[str, Any]:
            return chunk({"role": "assistant", "content": ""}, None)

        return sse_response(call.events([plan.prompt], piece, opening))
    generation, text = await call.run(plan.prompt)
    message, finish = plan.reply(text, generation.finish_reason or "stop")
    if done is not None:
        done([message])
    return json_response(
        {
            "id": ident,
            "object": "chat.completion",
            "created": call.created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage(generation.prompt_tokens, generation.completion_tokens),
        }
    )


async def _buffered_events(
    call: GenerationCall,
    plan: ChatPlan,
    chunk: Callable[[dict[str, Any], str | None], dict[str, Any]],
    done: Done | None,
) -> AsyncIterator[bytes]:
    """SSE events of a reply that may call tools: generated whole, then sent in pieces."""
    try:
        generation, text = await call.run(plan.prompt)
        message, finish = plan.reply(text, generation.finish_reason or "stop")
        if done is not None:
            done([message])
        yield sse_event(chunk({"role": "assistant", "content": ""}, None))
        for delta in reply_deltas(message):
            yield sse_event(chunk(delta, None))
        yield sse_event(chunk({}, finish))
        options = call.request.stream_options
        if options is not None and options.include_usage:
            used = usage(generation.prompt_tokens, generation.completion_tokens)
            yield sse_event({**chunk({}, None), "choices": [], "usage": used})
    except Exception as error:
        yield error_event(error)
    yield b"data: [DONE]\n\n"
