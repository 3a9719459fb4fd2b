"""BFCL's AST check, written plainly: does a list of calls match one of the possible answers?

bfcl-eval's own checker (bfcl_eval/eval_checker/ast_eval/ast_checker.py) cannot be
imported from the unpacked wheel with what forgeml installs: it reaches every model
handler (anthropic, google-genai, ...) through bfcl_eval.constants.model_config. This
module follows its rules for Python functions, category by category:

- simple: exactly one call; multiple: exactly one call, to the function the answer names;
  parallel: as many calls as the answer has, matched to them in any order;
- a call matches an answer when the function name is the same (dots as underscores, as
  BFCL compares for OpenAI-style tool names), every required parameter is present, no
  parameter is outside the function's doc or the answer, each value has the doc's type
  (an int where a float is due counts as that float) and is among the possible values, and
  every parameter the answer does not mark optional (`""` among its values) is given;
- strings compare after BFCL's standardising (lower case, without spaces and `,./-_*^`,
  single quotes as double), in lists and dicts too; dicts match one possible dict key by key.

`check(item.functions, calls, item.answers, category)` returns `(valid, reason)`.
"""

from __future__ import annotations

import re
from typing import Any

from _bfcl import Answer, tool_name

Call = dict[str, dict[str, Any]]  # {function name: {parameter: value}}

# BFCL's PYTHON_TYPE_MAPPING
PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_STANDARDISED = re.compile(r"[ ,./\-_*^]")


def standardise(text: str) -> str:
    """BFCL's `standardize_string`: "April 1, 2024" and "april 1 2024" compare equal."""
    return _STANDARDISED.sub("", text).lower().replace("'", '"')


def _standard(value: Any) -> Any:
    return standardise(value) if isinstance(value, str) else value


def check(
    functions: list[dict[str, Any]], calls: list[Call], answers: list[Answer], category: str
) -> tuple[bool, str]:
    """Whether `calls` answer the question as BFCL's AST check rules, and why not.

    Args:
        functions: The question's BFCL function docs.
        calls: What the model called, each `{name: arguments}`.
        answers: The question's possible answers, one per expected call.
        category: "simple", "multiple" or "parallel".
    """
    if len(calls) != len(answers):
        return False, "wrong number of calls"
    if category != "parallel":
        return _call_matches(functions, calls[0], answers[0])
    unmatched = list(range(len(calls)))
    for answer in answers:  # each expected call takes the first unmatched call it fits
        found = next((i for i in unmatched if _call_matches(functions, calls[i], answer)[0]), None)
        if found is None:
            return False, f"no call matches the expected call to {next(iter(answer))}"
        unmatched.remove(found)
    return True, ""


def _call_matches(functions: list[dict[str, Any]], call: Call, answer: Answer) -> tuple[bool, str]:
    (expected, possible), (name, arguments) = next(iter(answer.items())), next(iter(call.items()))
    if tool_name(name) != tool_name(expected):
        return False, f"called {name} instead of {expected}"
    doc = next(f for f in functions if f["name"] == expected)["parameters"]
    properties = doc.get("properties", {})
    missing = [p for p in doc.get("required", []) if p not in arguments]
    if missing:
        return False, f"required parameter {missing[0]} missing"
    for parameter, value in arguments.items():
        if parameter not in properties or parameter not in possible:
            return False, f"unexpected parameter {parameter}"
        valid, reason = _value_matches(parameter, value, properties[parameter], possible[parameter])
        if not valid:
            return False, reason
    for parameter, values in possible.items():
        if parameter not in arguments and "" not in values:
            return False, f"parameter {parameter} not given and not optional"
    return True, ""


def _value_matches(
    parameter: str, value: Any, doc: dict[str, Any], possible: list[Any]
) -> tuple[bool, str]:
    kind = doc.get("type", "string")
    expected = PYTHON_TYPES.get(kind, str)
    if kind == "float" and type(value) is int:
        value = float(value)  # Python's own int -> float
    given = [p for p in possible if p != ""]
    # BFCL's "variable" case: an answer of another type than the doc's (a name in a
    # string) is checked by that type, as a plain value
    variable = bool(given) and type(given[0]) is not expected
    if type(value) is not expected and not (variable and type(value) is type(given[0])):
        return False, f"{parameter} has type {type(value).__name__}, not {kind}"
    if variable:
        return (value in possible), f"{parameter}={value!r} is not a possible value"
    if expected is dict:
        return _dict_matches(value, possible), f"{parameter}={value!r} matches no possible dict"
    if expected is list:
        return _list_matches(parameter, value, doc, possible)
    if expected is str:
        wanted = [standardise(p) for p in possible if isinstance(p, str)]
        return standardise(value) in wanted, f"{parameter}={value!r} is not a possible value"
    return value in possible, f"{parameter}={value!r} is not a possible value"


def _list_matches(
    parameter: str, value: list[Any], doc: dict[str, Any], possible: list[Any]
) -> tuple[bool, str]:
    inner = PYTHON_TYPES.get((doc.get("items") or {}).get("type", ""))
    if inner is not None and not _items_typed(value, inner, possible):
        # BFCL then takes the list for a "variable": compared as it is, not standardised
        return value in possible, f"{parameter}={value!r} is not a possible list"
    if inner is dict:  # a list of dicts: the same length, each dict matching in order
        ok = any(
            isinstance(option, list)
            and len(option) == len(value)
            and all(_dict_matches(v, [o]) for v, o in zip(value, option, strict=True))
            for option in possible
        )
        return ok, f"{parameter}={value!r} matches no possible list of dicts"
    standard = [_standard(item) for item in value]
    # an optional marker "" stands for the empty list, as in BFCL's list_checker
    options = [
        [_standard(i) for i in option] if isinstance(option, list) else [] for option in possible
    ]
    return standard in options, f"{parameter}={value!r} is not a possible list"


def _items_typed(value: list[Any], inner: type, possible: list[Any]) -> bool:
    """BFCL's one-level nested type check: every item of the inner type (or of the type a
    possible list holds), for some possible value; an optional marker passes."""
    for option in possible:
        if not isinstance(option, list):
            return True
        given = type(option[0]) if option else inner
        if all(type(item) in (inner, given) for item in value):
            return True
    return False


def _dict_matches(value: dict[str, Any], possible: list[Any]) -> bool:
    for option in possible:
        if not isinstance(option, dict):
            continue  # "" (the dict is optional)
        keys_ok = all(
            key in option and _standard(item) in [_standard(o) for o in option[key]]
            for key, item in value.items()
        )
        if keys_ok and all(key in value or "" in values for key, values in option.items()):
            return True
    return False
