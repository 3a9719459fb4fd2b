"""What the OpenAI routes tell the server's request log about each generation they answer.

A route hands `_chat` or `_completions` a `Done` callback; it is called once with the
outputs when the reply is complete (for a stream, after its last piece), and records the
request's messages or prompts, the reply, the request id and the prompt version the
caller named in `x-forgeml-prompt` (`forgeml.serve.prompt_refs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from forgeml.serve import prompt_refs
from forgeml.serve.request_ids import request_id_of


@dataclass(frozen=True)
class Generated:
    """One answered generation request."""

    model: str
    instances: list[Any]  # chat: one instance, the messages; completions: the prompts
    outputs: list[Any]  # chat: the reply message; completions: one text per prompt
    request_id: str
    prompt: str  # NAME@vN the request was rendered from, or ""


RecordGeneration = Callable[[Generated], None]
Done = Callable[[list[Any]], None]


def recorder(
    record: RecordGeneration | None, request: Request, model: str, instances: list[Any]
) -> Done | None:
    """The callback that records this request's outputs (None: the server keeps no log)."""
    if record is None:
        return None
    scope = request.scope
    request_id, prompt = request_id_of(scope), prompt_refs.incoming(scope["headers"])

    def done(outputs: list[Any]) -> None:
        record(Generated(model, instances, outputs, request_id, prompt))

    return done
