"""Answer prompts from the prompt registry: a stored version asked as `rag.answer` asks.

A registered prompt answers questions when it declares the variables `question` and
`passages`; `passages` is given the retrieved passages as text, one `[n] (source) text`
each, as the built-in prompt shows them. A chat prompt gives its messages; a text prompt
is sent as one user message. The answer records the version's `name@vN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import UsageError
from forgeml.rag.citations import Passage

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.prompts.registry import PromptVersion
    from forgeml.prompts.spec import CheckedPrompt

__all__ = ["RegistryAnswerPrompt", "registry_answer_prompt", "show_passages"]

NEEDED = ("passages", "question")


def show_passages(passages: list[Passage]) -> str:
    """The passages as a prompt shows them: `[n] (source) text`, blank-line separated."""
    return "\n\n".join(
        f"[{n}] ({passage.source}) {passage.text}" for n, passage in enumerate(passages, start=1)
    )


@dataclass(frozen=True)
class RegistryAnswerPrompt:
    """An `AnswerPrompt` over a stored prompt version."""

    ref: str
    prompt: CheckedPrompt

    def messages(self, question: str, passages: list[Passage]) -> list[dict[str, Any]]:
        """See `AnswerPrompt.messages`."""
        values = {"question": question, "passages": show_passages(passages)}
        rendered = self.prompt.render(values, self.ref)
        if isinstance(rendered, str):
            return [{"role": "user", "content": rendered}]
        return list(rendered)


def registry_answer_prompt(workspace: Workspace, ref: str) -> RegistryAnswerPrompt:
    """The stored prompt `ref` names (`NAME`, `NAME@vN`, `NAME@ALIAS`), as an answer prompt.

    Raises:
        NotFoundError: no such prompt or version.
        UsageError: it does not declare `question` and `passages`.
    """
    from forgeml.prompts.registry import get_prompt

    version: PromptVersion = get_prompt(workspace, ref)
    declared = {variable.name for variable in version.spec.variables}
    missing = [name for name in NEEDED if name not in declared]
    if missing:
        raise UsageError(
            f"Prompt {version.ref} cannot answer from passages: it does not declare "
            f"the variable '{missing[0]}' (an answer prompt declares 'question' and 'passages')."
        )
    return RegistryAnswerPrompt(version.ref, version.checked())
