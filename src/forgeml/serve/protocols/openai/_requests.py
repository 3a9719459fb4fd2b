"""Request bodies of the OpenAI-compatible routes, validated as OpenAI's reference says."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator

MAX_TOKENS_LIMIT = 4096  # generation is one forward pass per byte; bound a request's work
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default for /v1/completions
DEFAULT_CHAT_TOKENS = 128
CHAT_TURN_END = "\nuser:"


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
