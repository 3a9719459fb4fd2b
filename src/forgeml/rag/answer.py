"""Answer a question from retrieved passages, with citations checked before anyone sees them.

retrieve -> prompt -> LM -> parse -> verify: the model is asked for JSON
(`{"answer": "... [1] ...", "citations": [{"n": 1, "quote": "..."}]}`, or `"answer": null`
when the passages do not hold the answer), under a JSON schema that forgeml's own server
enforces by constrained decoding and that admits as passage n's quote only a sentence of
passage n (`response_format`, `forgeml.rag._quotes`); other OpenAI-compatible servers may
ignore it, so a fenced JSON block, a truncated JSON object and free text with `[n]`
markers and quoted spans are read too (`forgeml.rag._reply`). Whatever the model wrote,
the returned answer's every `[n]` resolves to a passage's chunk id and a verbatim quote
of it (`citations.verify`), or the answer is replaced by `NOT_SUPPORTED` with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from forgeml.core.errors import InvalidDataError
from forgeml.prompts.client import ChatModel
from forgeml.rag._quotes import citation_schema
from forgeml.rag._reply import read_reply
from forgeml.rag.answer_prompts import show_passages
from forgeml.rag.citations import MARKER, Citation, DroppedCitation, Passage, verify

__all__ = [
    "ANSWER_CHARS",
    "BUILTIN_PROMPT",
    "NOT_SUPPORTED",
    "RESPONSE_FORMAT",
    "Answer",
    "AnswerPrompt",
    "BuiltinAnswerPrompt",
    "Usage",
    "answer",
    "response_format",
]

# the longest answer text the schema admits (a few sentences)
ANSWER_CHARS = 300

NOT_SUPPORTED = "The sources do not support an answer to this question."

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "rag_answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                # bounded: greedy SmolLM2 repeated one sentence until max_tokens cut the
                # JSON short of its citations
                "answer": {
                    "anyOf": [{"type": "string", "maxLength": ANSWER_CHARS}, {"type": "null"}]
                },
                "citations": {"type": "array", "items": citation_schema([])},
            },
            "required": ["answer", "citations"],
            "additionalProperties": False,
        },
    },
}


def response_format(passages: list[Passage]) -> dict[str, Any]:
    """`RESPONSE_FORMAT` with each citation's quote limited to its passage's sentences.

    A server that enforces the schema can then only emit quotes that resolve
    (`forgeml.rag._quotes`); `RESPONSE_FORMAT` is the shape without the passages.
    """
    schema = RESPONSE_FORMAT["json_schema"]["schema"]
    citations = {"type": "array", "items": citation_schema(passages)}
    return {
        "type": "json_schema",
        "json_schema": {
            **RESPONSE_FORMAT["json_schema"],
            "schema": {**schema, "properties": {**schema["properties"], "citations": citations}},
        },
    }


class AnswerPrompt(Protocol):
    """A chat prompt for `answer`: its reference (`name@version`) and its messages."""

    @property
    def ref(self) -> str:
        """Which prompt this is, recorded on every answer: `name@version` or `builtin:...`."""
        ...

    def messages(self, question: str, passages: list[Passage]) -> list[dict[str, Any]]:
        """The conversation asking `question` over `passages` (numbered from [1])."""
        ...


@dataclass(frozen=True)
class BuiltinAnswerPrompt:
    """The default prompt; the prompt registry holds later versions as `name@version`.

    `example` is one worked exchange (passages, question, reply) shown before the real
    question: SmolLM2-135M ignored the JSON form from instructions alone (0 of 20 stdlib
    questions) and followed it after one example (5 of 5).
    """

    ref: str
    system: str
    user: str  # str.format template with {passages} and {question}
    example: tuple[list[Passage], str, str] | None = None

    def messages(self, question: str, passages: list[Passage]) -> list[dict[str, Any]]:
        """See `AnswerPrompt.messages`; a passage is shown as `[n] (source) text`."""
        turns: list[dict[str, Any]] = [{"role": "system", "content": self.system}]
        if self.example is not None:
            shown, asked, reply = self.example
            turns.append({"role": "user", "content": self._ask(asked, shown)})
            turns.append({"role": "assistant", "content": reply})
        turns.append({"role": "user", "content": self._ask(question, passages)})
        return turns

    def _ask(self, question: str, passages: list[Passage]) -> str:
        return self.user.format(passages=show_passages(passages), question=question)


_EXAMPLE_PASSAGES = [
    Passage(
        "example-1", "Class with methods to open, read, write, close, list zip files.", "zipfile"
    ),
    Passage(
        "example-2",
        "Return a copy of the string with leading and trailing whitespace removed.",
        "string",
    ),
]
_EXAMPLE_REPLY = json.dumps(
    {
        "answer": "It returns a copy of the string without leading and trailing whitespace [2].",
        "citations": [
            {"n": 2, "quote": "Return a copy of the string with leading and trailing whitespace"}
        ],
    }
)


BUILTIN_PROMPT = BuiltinAnswerPrompt(
    ref="builtin:rag-answer@1",
    system=(
        "You answer questions using only the numbered passages you are given. "
        "Reply with one JSON object and nothing else, in this form:\n"
        '{"answer": "your answer, citing passages like [1]", '
        '"citations": [{"n": 1, "quote": "words copied exactly from passage [1]"}]}\n'
        "Every [n] in the answer needs a citation whose quote is copied word for word "
        "from passage [n]. If the passages do not contain the answer, reply "
        '{"answer": null, "citations": []}.'
    ),
    user="Passages:\n{passages}\n\nQuestion: {question}",
    example=(_EXAMPLE_PASSAGES, "What does str.strip return?", _EXAMPLE_REPLY),
)


@dataclass(frozen=True)
class Usage:
    """Tokens the model read and wrote for one answer."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Answer:
    """A checked answer: `text`'s every `[n]` has a `Citation`, or `supported` is False.

    When not supported, `text` is `NOT_SUPPORTED` and `refused_reason` says why in one
    sentence. `dropped` lists each citation or marker the check removed, with its reason.
    """

    text: str
    citations: list[Citation]
    supported: bool
    refused_reason: str | None
    prompt_ref: str
    usage: Usage = field(default_factory=Usage)
    dropped: list[DroppedCitation] = field(default_factory=list)
    model: str = ""


def answer(
    question: str,
    passages: list[Passage],
    model: ChatModel,
    *,
    prompt: AnswerPrompt = BUILTIN_PROMPT,
    max_tokens: int = 512,
    temperature: float = 0.0,
    seed: int | None = 0,
) -> Answer:
    """Ask `model` to answer `question` from `passages`, and keep only what they support.

    Args:
        question: The user's question.
        passages: The retrieved passages, best first; the model sees them as [1], [2], ...
        model: The generator (a `ChatClient` in production).
        prompt: The chat prompt; its `ref` is recorded on the answer.
        max_tokens: The most tokens the model may write.
        temperature: Sampling temperature (0: greedy).
        seed: Sampling seed, for endpoints that honour one.

    Returns:
        The verified answer, or `NOT_SUPPORTED` with the reason.

    Raises:
        InvalidDataError: the question is empty.
        GeneratorError: the model's endpoint failed.
    """
    if not question.strip():
        raise InvalidDataError("The question is empty; ask something the passages may answer.")
    if not passages:
        return _refuse("No passages were retrieved for this question.", prompt.ref)
    reply = model.chat(
        prompt.messages(question, passages),
        response_format=response_format(passages),
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        prompt=prompt.ref,
    )
    usage = Usage(reply.prompt_tokens, reply.completion_tokens)
    draft = read_reply(reply.content or "", passages)
    if draft.text is None:
        reason = draft.problem or "The model said the passages do not contain the answer."
        if draft.problem and reply.finish_reason == "length":
            reason = f"The model's reply was cut off at max_tokens ({max_tokens}) unfinished."
        return _refuse(reason, prompt.ref, usage, model=reply.model)
    checked = verify(draft.text, draft.claimed, passages)
    if not checked.citations or not MARKER.sub("", checked.text).strip(" .,;:"):
        reason = "No citation in the answer quotes its passage verbatim"
        if checked.dropped:
            reason += f" (first: {checked.dropped[0].reason})"
        return _refuse(reason + ".", prompt.ref, usage, checked.dropped, reply.model)
    return Answer(
        checked.text, checked.citations, True, None, prompt.ref, usage, checked.dropped, reply.model
    )


def _refuse(
    reason: str,
    prompt_ref: str,
    usage: Usage | None = None,
    dropped: list[DroppedCitation] | None = None,
    model: str = "",
) -> Answer:
    return Answer(
        NOT_SUPPORTED, [], False, reason, prompt_ref, usage or Usage(), dropped or [], model
    )
