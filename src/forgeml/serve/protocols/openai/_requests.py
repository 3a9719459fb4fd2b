"""Request bodies of the OpenAI-compatible routes, validated as OpenAI's reference says."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from forgeml.serve.tool_calls import MAX_TOOL_CALLS_LIMIT

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


def _invalid(reason: str) -> PydanticCustomError:
    # a custom error reads as the sentence itself (a ValueError gets "Value error, " first)
    return PydanticCustomError("invalid_request", "{reason}", {"reason": reason})


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


def _usable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    from forgeml.core.errors import ConfigError
    from forgeml.serve.structured import check_schema

    try:
        check_schema(schema)
    except ConfigError as error:  # a 400 naming the field, as any other invalid value
        raise _invalid(str(error).rstrip(".")) from None
    return schema


JsonSchema = Annotated[dict[str, Any], AfterValidator(_usable_schema)]
FunctionName = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]


class FunctionDefinition(BaseModel):
    """A function the model may call: its name, what it does, its parameters' schema."""

    name: FunctionName
    description: Text | None = None
    parameters: JsonSchema | None = None
    strict: bool | None = None


class Tool(BaseModel):
    """An entry of `tools` (OpenAI offers only functions)."""

    type: Literal["function"]
    function: FunctionDefinition


class ChosenFunction(BaseModel):
    """`{"name": ...}` of a named tool choice."""

    name: FunctionName


class NamedToolChoice(BaseModel):
    """`tool_choice` naming the one function the model must call."""

    type: Literal["function"]
    function: ChosenFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class FunctionCall(BaseModel):
    """The function an assistant message called, with its arguments as JSON text."""

    name: FunctionName
    arguments: Text


class AssistantToolCall(BaseModel):
    """A tool call an earlier assistant message made."""

    id: NonEmptyText
    type: Literal["function"]
    function: FunctionCall


class JsonSchemaFormat(BaseModel):
    """`response_format.json_schema`: the schema a reply must match."""

    name: FunctionName
    description: Text | None = None
    schema_: JsonSchema | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextFormat(BaseModel):
    """`response_format` {"type": "text"}: free text (the default)."""

    type: Literal["text"]


class JsonObjectFormat(BaseModel):
    """`response_format` {"type": "json_object"}: the reply is one JSON object."""

    type: Literal["json_object"]


class JsonSchemaResponseFormat(BaseModel):
    """`response_format` {"type": "json_schema", ...}: the reply matches a schema."""

    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaResponseFormat, Field(discriminator="type")
]


class ChatMessage(BaseModel):
    """One message of a conversation."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | list[TextPart] | None = None
    name: Text | None = None
    tool_call_id: NonEmptyText | None = None
    tool_calls: list[AssistantToolCall] | None = None

    @model_validator(mode="after")
    def _tool_fields(self) -> ChatMessage:
        if self.role == "tool" and self.tool_call_id is None:
            raise _invalid("a message with role 'tool' needs the 'tool_call_id' it answers")
        if self.tool_calls is not None and self.role != "assistant":
            raise _invalid("only an assistant message can carry 'tool_calls'")
        return self

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
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = Field(
        default=True, description="Whether the reply may make more than one tool call."
    )
    max_tool_calls: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOOL_CALLS_LIMIT,
        description="forgeml's extension: the most tool calls the reply may make (the "
        "server's cap when that is lower; 1 when parallel_tool_calls is false).",
    )
    response_format: ResponseFormat | None = None

    @field_validator("messages")
    @classmethod
    def _answered_calls(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        open_ids: set[str] = set()
        for message in messages:
            if message.role == "tool":
                if message.tool_call_id not in open_ids:
                    raise _invalid(
                        f"the tool message for '{message.tool_call_id}' does not answer a "
                        "tool call of the assistant message before it"
                    )
                continue
            open_ids = {call.id for call in message.tool_calls or []}
        return messages

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, tools: list[Tool] | None) -> list[Tool] | None:
        names = [tool.function.name for tool in tools or []]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise _invalid(f"the function '{repeated[0]}' is declared twice")
        return tools

    @field_validator("tool_choice")
    @classmethod
    def _declared_choice(cls, choice: ToolChoice | None, info: ValidationInfo) -> ToolChoice | None:
        if choice is None or choice in ("none", "auto") or "tools" not in info.data:
            return choice  # a tools list that failed validation is reported on its own
        names = [tool.function.name for tool in info.data.get("tools") or []]
        if not names:
            raise _invalid("'required' or a named function needs 'tools'")
        if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
            raise _invalid(f"the function '{choice.function.name}' is not in tools")
        return choice

    @model_validator(mode="after")
    def _stop_keeps_json_whole(self) -> ChatCompletionRequest:
        if self.stop and self.constrained():
            raise _invalid(
                "'stop' cannot be combined with a JSON reply (response_format json_schema or "
                "json_object, or tool_choice 'required' or a function): a stop string would "
                "cut the JSON short"
            )
        return self

    def constrained(self) -> bool:
        """Whether the reply is decoded under a JSON schema (a forced call or a format)."""
        if self.tool_mode() in ("required", "named"):
            return True
        return isinstance(self.response_format, JsonObjectFormat | JsonSchemaResponseFormat)

    def tool_call_limit(self, server_cap: int) -> int:
        """The most calls the reply may make: 1 without parallel calls, else the request's
        `max_tool_calls` within `server_cap`."""
        if not self.parallel_tool_calls:
            return 1
        return min(self.max_tool_calls or server_cap, server_cap)

    def tool_mode(self) -> str:
        """The tool mode: "none", "auto", "required" or "named" ("auto" by default with tools)."""
        if isinstance(self.tool_choice, NamedToolChoice):
            return "named"
        if self.tool_choice is not None:
            return self.tool_choice
        return "auto" if self.tools else "none"

    def token_limit(self) -> int:
        """`max_completion_tokens`, else the older `max_tokens`, else the default."""
        for value in (self.max_completion_tokens, self.max_tokens):
            if value is not None:
                return value
        return DEFAULT_CHAT_TOKENS


class EmbeddingRequest(BaseModel):
    """Body of POST /v1/embeddings (text inputs; token-id arrays are not supported)."""

    model: Text
    input: NonEmptyText | Annotated[list[NonEmptyText], Field(min_length=1, max_length=2048)]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
