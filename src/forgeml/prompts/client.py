"""A client for any OpenAI-compatible chat endpoint: forgeml's own server, vLLM, Ollama.

Prompts (`eval`), RAG (`answer`) and agents talk to a language model only through the
`ChatModel` protocol, so the generator is whatever answers OpenAI's chat completions at a
URL with a key; the tests drive forgeml's own served SmolLM2 through this same path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from forgeml.core.errors import ConfigError, GeneratorError

if TYPE_CHECKING:
    import openai

__all__ = ["ChatClient", "ChatModel", "ChatReply", "ToolCall", "api_key_from_env"]


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; `arguments` is the JSON text it wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatReply:
    """The model's one choice: text or tool calls, why it stopped, and the tokens used."""

    content: str | None
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""


class ChatModel(Protocol):
    """Anything that answers a conversation as OpenAI's chat completions do."""

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        prompt: str | None = None,
    ) -> ChatReply:
        """The reply to `messages` (OpenAI's message dicts).

        `prompt` is the registry version (`NAME@vN`) the messages were rendered from, for
        the endpoint to record with the generation (`x-forgeml-prompt`).

        Raises:
            GeneratorError: the endpoint could not be reached or refused the request.
        """
        ...


class ChatClient:
    """`ChatModel` over HTTP with the `openai` client (retries and timeouts are its own)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        """A client for `model` at `base_url` (e.g. "http://127.0.0.1:8000/v1").

        Args:
            base_url: The endpoint's OpenAI base URL, ending in "/v1".
            model: The model name the endpoint serves.
            api_key: Its key (a forgeml gateway key, a vLLM key); none for an open server.
            timeout_s: Seconds to wait for one reply.
            max_retries: Retries on connection errors, 429 and 5xx (the client's backoff).
        """
        import openai

        self.model = model
        self.base_url = base_url
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "none",
            timeout=timeout_s,
            max_retries=max_retries,
        )

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        prompt: str | None = None,
    ) -> ChatReply:
        """See `ChatModel.chat`."""
        import openai

        from forgeml.serve.prompt_refs import HEADER

        options: dict[str, Any] = {"temperature": temperature}
        if prompt is not None:
            options["extra_headers"] = {HEADER: prompt}
        for name, value in (
            ("tools", tools),
            ("tool_choice", tool_choice),
            ("parallel_tool_calls", parallel_tool_calls),
            ("response_format", response_format),
            ("max_tokens", max_tokens),
            ("seed", seed),
            ("stop", stop),
        ):
            if value is not None:
                options[name] = value
        try:
            completion = self._client.chat.completions.create(
                model=self.model, messages=cast("Any", messages), **options
            )
        except openai.APIStatusError as error:
            raise GeneratorError(
                f"The language model at {self.base_url} refused the request "
                f"(HTTP {error.status_code}): {_message(error)}"
            ) from None
        except openai.APIError as error:
            raise GeneratorError(
                f"The language model at {self.base_url} could not be reached: {error.message}"
            ) from None
        return _reply(completion)


def api_key_from_env(variable: str | None) -> str | None:
    """The API key in environment variable `variable`; None when no variable is named.

    A key is named by its variable everywhere (`--api-key-env`, a spec's `key_env`), never
    written out, so it stays out of shell history, files and saved runs.

    Raises:
        ConfigError: the variable is named but not set.
    """
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"The environment variable {variable} holding the API key is not set.")
    return value


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(error.message)


def _reply(completion: Any) -> ChatReply:
    choice = completion.choices[0]
    calls = [
        ToolCall(call.id, call.function.name, call.function.arguments)
        for call in choice.message.tool_calls or []
        if getattr(call, "function", None) is not None
    ]
    usage = completion.usage
    return ChatReply(
        content=choice.message.content,
        finish_reason=choice.finish_reason or "stop",
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        tool_calls=calls,
        model=completion.model,
    )
