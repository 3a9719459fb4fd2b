from __future__ import annotations

from typing import Literal

import pytest

from forgeml.agents import ToolArgumentsError, ToolRegistry, make_tool


def forecast(city: str, days: int = 3, unit: Literal["c", "f"] = "c") -> str:
    """Weather forecast for a city.

    Args:
        city: The city's name, e.g. "Oslo".
        days: How many days ahead,
            counting today.
        unit: Celsius or Fahrenheit.

    Returns:
        The forecast.
    """
    return f"{city} {days} {unit}"


def test_the_schema_comes_from_the_type_hints_and_the_docstring() -> None:
    schema = make_tool(forecast).schema()

    function = schema["function"]
    assert schema["type"] == "function"
    assert function["name"] == "forecast"
    assert function["description"] == "Weather forecast for a city."
    parameters = function["parameters"]
    assert parameters["required"] == ["city"]
    assert parameters["additionalProperties"] is False
    assert parameters["properties"]["city"]["type"] == "string"
    assert parameters["properties"]["city"]["description"] == 'The city\'s name, e.g. "Oslo".'
    assert parameters["properties"]["days"] == {
        "default": 3,
        "description": "How many days ahead, counting today.",
        "title": "Days",
        "type": "integer",
    }
    assert parameters["properties"]["unit"]["enum"] == ["c", "f"]


def test_arguments_on_the_schema_are_validated_and_converted() -> None:
    tool = make_tool(forecast)

    assert tool.validate('{"city": "Oslo", "days": 2}') == {"city": "Oslo", "days": 2, "unit": "c"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{}", "The arguments for forecast are off its schema: city: Field required."),
        (
            '{"city": "Oslo", "days": "soon"}',
            "The arguments for forecast are off its schema: days: Input should be a valid "
            "integer, unable to parse string as an integer.",
        ),
        (
            '{"city": "Oslo", "shell": "rm -rf /"}',
            "The arguments for forecast are off its schema: 'shell' is not a parameter.",
        ),
        ('{"city": "Oslo"', "The arguments for forecast are not valid JSON; send one JSON object."),
        (
            '{"city": "Oslo", "unit": "k"}',
            "The arguments for forecast are off its schema: unit: Input should be 'c' or 'f'.",
        ),
    ],
)
def test_arguments_off_the_schema_are_one_sentence(arguments: str, expected: str) -> None:
    with pytest.raises(ToolArgumentsError) as raised:
        make_tool(forecast).validate(arguments)

    assert str(raised.value) == expected


def test_a_parameter_without_a_type_hint_is_a_programming_error() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        """Untyped."""

    with pytest.raises(TypeError, match="has no type hint"):
        make_tool(untyped)


def test_the_registry_keeps_the_order_and_refuses_two_tools_of_one_name() -> None:
    registry = ToolRegistry([make_tool(forecast), make_tool(forecast, name="later")])

    assert registry.names() == ["forecast", "later"]
    assert [s["function"]["name"] for s in registry.schemas()] == ["forecast", "later"]
    with pytest.raises(ValueError, match="Two tools are named forecast"):
        ToolRegistry([make_tool(forecast), make_tool(forecast)])
