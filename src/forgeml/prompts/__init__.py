"""Versioned prompt templates (sandboxed Jinja2), aliases, splits, evaluation, the chat client.

The registry and evaluation load on first use (PEP 562), so a command that only needs
the chat client does not import the store (SQLAlchemy) with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from forgeml.prompts.client import ChatClient, ChatModel, ChatReply, ToolCall, api_key_from_env

if TYPE_CHECKING:
    from forgeml.prompts.evaluate import EvalResult, VersionScore, evaluate_prompts
    from forgeml.prompts.registry import (
        PromptVersion,
        create_prompt,
        find_prompt,
        get_prompt,
        list_prompts,
        prompt_detail,
        prompt_summary,
        prompt_versions,
        render_prompt,
        set_alias,
    )
    from forgeml.prompts.rows import load_rows
    from forgeml.prompts.scoring import Metric, parse_metric
    from forgeml.prompts.spec import Message, ModelDefaults, PromptSpec, Rendered
    from forgeml.prompts.split import (
        PromptSplit,
        clear_split,
        get_split,
        parse_weights,
        set_split,
    )
    from forgeml.prompts.template import compile_template
    from forgeml.prompts.variables import Variable

_LAZY = {
    "EvalResult": "evaluate",
    "VersionScore": "evaluate",
    "evaluate_prompts": "evaluate",
    "PromptVersion": "registry",
    "create_prompt": "registry",
    "find_prompt": "registry",
    "get_prompt": "registry",
    "list_prompts": "registry",
    "prompt_detail": "registry",
    "prompt_summary": "registry",
    "prompt_versions": "registry",
    "render_prompt": "registry",
    "set_alias": "registry",
    "load_rows": "rows",
    "Metric": "scoring",
    "parse_metric": "scoring",
    "PromptSplit": "split",
    "clear_split": "split",
    "get_split": "split",
    "parse_weights": "split",
    "set_split": "split",
    "Message": "spec",
    "ModelDefaults": "spec",
    "PromptSpec": "spec",
    "Rendered": "spec",
    "compile_template": "template",
    "Variable": "variables",
}

__all__ = [
    "ChatClient",
    "ChatModel",
    "ChatReply",
    "EvalResult",
    "Message",
    "Metric",
    "ModelDefaults",
    "PromptSpec",
    "PromptSplit",
    "PromptVersion",
    "Rendered",
    "ToolCall",
    "Variable",
    "VersionScore",
    "api_key_from_env",
    "clear_split",
    "compile_template",
    "create_prompt",
    "evaluate_prompts",
    "find_prompt",
    "get_prompt",
    "get_split",
    "list_prompts",
    "load_rows",
    "parse_metric",
    "parse_weights",
    "prompt_detail",
    "prompt_summary",
    "prompt_versions",
    "render_prompt",
    "set_alias",
    "set_split",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"forgeml.prompts.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'forgeml.prompts' has no attribute {name!r}")
