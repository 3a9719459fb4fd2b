"""MLflow's CVE-2023-6709: Jinja2 template injection through a stored prompt or recipe.

Each payload reaches for Python's internals (to list subclasses, read globals, run `id`).
Here each is refused with one sentence: when the prompt is created (its templates are
checked, its examples rendered), and again when a stored version is rendered.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from forgeml.core.errors import PromptTemplateError
from forgeml.core.store import PromptVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.prompts import PromptSpec, create_prompt, render_prompt
from tests.prompts.conftest import stored_counts, text_spec

PAYLOADS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ self._TemplateReference__context }}",
    "{% for x in ().__class__.__base__.__subclasses__() %}{{ x }}{% endfor %}",
    "{{ question['__class__'] }}",
    "{{ question|attr('__class__') }}",
    "{{ question|list|join(',', attribute='__class__') }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ range.__self__ }}",
    "{% macro m() %}{% endmacro %}{{ m.__globals__ }}",
    "{% include 'x' %}",
    "{% import 'os' as os %}",
    "{{ question.format(1) }}",
    "{{ '%s' % question }}",
]


def _one_sentence(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and text.endswith(".")
    return text


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_in_a_text_template_is_refused_at_create(
    workspace: Workspace, payload: str
) -> None:
    before = stored_counts(workspace)

    with pytest.raises(PromptTemplateError) as raised:
        create_prompt(workspace, "evil", text_spec(payload, examples=[{"question": "q"}]))

    _one_sentence(raised.value)
    assert stored_counts(workspace) == before


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_in_a_chat_message_is_refused_at_create(
    workspace: Workspace, payload: str
) -> None:
    spec = PromptSpec.model_validate(
        {
            "messages": [
                {"role": "system", "template": "Be brief."},
                {"role": "user", "template": payload},
            ],
            "variables": [{"name": "question"}],
            "examples": [{"question": "q"}],
        }
    )
    before = stored_counts(workspace)

    with pytest.raises(PromptTemplateError, match=r"message 2 \(user\) of prompt evil"):
        create_prompt(workspace, "evil", spec)
    assert stored_counts(workspace) == before


def _lookup_spec(examples: list[dict[str, Any]], value_type: str = "string") -> PromptSpec:
    # nothing to see when stored: the attribute is only named by a variable's value
    return PromptSpec.model_validate(
        {
            "template": "{{ value[key] }}",
            "variables": [{"name": "value", "type": value_type}, {"name": "key"}],
            "examples": examples,
        }
    )


@pytest.mark.parametrize("key", ["__class__", "__init__", "__doc__"])
def test_a_payload_reached_through_an_example_is_refused_at_create(
    workspace: Workspace, key: str
) -> None:
    before = stored_counts(workspace)

    with pytest.raises(PromptTemplateError) as raised:
        create_prompt(workspace, "lookup", _lookup_spec([{"value": "s", "key": key}]))

    assert _one_sentence(raised.value) == (
        f"The template of prompt lookup failed to render: access to attribute '{key}' "
        "of 'str' object is unsafe."
    )
    assert stored_counts(workspace) == before


@pytest.mark.parametrize("key", ["__class__", "__globals__", "mro"])
def test_a_payload_reached_through_a_variable_is_refused_at_render(
    workspace: Workspace, key: str
) -> None:
    create_prompt(workspace, "lookup", _lookup_spec([{"value": {"a": "b"}, "key": "a"}], "object"))

    with pytest.raises(PromptTemplateError) as raised:
        render_prompt(workspace, "lookup", {"value": {}, "key": key})

    _one_sentence(raised.value)


def test_a_payload_given_as_a_value_is_text_and_is_never_evaluated(workspace: Workspace) -> None:
    create_prompt(workspace, "qa", text_spec("{{ question }}"))

    for payload in PAYLOADS:
        _, rendered = render_prompt(workspace, "qa", {"question": payload})
        assert rendered == payload


@pytest.mark.parametrize("payload", PAYLOADS[:4])
def test_a_payload_written_into_the_store_directly_is_refused_at_render(
    workspace: Workspace, payload: str
) -> None:
    create_prompt(workspace, "qa", text_spec())
    with workspace.store.session() as session:
        record = session.scalars(select(PromptVersionRecord)).one()
        record.content = {**record.content, "template": payload}

    with pytest.raises(PromptTemplateError) as raised:
        render_prompt(workspace, "qa", {"question": "q"})

    _one_sentence(raised.value)


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("{{ 'a' * 10**9 }}", {}),
        ("{{ question * 1000000000 }}", {"question": "ab"}),
        ("{{ ((10 ** 64) ** 64) ** 64 }}", {}),
        ("{% set s = 'x' * 1000000 %}{{ s ~ s }}", {}),
        ("{% set s = 'x' * 1000000 %}{{ s + s }}", {}),
        ("{{ (question|list)|join(question) }}", {"question": "x" * 100_000}),
        (
            "{% for a in question %}{% for b in question %}{% for c in question %}"
            "{% endfor %}{% endfor %}{% endfor %}",
            {"question": "x" * 1000},
        ),
        (
            "{% for a in question %}{% for b in question %}{{ question }}{% endfor %}{% endfor %}",
            {"question": "x" * 1000},
        ),
    ],
)
def test_a_huge_output_is_refused_before_it_is_built(
    workspace: Workspace, template: str, values: dict[str, Any]
) -> None:
    create_prompt(workspace, "big", text_spec(template, examples=[]))

    with pytest.raises(PromptTemplateError) as raised:
        render_prompt(workspace, "big", values or {"question": "q"})

    assert "more than" in _one_sentence(raised.value) or "power" in str(raised.value)
