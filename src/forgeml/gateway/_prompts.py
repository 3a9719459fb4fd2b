"""Registry prompts rendered by the gateway: the `forgeml_prompt` body field.

An OpenAI `/v1/chat/completions` or `/v1/completions` request may name a prompt of the
registry instead of carrying its text:

    {"model": "smollm2", "max_tokens": 32,
     "forgeml_prompt": {"name": "qa", "alias": "production", "variables": {"question": "..."}}}

`alias`, or `version` (3 or "v3"), picks the version; with neither, the prompt's traffic
split draws an alias by weight from the gateway's random source (`forgeml.prompts.split`),
and a prompt without a split renders its latest version. The version renders in the
prompts sandbox with `variables` (an unknown or missing variable, or a value of the wrong
type, is a 400), and the replica gets the body with `messages` (a chat prompt; a text
prompt as one user message) or `prompt` (a text prompt on /v1/completions), the prompt's
`temperature` and `max_tokens` where the caller gave none, and no `forgeml_prompt`. A body
that carries its own `messages` or `prompt` too is refused (an empty one, which OpenAI's
clients insist on sending, is replaced: `messages=[], extra_body={"forgeml_prompt": ...}`).
Both the replica and the caller see `x-forgeml-prompt: NAME@vN`
(`forgeml.serve.prompt_refs`), which the model server keeps in its request log.

The prompt must belong to the project of the deployment the request calls (a 403
otherwise): a key of one project's deployment cannot render another project's prompt.

Which version a name, alias or split means is read from the store and trusted for
`prompt_cache_ttl_s` on the gateway's clock, as verified keys are; a version's compiled
templates are kept while the process runs (versions are immutable).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forgeml.core.errors import InvalidDataError, PromptRequestError, PromptTemplateError
from forgeml.core.workspace import Workspace
from forgeml.prompts import PromptSplit, PromptVersion, find_prompt, get_split
from forgeml.prompts.spec import CheckedPrompt, Rendered

FIELD = "forgeml_prompt"
CHAT_PATH, COMPLETIONS_PATH = "/v1/chat/completions", "/v1/completions"
PATHS = frozenset({CHAT_PATH, COMPLETIONS_PATH})
_VERSION = re.compile(r"^v?([1-9][0-9]{0,9})$")
_MAX_CACHED = 1024  # entries per table; a full table is cleared (callers pick the names)
_T = TypeVar("_T")


class PromptField(BaseModel):
    """The `forgeml_prompt` field of a request body."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, description="The prompt's name.")
    alias: str | None = Field(default=None, max_length=128, description="An alias of it.")
    version: int | str | None = Field(default=None, description="A version: 3 or 'v3'.")
    variables: dict[str, Any] = Field(default_factory=dict, description="Its variables.")

    @model_validator(mode="after")
    def _one_selector(self) -> PromptField:
        if self.alias is not None and self.version is not None:
            raise ValueError("give 'alias' or 'version', not both")
        if self.version is not None and not _VERSION.match(str(self.version)):
            raise ValueError(
                f"'version' must be a version number like 3 or 'v3', not {self.version!r}"
            )
        return self

    def selector(self) -> str | None:
        """`NAME@vN` or `NAME@ALIAS` as asked; None when only the name is given."""
        if self.version is not None:
            match = _VERSION.match(str(self.version))
            return f"{self.name}@v{match.group(1) if match else self.version}"
        if self.alias is not None:
            return f"{self.name}@{self.alias}"
        return None


class PromptResolver:
    """Resolves and renders the prompts requests name, with a short-lived cache of the store."""

    def __init__(
        self,
        workspace: Workspace,
        ttl_s: float,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self._workspace = workspace
        self._ttl_s = ttl_s
        self._clock = clock
        self._rng = rng
        self._versions: dict[str, tuple[float, PromptVersion]] = {}  # reference -> version
        self._splits: dict[str, tuple[float, PromptSplit | None]] = {}  # name -> split
        self._compiled: dict[str, CheckedPrompt] = {}  # NAME@vN -> its compiled templates

    async def apply(self, payload: dict[str, Any], path: str, project: str) -> tuple[bytes, str]:
        """The body to forward in place of `payload`'s prompt field, and the `NAME@vN` used.

        Raises:
            PromptRequestError: the field is malformed, the body carries its own text too,
                or the variables do not fit the prompt (a 400).
            NotFoundError: no such prompt, alias or version.
            OtherProjectError: the prompt is not of `project`, the called deployment's.
        """
        field = _field(payload.pop(FIELD))
        version = await self.version(field)
        self._workspace.in_project(project).check_own("Prompt", field.name, version.record.project)
        try:
            rendered = self._checked(version).render(field.variables, version.ref)
        except (InvalidDataError, PromptTemplateError) as error:
            raise PromptRequestError(str(error)) from None
        _place(payload, path, rendered, version.ref)
        _defaults(payload, version, path)
        return orjson.dumps(payload), version.ref

    async def version(self, field: PromptField) -> PromptVersion:
        """The version `field` names; with no alias or version, one drawn by its split."""
        reference = field.selector()
        if reference is None:
            split = await self._cached(self._splits, field.name, get_split)
            reference = field.name if split is None else f"{field.name}@{split.draw(self._rng)}"
        return await self._cached(self._versions, reference, find_prompt)

    async def _cached(
        self,
        table: dict[str, tuple[float, _T]],
        key: str,
        read: Callable[[Workspace, str], _T],
    ) -> _T:
        entry = table.get(key)
        now = self._clock()
        if entry is not None and entry[0] > now:
            return entry[1]
        value = await asyncio.to_thread(read, self._workspace, key)
        if len(table) >= _MAX_CACHED:
            table.clear()
        table[key] = (now + self._ttl_s, value)
        return value

    def _checked(self, version: PromptVersion) -> CheckedPrompt:
        found = self._compiled.get(version.ref)
        if found is None:
            if len(self._compiled) >= _MAX_CACHED:
                self._compiled.clear()
            found = self._compiled[version.ref] = version.checked()
        return found


def _field(value: Any) -> PromptField:
    try:
        return PromptField.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in (FIELD, *first["loc"]))
        raise PromptRequestError(
            f"The request's '{where}' is invalid: {first['msg'].removeprefix('Value error, ')}."
        ) from None


def _place(payload: dict[str, Any], path: str, rendered: Rendered, ref: str) -> None:
    """Put the rendered prompt where `path`'s body carries its text."""
    own = "messages" if path == CHAT_PATH else "prompt"
    # empty is absent: OpenAI's clients insist on the argument (`messages=[]`, `prompt=""`)
    if payload.get(own) not in (None, [], ""):
        raise PromptRequestError(f"The request gives both '{own}' and '{FIELD}'; give one of them.")
    if path == CHAT_PATH:
        text_as_message = [{"role": "user", "content": rendered}]
        payload["messages"] = text_as_message if isinstance(rendered, str) else rendered
    elif isinstance(rendered, str):
        payload["prompt"] = rendered
    else:
        raise PromptRequestError(
            f"Prompt {ref} is a chat prompt; send it to {CHAT_PATH}, not {COMPLETIONS_PATH}."
        )


def _defaults(payload: dict[str, Any], version: PromptVersion, path: str) -> None:
    """The prompt's suggested sampling, where the caller chose none."""
    defaults = version.spec.model
    if defaults.temperature is not None:
        payload.setdefault("temperature", defaults.temperature)
    limits = ("max_tokens", "max_completion_tokens") if path == CHAT_PATH else ("max_tokens",)
    if defaults.max_tokens is not None and not any(key in payload for key in limits):
        payload["max_tokens"] = defaults.max_tokens
