"""What a person says about a model version for its card: intended use and limitations.

The records cannot know what a model is for or where it fails; its owner writes that down.
The words live on the MLflow model version as tags (so MLflow's UI shows them too), and
each change is audited as whoever made it. `run_tags` reads the run's tags a card also
cites (the code version, the scheduler job that ran it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from forgeml.core.errors import UsageError
from forgeml.core.store import ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking._mlflow import open_client

# note field -> the MLflow model-version tag that holds it
NOTE_TAGS: Final = {
    "intended_use": "forgeml.card.intended_use",
    "limitations": "forgeml.card.limitations",
}
MAX_NOTE_CHARS = 5000  # MLflow's limit on a tag value (5,000 characters in its SQL store)


def version_notes(workspace: Workspace, record: ModelVersionRecord) -> dict[str, str | None]:
    """The version's notes (`NOTE_TAGS`' fields), None where nobody has written one."""
    version = open_client(workspace).get_model_version(record.name, str(record.version))
    tags = version.tags or {}
    return {field: tags.get(tag) or None for field, tag in NOTE_TAGS.items()}


def set_version_notes(
    workspace: Workspace, record: ModelVersionRecord, notes: Mapping[str, str | None]
) -> dict[str, str | None]:
    """Write the given notes (None: leave as is) on the version, audited; return all of them.

    Raises:
        UsageError: an unknown field, or a note that is blank or over `MAX_NOTE_CHARS`.
    """
    given = {field: text for field, text in notes.items() if text is not None}
    for field, text in given.items():
        if field not in NOTE_TAGS:
            raise UsageError(f"Unknown card note '{field}': use {' or '.join(NOTE_TAGS)}.")
        if not text.strip():
            raise UsageError(f"The {field.replace('_', ' ')} text is empty.")
        if "\x00" in text:  # PostgreSQL's text cannot hold one
            raise UsageError(f"The {field.replace('_', ' ')} text holds a NUL character.")
        if len(text) > MAX_NOTE_CHARS:
            raise UsageError(
                f"The {field.replace('_', ' ')} text is {len(text)} characters; "
                f"the most a model version keeps is {MAX_NOTE_CHARS}."
            )
    client = open_client(workspace)
    with workspace.store.session() as session:
        for field, text in given.items():
            client.set_model_version_tag(record.name, str(record.version), NOTE_TAGS[field], text)
        if given:
            workspace.audit(session, "model.card", record.ref, {"fields": sorted(given)})
    return version_notes(workspace, record)


def run_tags(workspace: Workspace, run_id: str) -> dict[str, str]:
    """The MLflow tags of run `run_id` (code version, job, dataset digest, ...)."""
    return dict(open_client(workspace).get_run(run_id).data.tags)
