"""The `calculator` tool: arithmetic by walking a whitelisted syntax tree, never eval/exec.

LangChain's LLMMathChain (CVE-2023-29374) and PALChain (CVE-2023-36095) handed model
output to Python's own evaluator, so `__import__('os').system(...)` ran. Here the text is
parsed (`ast.parse(mode="eval")`, which runs nothing) and only numbers, the arithmetic
operators and a few named math functions are walked; anything else, attribute access
above all, is refused before a value is computed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from forgeml.agents.tools import Tool, ToolRefusedError, make_tool

__all__ = ["calculate", "calculator_tool"]

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def calculate(expression: str) -> float | int:
    """The value of an arithmetic expression.

    Raises:
        ToolRefusedError: the text is not arithmetic (names, attributes, strings, calls
            other than the math functions), too long, or cannot be computed.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolRefusedError(
            f"The expression is over {MAX_EXPRESSION_CHARS} characters; send a shorter one."
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolRefusedError("The expression is not valid arithmetic.") from None
    try:
        return _value(tree.body)
    except (ArithmeticError, ValueError, TypeError) as error:
        raise ToolRefusedError(f"The expression cannot be computed: {error}.") from None


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolRefusedError("The calculator takes numbers only.")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolRefusedError(f"Exponents above {MAX_EXPONENT} are refused.")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = _FUNCTIONS.get(node.func.id)
        if function is not None:
            return function(*(_value(argument) for argument in node.args))
    raise ToolRefusedError(
        f"The calculator evaluates arithmetic only; {type(node).__name__} is not allowed."
    )


def calculator(expression: str) -> float | int:
    """Evaluate an arithmetic expression (+ - * / // % **, sqrt, log, exp, sin, cos, pi, e).

    Args:
        expression: The arithmetic, e.g. "2 * (3 + 4) ** 2".
    """
    return calculate(expression)


def calculator_tool(requires_approval: bool = False) -> Tool:
    """The `calculator` tool."""
    return make_tool(calculator, requires_approval=requires_approval)
