from __future__ import annotations

import pytest
from sqlalchemy import select

from forgeml.core.errors import InvalidNameError, NotFoundError, UsageError
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.prompts import (
    create_prompt,
    get_prompt,
    list_prompts,
    prompt_versions,
    render_prompt,
    set_alias,
)
from tests.prompts.conftest import chat_spec, stored_counts, text_spec


def test_a_created_prompt_reads_back_with_its_content(workspace: Workspace) -> None:
    spec = text_spec(description="Q and A", examples=[{"question": "Why?"}])
    created, is_new = create_prompt(workspace, "qa", spec)

    loaded = get_prompt(workspace, "qa@v1")

    assert is_new
    assert created.ref == loaded.ref == "qa@v1"
    assert loaded.spec == spec
    assert loaded.record.kind == "text"
    assert loaded.record.digest == spec.digest()
    assert loaded.record.created_by == "tester"


def test_identical_content_returns_the_existing_version_and_writes_nothing(
    workspace: Workspace,
) -> None:
    first, _ = create_prompt(workspace, "qa", text_spec())
    before = stored_counts(workspace)

    again, is_new = create_prompt(workspace, "qa", text_spec())

    assert not is_new
    assert again.ref == first.ref == "qa@v1"
    assert stored_counts(workspace) == before


def test_changed_content_is_a_new_version_and_the_old_one_is_unchanged(
    workspace: Workspace,
) -> None:
    create_prompt(workspace, "qa", text_spec())
    second, is_new = create_prompt(workspace, "qa", text_spec("Question: {{ question }}"))

    assert is_new and second.ref == "qa@v2"
    assert get_prompt(workspace, "qa@v1").spec.template == "Q: {{ question }}\nA:"
    assert [v.ref for v in prompt_versions(workspace, "qa")] == ["qa@v1", "qa@v2"]
    assert get_prompt(workspace, "qa").ref == "qa@v2"
    assert get_prompt(workspace, "qa@latest").ref == "qa@v2"


def test_the_same_content_under_another_name_is_that_names_first_version(
    workspace: Workspace,
) -> None:
    create_prompt(workspace, "qa", text_spec())
    other, is_new = create_prompt(workspace, "other", text_spec())

    assert is_new and other.ref == "other@v1"
    assert [p.ref for p in list_prompts(workspace)] == ["other@v1", "qa@v1"]


def test_aliases_point_at_versions_and_move(workspace: Workspace) -> None:
    create_prompt(workspace, "qa", text_spec())
    create_prompt(workspace, "qa", text_spec("Question: {{ question }}"))

    set_alias(workspace, "qa@v1", "production")
    assert get_prompt(workspace, "qa@production").ref == "qa@v1"
    assert get_prompt(workspace, "qa@v1").aliases == ["production"]

    set_alias(workspace, "qa@v2", "production")
    assert get_prompt(workspace, "qa@production").ref == "qa@v2"
    assert get_prompt(workspace, "qa@v1").aliases == []


def test_every_create_and_alias_is_an_audit_event(workspace: Workspace) -> None:
    create_prompt(workspace, "qa", text_spec())
    create_prompt(workspace, "qa", text_spec())  # the same content: no event
    set_alias(workspace, "qa@v1", "production")
    set_alias(workspace, "qa", "production")

    with workspace.store.session() as session:
        events = [
            (e.action, e.object_ref, e.actor, e.payload)
            for e in session.scalars(select(AuditEvent).order_by(AuditEvent.seq))
        ]

    digest = text_spec().digest()
    assert events == [
        ("prompt.create", "qa@v1", "tester", {"digest": digest}),
        ("prompt.alias", "qa@v1", "tester", {"alias": "production", "previous": None}),
        ("prompt.alias", "qa@v1", "tester", {"alias": "production", "previous": 1}),
    ]


def test_a_digest_prefix_names_its_version(workspace: Workspace) -> None:
    created, _ = create_prompt(workspace, "qa", text_spec())

    assert get_prompt(workspace, f"qa@{created.record.digest[:8]}").ref == "qa@v1"


@pytest.mark.parametrize(
    ("ref", "error", "sentence"),
    [
        ("nosuch", NotFoundError, "Prompt 'nosuch' does not exist (see `forgeml prompts list`)."),
        ("qa@v9", NotFoundError, "Prompt 'qa' has no version v9 (its versions are v1..v1)."),
        ("qa@staging", NotFoundError, "Prompt 'qa' has no alias 'staging' (its aliases: none)."),
        ("qa@a b", UsageError, "Invalid prompt reference 'qa@a b'"),
        ("../qa", InvalidNameError, "Invalid prompt name '../qa'"),
    ],
)
def test_a_bad_reference_is_one_sentence(
    workspace: Workspace, ref: str, error: type[Exception], sentence: str
) -> None:
    create_prompt(workspace, "qa", text_spec())

    with pytest.raises(error) as raised:
        get_prompt(workspace, ref)

    assert str(raised.value).startswith(sentence)


@pytest.mark.parametrize("alias", ["latest", "v3", "bad alias", ""])
def test_an_alias_that_would_shadow_a_version_is_refused(workspace: Workspace, alias: str) -> None:
    create_prompt(workspace, "qa", text_spec())
    before = stored_counts(workspace)

    with pytest.raises(UsageError, match="Invalid alias"):
        set_alias(workspace, "qa@v1", alias)
    assert stored_counts(workspace) == before


def test_a_chat_prompt_renders_messages(workspace: Workspace) -> None:
    create_prompt(workspace, "chat", chat_spec())

    version, rendered = render_prompt(workspace, "chat", {"question": "Why is the sky blue?"})

    assert version.record.kind == "chat"
    assert rendered == [
        {"role": "system", "content": "Answer in 3 words."},
        {"role": "user", "content": "Why is the sky blue?"},
    ]


def test_a_text_prompt_renders_text(workspace: Workspace) -> None:
    create_prompt(workspace, "qa", text_spec())

    _, rendered = render_prompt(workspace, "qa@v1", {"question": "Why?"})

    assert rendered == "Q: Why?\nA:"
