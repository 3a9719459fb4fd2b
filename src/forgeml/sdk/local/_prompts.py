"""The local side of the prompts' seam (`forgeml.sdk.prompts`, `forgeml prompts`)."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` methods below would shadow the type


class LocalPrompts:
    """The local workspace's prompts, as `forgeml.client.Prompts` answers them remotely."""

    def create(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        from forgeml.prompts import PromptSpec, create_prompt, prompt_summary

        with closing(open_workspace()) as workspace:
            version, created = create_prompt(workspace, name, PromptSpec.model_validate(spec))
            return {**prompt_summary(version), "created": created}

    def list(self) -> Items:
        from forgeml.prompts import list_prompts, prompt_summary

        with closing(open_workspace()) as workspace:
            return [prompt_summary(version) for version in list_prompts(workspace)]

    def versions(self, name: str) -> Items:
        from forgeml.prompts import prompt_summary, prompt_versions

        with closing(open_workspace()) as workspace:
            return [prompt_summary(version) for version in prompt_versions(workspace, name)]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.prompts import prompt_detail

        with closing(open_workspace()) as workspace:
            return prompt_detail(workspace, ref)

    def alias(self, ref: str, alias: str) -> dict[str, Any]:
        from forgeml.prompts import prompt_summary, set_alias

        with closing(open_workspace()) as workspace:
            return prompt_summary(set_alias(workspace, ref, alias))

    def split(self, name: str, weights: dict[str, int]) -> dict[str, Any]:
        from forgeml.prompts import set_split

        with closing(open_workspace()) as workspace:
            return {"name": name, "split": set_split(workspace, name, weights).as_dict()}

    def clear_split(self, name: str) -> dict[str, Any]:
        from forgeml.prompts import clear_split

        with closing(open_workspace()) as workspace:
            removed = clear_split(workspace, name)
        return {"name": name, "split": None, "removed": removed and removed.as_dict()}

    def render(self, ref: str, variables: dict[str, Any], as_text: bool = False) -> dict[str, Any]:
        from forgeml.prompts import render_prompt

        with closing(open_workspace()) as workspace:
            version, rendered = render_prompt(workspace, ref, variables, as_text=as_text)
            return {"ref": version.ref, "rendered": rendered}
