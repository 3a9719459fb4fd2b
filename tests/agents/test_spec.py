from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from forgeml.agents import BUILTIN_TOOLS, ToolContext, build_registry, load_spec, parse_spec
from forgeml.core.errors import ConfigError

MODEL = {"url": "http://127.0.0.1:1/v1", "name": "smol"}


def spec_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_spec_loads_with_its_defaults(tmp_path: Path) -> None:
    path = spec_file(
        tmp_path,
        {"model": MODEL, "tools": [{"name": "calculator"}, {"name": "http_get",
         "options": {"allow": ["docs.python.org"]}, "requires_approval": True}]},
    )  # fmt: skip

    spec = load_spec(path)
    registry = build_registry(spec, ToolContext())

    assert registry.names() == ["calculator", "http_get"]
    assert registry.get("http_get").requires_approval  # type: ignore[union-attr]
    assert (spec.budgets.max_steps, spec.budgets.max_time_s, spec.budgets.max_tokens) == (
        8, 300.0, 16_000,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (
            {"model": MODEL, "budgets": {"max_steps": 0}},
            "key 'budgets.max_steps': Input should be greater than 0 (got 0).",
        ),
        (
            {"model": MODEL, "budgets": {"max_time_s": 0}},
            "key 'budgets.max_time_s': Input should be greater than 0 (got 0).",
        ),
        (
            {"model": MODEL, "tools": [{"name": "calculator"}, {"name": "python_exec"}]},
            "key 'tools.1.name': unknown tool 'python_exec' (built-in tools: calculator, "
            "http_get, predict, rag_search, sql_query).",
        ),
        (
            {"model": MODEL, "tools": [{"name": "http_get", "options": {"allow": []}}]},
            "tools.0.options: key 'allow': List should have at least 1 item after validation, "
            "not 0 (got []).",
        ),
        (
            {"model": MODEL, "tools": [{"name": "sql_query", "options": {"rows": 5}}]},
            "tools.0.options: unknown key 'rows'.",
        ),
        ({"model": {"url": "x"}}, "missing required key 'model.name'."),
        ({"model": MODEL, "tool": []}, "unknown key 'tool'."),
        (
            {"model": MODEL, "tools": [{"name": "calculator"}], "tool_choice": "http_get"},
            "key 'tool_choice': 'http_get' is none of auto, required, none or the agent's "
            "tools (calculator).",
        ),
        (
            {"model": MODEL, "tool_choice": "required"},
            "key 'tool_choice': 'required' needs tools to call.",
        ),
    ],
)
def test_a_bad_spec_is_one_sentence_naming_the_key(
    tmp_path: Path, data: dict[str, Any], sentence: str
) -> None:
    path = spec_file(tmp_path, data)

    with pytest.raises(ConfigError) as raised:
        load_spec(path)

    assert str(raised.value) == f"{path}: {sentence}"


def test_a_tool_that_needs_what_is_not_there_says_so() -> None:
    spec = parse_spec({"model": MODEL, "tools": [{"name": "rag_search",
                       "options": {"index": "docs"}}]}, "agent.yaml")  # fmt: skip

    with pytest.raises(ConfigError) as raised:
        build_registry(spec, ToolContext())

    assert str(raised.value) == "rag_search needs a RAG index, and none can be opened here yet."


def test_there_is_no_code_execution_tool() -> None:
    assert sorted(BUILTIN_TOOLS) == ["calculator", "http_get", "predict", "rag_search", "sql_query"]
