"""POST /v1/completions: prompts continued by a language model, whole or streamed."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Response

from forgeml.serve.protocols.openai._generation import (
    GenerationCall,
    json_response,
    sse_response,
    usage,
)
from forgeml.serve.protocols.openai._records import Done
from forgeml.serve.protocols.openai._requests import CompletionRequest
from forgeml.serve.tokens import LanguageGenerator

__all__ = ["completions"]


async def completions(
    generator: LanguageGenerator, body: CompletionRequest, done: Done | None = None
) -> Response:
    """The completion of each prompt of `body` (or their event stream) with `generator`.

    `done` is called with one text per prompt once the last is complete.
    """
    call = GenerationCall(generator, body, body.max_tokens, body.stops())
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
        texts: list[list[str]] = [[] for _ in prompts]

        def chunk(index: int, text: str | None, finish: str | None) -> dict[str, Any]:
            if text is not None:
                texts[index].append(text)
            elif finish is not None and index == len(prompts) - 1 and done is not None:
                done(["".join(pieces) for pieces in texts])
            return {**envelope, "choices": [choice(index, text, finish)]}

        def opening(index: int, prompt: str) -> dict[str, Any] | None:
            return chunk(index, prompt, None) if body.echo and prompt else None

        return sse_response(call.events(prompts, chunk, opening))
    choices, used = [], [0, 0]
    for index, prompt in enumerate(prompts):
        generation, text = await call.run(prompt)
        choices.append(
            choice(index, prompt + text if body.echo else text, generation.finish_reason)
        )
        used = [used[0] + generation.prompt_tokens, used[1] + generation.completion_tokens]
    if done is not None:
        done([c["text"] for c in choices])
    return json_response({**envelope, "choices": choices, "usage": usage(*used)})
