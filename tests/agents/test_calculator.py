from __future__ import annotations

import math

import pytest

from forgeml.agents import ToolRefusedError, calculate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 2", 4),
        ("2 * (3 + 4) ** 2", 98),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("1 / 4", 0.25),
        ("sqrt(16) + abs(-1)", 5.0),
        ("max(1, 5, 3)", 5),
        ("round(pi, 2)", 3.14),
        ("log(e)", 1.0),
    ],
)
def test_arithmetic_is_computed(expression: str, value: float) -> None:
    assert calculate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    ("expression", "sentence"),
    [
        ("'a' * 3", "The calculator takes numbers only."),
        ("True + 1", "The calculator takes numbers only."),
        ("x + 1", "The calculator evaluates arithmetic only; Name is not allowed."),
        ("(1).real", "The calculator evaluates arithmetic only; Attribute is not allowed."),
        ("[1, 2]", "The calculator evaluates arithmetic only; List is not allowed."),
        ("1 if 1 else 2", "The calculator evaluates arithmetic only; IfExp is not allowed."),
        ("lambda: 1", "The calculator evaluates arithmetic only; Lambda is not allowed."),
        ("sqrt(x=4)", "The calculator evaluates arithmetic only; Call is not allowed."),
        ("9 ** 9 ** 9", "Exponents above 1000 are refused."),
        ("1 / 0", "The expression cannot be computed: division by zero."),
        ("2 +", "The expression is not valid arithmetic."),
        ("1 + " * 200 + "1", "The expression is over 500 characters; send a shorter one."),
    ],
)
def test_anything_but_arithmetic_is_refused_in_one_sentence(expression: str, sentence: str) -> None:
    with pytest.raises(ToolRefusedError) as raised:
        calculate(expression)

    assert str(raised.value) == sentence


def test_constants_are_the_math_modules() -> None:
    assert calculate("2 * pi") == 2 * math.pi
