from __future__ import annotations

from typing import Any

import pytest

from forgeml.core.errors import ConfigError, InvalidDataError, PromptTemplateError
from forgeml.core.workspace import Workspace
from forgeml.prompts import PromptSpec, create_prompt, render_prompt
from tests.prompts.conftest import chat_spec, stored_counts, text_spec


def _typed_spec() -> PromptSpec:
    return PromptSpec.model_validate(
        {
            "template": "{{ n }} {{ x }} {{ flag }} {{ tags|join(',') }} {{ meta.get('k') }}",
            "variables": [
                {"name": "n", "type": "integer"},
                {"name": "x", "type": "number"},
                {"name": "flag", "type": "boolean"},
                {"name": "tags", "type": "list"},
                {"name": "meta", "type": "object", "required": False, "default": {"k": "d"}},
            ],
        }
    )


@pytest.mark.parametrize(
    ("values", "sentence"),
    [
        (
            {"question": "q", "nope": 1},
            "Prompt qa@v1 has no variable 'nope' (it declares: question).",
        ),
        ({}, "Prompt qa@v1 needs the variable 'question'."),
        ({"question": 3}, "Prompt qa@v1's variable 'question' must be a string, not int 3."),
    ],
)
def test_an_unknown_missing_or_mistyped_variable_is_one_sentence(
    workspace: Workspace, values: dict[str, Any], sentence: str
) -> None:
    create_prompt(workspace, "qa", text_spec())

    with pytest.raises(InvalidDataError) as raised:
        render_prompt(workspace, "qa", values)

    assert str(raised.value) == sentence


def test_command_line_text_is_read_by_the_declared_type(workspace: Workspace) -> None:
    create_prompt(workspace, "typed", _typed_spec())
    values = {"n": "3", "x": "0.5", "flag": "yes", "tags": '["a", "b"]'}

    _, rendered = render_prompt(workspace, "typed", values, as_text=True)

    assert rendered == "3 0.5 True a,b d"


@pytest.mark.parametrize(
    ("name", "text"), [("n", "three"), ("x", "half"), ("flag", "maybe"), ("tags", "[a")]
)
def test_text_that_is_not_of_the_declared_type_is_refused(
    workspace: Workspace, name: str, text: str
) -> None:
    create_prompt(workspace, "typed", _typed_spec())
    values = {"n": "3", "x": "0.5", "flag": "yes", "tags": "[]", name: text}

    with pytest.raises(InvalidDataError, match=f"variable '{name}' must be a"):
        render_prompt(workspace, "typed", values, as_text=True)


def test_a_boolean_is_not_an_integer(workspace: Workspace) -> None:
    create_prompt(workspace, "chat", chat_spec())

    with pytest.raises(InvalidDataError, match="'words' must be an integer, not bool"):
        render_prompt(workspace, "chat", {"question": "q", "words": True})


def test_a_template_reading_an_undeclared_variable_is_refused_and_not_stored(
    workspace: Workspace,
) -> None:
    before = stored_counts(workspace)

    with pytest.raises(PromptTemplateError) as raised:
        create_prompt(workspace, "qa", text_spec("{{ question }} {{ answer }}"))

    assert str(raised.value) == (
        "The template of prompt qa uses 'answer', which is not among its declared variables."
    )
    assert stored_counts(workspace) == before


def test_an_example_that_does_not_fit_the_variables_is_refused_and_not_stored(
    workspace: Workspace,
) -> None:
    before = stored_counts(workspace)

    with pytest.raises(InvalidDataError, match=r"Prompt qa \(example 2\) needs the variable"):
        create_prompt(workspace, "qa", text_spec(examples=[{"question": "a"}, {}]))
    assert stored_counts(workspace) == before


@pytest.mark.parametrize(
    ("content", "sentence"),
    [
        ({}, "give exactly one of 'template' (text) or 'messages' (chat)"),
        ({"template": "a", "messages": [{"role": "user", "template": "b"}]}, "exactly one"),
        ({"messages": []}, "'messages' needs at least one message"),
        ({"template": "a", "variables": [{"name": "a"}, {"name": "a"}]}, "declared once"),
        ({"template": "a", "variables": [{"name": "_a"}]}, "String should match pattern"),
        ({"template": "a", "unknown": 1}, "Extra inputs are not permitted"),
    ],
)
def test_a_malformed_spec_is_refused(content: dict[str, Any], sentence: str) -> None:
    from forgeml.core.configfile import parse_model

    with pytest.raises(ConfigError, match=r"PROMPT\.yaml") as raised:
        parse_model(PromptSpec, content, "PROMPT.yaml")

    assert sentence in str(raised.value) or "unknown key" in str(raised.value)
