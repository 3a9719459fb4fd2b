from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forgeml.core.store import _json as store_json
from forgeml.core.store._json import json_loads


def _same(left: Any, right: Any) -> bool:
    # equal values of equal types (1 is not 1.0), NaN equal to NaN
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return (math.isnan(left) and math.isnan(right)) or left == right
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: past 64 bits too, which orjson reads as floats
    | st.floats()  # NaN and infinities too, which orjson refuses
    | st.text()  # lone surrogates too
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(_VALUES)
def test_reads_what_json_loads_reads(value: Any) -> None:
    text = json.dumps(value)

    assert _same(json_loads(text), json.loads(text))
    assert _same(json_loads(text.encode()), json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        str(2**64),
        str(-(2**63) - 1),
        '{"seed": 340282366920938463463374607431768211455}',
        "[NaN, Infinity, -Infinity]",
        '"\\ud800"',
        "1e400",
        '{"m": [0.0011428193144282783, 1e300, -0.0]}',
    ],
)
def test_the_texts_orjson_reads_otherwise_are_read_as_json_reads_them(text: str) -> None:
    assert _same(json_loads(text), json.loads(text))


def test_a_runs_metrics_are_read_by_orjson_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str | bytes) -> Any:
        raise AssertionError("read by json")

    monkeypatch.setattr(store_json, "json", SimpleNamespace(loads=refuse))
    metrics = {f"m{k:02d}": k / 7 for k in range(50)} | {"step": 12, "rows": 2**40}

    assert json_loads(json.dumps(metrics)) == metrics
