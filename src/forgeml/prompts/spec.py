"""A prompt's content: a text template or chat messages, variables, examples, defaults.

`PromptSpec` is what `forgeml prompts create --file PROMPT.yaml` reads and what a version
stores; `checked` compiles every template in the sandbox and renders every example, so
an unsafe or broken prompt is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forgeml.core.errors import PromptTemplateError
from forgeml.core.ids import json_digest
from forgeml.prompts.template import CompiledTemplate, compile_template
from forgeml.prompts.variables import Variable, bind, check_type

MAX_EXAMPLES = 100


class Message(BaseModel):
    """One chat message: its role and the template of its content."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"] = Field(description="Who says it.")
    template: str = Field(description="Jinja2 template of its content.")


class ModelDefaults(BaseModel):
    """What a prompt suggests to the model it is sent to; a caller may override each."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="Model name at the endpoint.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling.")
    max_tokens: int | None = Field(default=None, ge=1, description="Longest reply.")


class PromptSpec(BaseModel):
    """A prompt version's content (PROMPT.yaml)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    description: str = Field(default="", description="What the prompt is for.")
    template: str | None = Field(default=None, description="A text prompt's template.")
    messages: list[Message] | None = Field(default=None, description="A chat prompt.")
    variables: list[Variable] = Field(default_factory=list, description="Its variables.")
    examples: list[dict[str, Any]] = Field(
        default_factory=list, max_length=MAX_EXAMPLES, description="Example inputs."
    )
    model: ModelDefaults = Field(default_factory=ModelDefaults, description="Model defaults.")

    @model_validator(mode="after")
    def _one_kind(self) -> PromptSpec:
        if (self.template is None) == (self.messages is None):
            raise ValueError("give exactly one of 'template' (text) or 'messages' (chat)")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' needs at least one message")
        names = [variable.name for variable in self.variables]
        if len(set(names)) != len(names):
            raise ValueError("each variable may be declared once")
        return self

    @property
    def kind(self) -> str:
        return "text" if self.template is not None else "chat"

    def digest(self) -> str:
        """sha256 of the canonical JSON content: same content, same digest."""
        return json_digest(self.model_dump(mode="json"))


Rendered = str | list[dict[str, str]]


@dataclass(frozen=True)
class CheckedPrompt:
    """A spec whose templates compiled and whose examples rendered."""

    spec: PromptSpec
    templates: list[CompiledTemplate]

    def render(self, values: Mapping[str, Any], prompt: str, *, as_text: bool = False) -> Rendered:
        """The text (text prompt) or OpenAI messages (chat prompt) for `values`.

        Raises:
            InvalidDataError: an unknown or missing variable, or a value of the wrong type.
            PromptTemplateError: the sandbox refused the render or a limit was reached.
        """
        bound = bind(self.spec.variables, values, prompt, as_text=as_text)
        texts = [template.render(bound) for template in self.templates]
        if self.spec.messages is None:
            return texts[0]
        return [
            {"role": message.role, "content": text}
            for message, text in zip(self.spec.messages, texts, strict=True)
        ]


def checked(spec: PromptSpec, prompt: str) -> CheckedPrompt:
    """Compile `spec`'s templates and render each example once.

    Raises:
        PromptTemplateError: a template is unsafe, does not parse, or reads a variable it
            does not declare.
        InvalidDataError: an example or a default does not fit the declared variables.
    """
    sources = [spec.template] if spec.template is not None else []
    sources += [message.template for message in spec.messages or []]
    where = ["template"] if spec.template is not None else []
    where += [f"message {n} ({m.role})" for n, m in enumerate(spec.messages or [], 1)]
    declared = {variable.name for variable in spec.variables}
    templates = []
    for source, place in zip(sources, where, strict=True):
        compiled = compile_template(source, f"{place} of prompt {prompt}")
        if undeclared := sorted(compiled.variables - declared):
            raise PromptTemplateError(
                f"The {place} of prompt {prompt} uses '{undeclared[0]}', which is not among "
                "its declared variables."
            )
        templates.append(compiled)
    for variable in spec.variables:
        if variable.default is not None:
            check_type(variable, variable.default, prompt)
    result = CheckedPrompt(spec, templates)
    for number, example in enumerate(spec.examples, 1):
        result.render(example, f"{prompt} (example {number})")
    return result
