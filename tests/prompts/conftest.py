"""Prompt specs shared by the prompt tests, and a look into what the store holds."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from forgeml.core.store import AuditEvent, PromptVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.prompts import PromptSpec


def text_spec(template: str = "Q: {{ question }}\nA:", **fields: Any) -> PromptSpec:
    """A text prompt with one required string variable, `question`."""
    content: dict[str, Any] = {
        "template": template,
        "variables": [{"name": "question", "description": "What is asked."}],
    }
    content.update(fields)
    return PromptSpec.model_validate(content)


def chat_spec(system: str = "Answer in {{ words }} words.") -> PromptSpec:
    """A chat prompt: a system message with an integer `words` (default 3), then `question`."""
    return PromptSpec.model_validate(
        {
            "messages": [
                {"role": "system", "template": system},
                {"role": "user", "template": "{{ question }}"},
            ],
            "variables": [
                {"name": "question"},
                {"name": "words", "type": "integer", "default": 3},
            ],
        }
    )


def stored_counts(workspace: Workspace) -> tuple[int, int]:
    """(prompt versions, audit events) in the workspace's store."""
    with workspace.store.session() as session:
        versions = session.scalar(select(func.count()).select_from(PromptVersionRecord))
        events = session.scalar(select(func.count()).select_from(AuditEvent))
    return versions or 0, events or 0


@pytest.fixture(autouse=True)
def _no_outside_tracking(monkeypatch: pytest.MonkeyPatch) -> None:
    # runs go to the test's own FORGEML_HOME, never to a tracking server set outside
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
