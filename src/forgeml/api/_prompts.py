"""Prompt routes: the registry's prompts and versions, a version's content, new versions,
aliases, traffic splits and rendering.

Answers are what `forgeml prompts create|list|versions|show|alias|split|render --json`
print; every change is audited as the caller. A list shows the request's project's prompts;
an item route is authorized in its prompt's project, and a change must act in it. `prompts
eval` calls a model endpoint and is submitted as a job (`POST /api/v1/jobs`), not served here.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.prompts import (
    PromptSpec,
    clear_split,
    create_prompt,
    list_prompts,
    prompt_detail,
    prompt_summary,
    prompt_versions,
    render_prompt,
    set_alias,
    set_split,
)

router = CliRouter(prefix="/api/v1/prompts")


class Alias(BaseModel):
    """`POST /api/v1/prompts/{ref}/alias`: the alias to point at the version."""

    model_config = ConfigDict(extra="forbid")

    alias: str = Field(max_length=64, description="e.g. production.")


class Split(BaseModel):
    """`PUT /api/v1/prompts/{name}/split`: aliases and their weights in whole percent."""

    model_config = ConfigDict(extra="forbid")

    weights: dict[str, int] = Field(
        max_length=64, description="Alias -> percent; two or more, summing to 100."
    )


class Render(BaseModel):
    """`POST /api/v1/prompts/{ref}/render`: the variables, and whether to render as text."""

    model_config = ConfigDict(extra="forbid")

    variables: dict[str, Any] = Field(default_factory=dict, max_length=256)
    as_text: bool = Field(
        default=False, description="Values are strings to convert as `--var k=v` does."
    )


def _position(item: dict[str, Any], sort: str) -> tuple[Any, Any]:
    return item[sort], item["ref"]


@router.get("", dependencies=[require("prompts:read")])
def prompts(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every prompt at its latest version (as `prompts list --json`), a page at a time."""
    items = [prompt_summary(version) for version in list_prompts(workspace(request))]
    kept, cursor = in_memory(items, page, _position)
    link(request, response, cursor)
    return kept


@router.get("/{name}/versions", dependencies=[require("prompts:read", resource="prompt")])
def versions(
    request: Request,
    response: Response,
    name: str,
    page: Annotated[Page, Depends(pages(["version", "created_at"], "version"))],
) -> list[dict[str, Any]]:
    """Every version of `name` with its aliases (as `prompts versions --json`)."""
    items = [prompt_summary(version) for version in prompt_versions(workspace(request), name)]
    kept, cursor = in_memory(items, page, _position)
    link(request, response, cursor)
    return kept


@router.get("/{ref}", dependencies=[require("prompts:read", resource="prompt")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@ALIAS`) with its content and split."""
    return prompt_detail(workspace(request), ref)


@router.post("/{ref}/alias", dependencies=[require("prompts:write", resource="prompt")])
def alias(request: Request, ref: str, body: Alias) -> dict[str, Any]:
    """Point `NAME@ALIAS` at the version `ref` names (as `prompts alias --json`)."""
    return prompt_summary(set_alias(acting(request), ref, body.alias))


@router.post("/{name}/versions", dependencies=[require("prompts:write", resource="prompt")])
def create(request: Request, name: str, body: PromptSpec) -> dict[str, Any]:
    """Store `body` as the next version of `name` (identical content: the same version,
    `created` false), as `prompts create --json` prints it."""
    version, created = create_prompt(acting(request), name, body)
    return {**prompt_summary(version), "created": created}


@router.put("/{name}/split", dependencies=[require("prompts:write", resource="prompt")])
def split(request: Request, name: str, body: Split) -> dict[str, Any]:
    """Split the traffic of callers who name only the prompt between aliases."""
    return {"name": name, "split": set_split(acting(request), name, body.weights).as_dict()}


@router.delete("/{name}/split", dependencies=[require("prompts:write", resource="prompt")])
def remove_split(request: Request, name: str) -> dict[str, Any]:
    """Remove the prompt's split (`removed` null: it had none)."""
    removed = clear_split(acting(request), name)
    return {"name": name, "split": None, "removed": removed and removed.as_dict()}


@router.post("/{ref}/render", dependencies=[require("prompts:read", resource="prompt")])
def render(request: Request, ref: str, body: Render) -> dict[str, Any]:
    """The version's text or chat messages for the variables (`prompts render --json`)."""
    version, rendered = render_prompt(workspace(request), ref, body.variables, as_text=body.as_text)
    return {"ref": version.ref, "rendered": rendered}
