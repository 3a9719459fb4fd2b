"""Prompt routes: the registry's prompts and versions, a version's content, and aliases.

Answers are what `forgeml prompts list|versions|show|alias --json` print; moving an alias
is audited as the caller.
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
    list_prompts,
    prompt_detail,
    prompt_summary,
    prompt_versions,
    set_alias,
)

router = CliRouter(prefix="/api/v1/prompts")


class Alias(BaseModel):
    """`POST /api/v1/prompts/{ref}/alias`: the alias to point at the version."""

    model_config = ConfigDict(extra="forbid")

    alias: str = Field(max_length=64, description="e.g. production.")


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


@router.get("/{name}/versions", dependencies=[require("prompts:read")])
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


@router.get("/{ref}", dependencies=[require("prompts:read")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@ALIAS`) with its content and split."""
    return prompt_detail(workspace(request), ref)


@router.post("/{ref}/alias", dependencies=[require("prompts:write")])
def alias(request: Request, ref: str, body: Alias) -> dict[str, Any]:
    """Point `NAME@ALIAS` at the version `ref` names (as `prompts alias --json`)."""
    return prompt_summary(set_alias(acting(request), ref, body.alias))
