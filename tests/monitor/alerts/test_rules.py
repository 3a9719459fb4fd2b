from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.core.errors import ConfigError
from forgeml.monitor.alerts import SampleStore, compile_expr, evaluate, labels_of, load_rules
from forgeml.monitor.alerts._templates import (
    compile_template,
    humanize,
    humanize_duration,
    humanize_percentage,
)


def _rule_file(tmp_path: Path, expr: str, extra: str = "") -> Path:
    path = tmp_path / "mine.yml"
    path.write_text(
        f"groups:\n  - name: mine\n    rules:\n      - alert: Mine\n        expr: '{expr}'\n{extra}"
    )
    return path


def test_user_rules_load_beside_the_shipped_ones(tmp_path: Path) -> None:
    rules = load_rules([_rule_file(tmp_path, "up == 0", "        for: 1m\n")])
    assert rules[-1].name == "Mine"
    assert rules[-1].hold_s == 60
    assert len(rules) == len(load_rules()) + 1


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("sum(rate(x[5m])", "unclosed left parenthesis"),
        ("abs(x) > 1", "the function abs is not supported"),
        ("x offset 5m > 1", "offset and @ modifiers are not supported"),
        ("topk(3, x)", "the aggregation topk is not supported"),
        ("a / on (x) group_left b", "group_left and group_right are not supported"),
        ("1 > bool 2", "must return a vector"),
        ("rate(x[5m:1m])", "subquery"),
    ],
)
def test_a_rule_with_a_bad_expression_names_file_rule_and_error(
    tmp_path: Path, expr: str, says: str
) -> None:
    path = _rule_file(tmp_path, expr)
    with pytest.raises(ConfigError) as error:
        load_rules([path])
    message = str(error.value)
    assert message.startswith(f"{path}: rule Mine (group mine) has a bad expression: ")
    assert says in message
    assert message.count(".") >= 1 and "\n" not in message


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("        for: 5 minutes\n", "is not a duration"),
        ("        annotations: {s: '{{ $value | printf }}'}\n", "template function printf"),
        ("        annotations: {s: '{{ range $labels }}'}\n", "is not supported"),
        ("        colour: red\n", "colour"),
    ],
)
def test_a_rule_with_a_bad_field_is_refused(tmp_path: Path, extra: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_rules([_rule_file(tmp_path, "up == 0", extra)])


def test_recording_rules_and_unreadable_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "rec.yml"
    path.write_text("groups:\n  - name: g\n    rules:\n      - record: a:b\n        expr: up\n")
    with pytest.raises(ConfigError, match="recording rule 'a:b' is not supported"):
        load_rules([path])
    with pytest.raises(ConfigError, match="Cannot read the rule file"):
        load_rules([tmp_path / "missing.yml"])


def _store(*series: tuple[dict[str, str], float]) -> SampleStore:
    samples = SampleStore()
    for labels, value in series:
        samples.add(labels_of(labels), 100.0, value)
    return samples


def _values(expr: str, samples: SampleStore) -> dict[tuple[tuple[str, str], ...], float]:
    result = evaluate(compile_expr(expr), samples, 100.0)
    assert isinstance(result, dict)
    return result


def test_matchers_aggregations_and_set_operators() -> None:
    samples = _store(
        ({"__name__": "x", "a": "1", "b": "p"}, 1.0),
        ({"__name__": "x", "a": "2", "b": "q"}, 2.0),
        ({"__name__": "x", "a": "3", "b": "p"}, 4.0),
        ({"__name__": "y", "a": "1"}, 10.0),
    )
    assert set(_values('x{b!="p"}', samples).values()) == {2.0}
    assert set(_values('x{a!~"1|2"}', samples).values()) == {4.0}
    assert _values("sum without (a) (x)", samples) == {
        (("b", "p"),): 5.0,
        (("b", "q"),): 2.0,
    }
    assert _values("count(x)", samples) == {(): 3.0}
    assert _values("avg by (b) (x)", samples)[(("b", "p"),)] == 2.5
    assert set(_values("x and on (a) y", samples).values()) == {1.0}
    assert set(_values("x unless on (a) y", samples).values()) == {2.0, 4.0}
    assert set(_values("y or on (a) x", samples).values()) == {10.0, 2.0, 4.0}
    assert _values("y + ignoring (b) x", samples) == {(("a", "1"),): 11.0}
    assert _values("sum(x) / 0", samples) == {(): float("inf")}


def test_templates_follow_prometheus_formatting() -> None:
    assert humanize_duration(0.99) == "990ms"
    assert humanize_duration(2700) == "45m 0s"
    assert humanize_duration(90061) == "1d 1h 1m 1s"
    assert humanize_percentage(0.1) == "10%"
    assert humanize(1234567) == "1.235M"
    template = compile_template(
        "{{ $labels.model }} at {{ humanizePercentage $value }}: {{ $value }}"
    )
    assert template.expand({"model": "m"}, 0.25) == "m at 25%: 0.25"
