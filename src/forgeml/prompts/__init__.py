"""Versioned prompt templates (sandboxed Jinja2), aliases, evaluation, and the chat client."""

from forgeml.prompts.client import ChatClient, ChatModel, ChatReply, ToolCall

__all__ = ["ChatClient", "ChatModel", "ChatReply", "ToolCall"]
