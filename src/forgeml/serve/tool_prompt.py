"""A conversation with tools, rendered into one prompt by the model's chat template.

A template that takes `tools=` (Qwen2.5, Llama 3.1, Hermes, ...) renders them itself. One
that does not, SmolLM2's among them, gets the tools in a system block in the style of the
Hermes / Qwen2.5 templates: the functions' JSON signatures between `<tools></tools>`, and
the request to answer with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.
Earlier turns go back the same way: an assistant message's tool calls as `<tool_call>`
blocks, and tool results as a user turn of `<tool_response>` blocks.

Messages and tools are OpenAI's shapes as plain dicts (`content` already text).
"""

from __future__ import annotations

import json
from typing import Any

from forgeml.core.errors import ConfigError

__all__ = ["render_chat", "template_takes_tools", "tools_system_block"]

TOOLS_PREAMBLE = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools></tools> XML tags. You may call one or more functions to assist with the user "
    "query. Don't make assumptions about what values to plug into functions. Here are the "
    "available tools:\n<tools>\n{signatures}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def template_takes_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders a `tools` list itself."""
    return "tools" in str(getattr(tokenizer, "chat_template", None) or "")


def tools_system_block(tools: list[dict[str, Any]]) -> str:
    """The Hermes-style system text that declares `tools` (OpenAI's tool dicts)."""
    signatures = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return TOOLS_PREAMBLE.format(signatures=signatures)


def _call_object(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"])
    except json.JSONDecodeError:
        arguments = function["arguments"]  # shown as the model wrote it
    return {"name": function["name"], "arguments": arguments}


def _call_text(call: dict[str, Any]) -> str:
    body = json.dumps(_call_object(call), ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def _plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages for a template without tool support: tool turns as text."""
    plain: list[dict[str, str]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role in ("tool", "function"):
            response = f"<tool_response>\n{content}\n</tool_response>"
            if (
                plain
                and plain[-1]["role"] == "user"
                and plain[-1]["content"].startswith("<tool_response>")
            ):  # results of parallel calls go back in one turn, as Qwen2.5's template does
                plain[-1]["content"] += "\n" + response
            else:
                plain.append({"role": "user", "content": response})
            continue
        calls = [_call_text(call) for call in message.get("tool_calls") or []]
        text = "\n".join(part for part in (content, *calls) if part)
        plain.append({"role": "system" if role == "developer" else role, "content": text})
    return plain


def _with_tools_block(messages: list[dict[str, str]], block: str) -> list[dict[str, str]]:
    if messages and messages[0]["role"] == "system":
        first = {"role": "system", "content": f"{messages[0]['content']}\n\n{block}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages for a template with tool support (arguments as objects, as HF expects)."""
    shaped = []
    for message in messages:
        shaped_message = {k: v for k, v in message.items() if v is not None}
        if message.get("tool_calls"):
            shaped_message["tool_calls"] = [
                {"type": "function", "function": _call_object(call)}
                for call in message["tool_calls"]
            ]
        shaped.append(shaped_message)
    return shaped


def render_chat(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> str:
    """The prompt for `messages` (and `tools`, when given), ending where the reply starts.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        messages: OpenAI chat messages as dicts, `content` as text.
        tools: OpenAI tool dicts to declare, or None (no tools offered).

    Returns:
        The prompt text, with the template's generation prompt appended.

    Raises:
        ConfigError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError("The model's tokenizer has no chat template; use /v1/completions.")
    if tools and template_takes_tools(tokenizer):
        rendered = tokenizer.apply_chat_template(
            _template_messages(messages), tools=tools, tokenize=False, add_generation_prompt=True
        )
        return str(rendered)
    plain = _plain_messages(messages)
    if tools:
        plain = _with_tools_block(plain, tools_system_block(tools))
    rendered = tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
    return str(rendered)
