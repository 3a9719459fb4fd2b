from __future__ import annotations

import pytest

from forgeml.core.errors import UsageError
from forgeml.prompts import parse_metric


@pytest.mark.parametrize(
    ("metric", "output", "expected", "score"),
    [
        ("exact", " Paris\n", "Paris", 1.0),
        ("exact", "Paris.", "Paris", 0.0),
        ("contains", "It is Paris.", "Paris", 1.0),
        ("contains", "It is Lyon.", "Paris", 0.0),
        ("regex:^[0-9]+$", "42", None, 1.0),
        ("regex:^[0-9]+$", "42a", None, 0.0),
        ("json", '{"a": [1, 2]}', None, 1.0),
        ("json", "{'a': 1}", None, 0.0),
    ],
)
def test_each_metric_scores_a_row_one_or_zero(
    metric: str, output: str, expected: str | None, score: float
) -> None:
    assert parse_metric(metric).score(output, expected) == score


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("bleu", "Unknown metric 'bleu': use one of exact, contains, regex:PATTERN, json, judge."),
        ("regex:(", "The regex metric's pattern '(' is invalid"),
        ("exact:x", "Unknown metric 'exact:x'"),
    ],
)
def test_an_unknown_metric_or_bad_pattern_is_a_usage_error(text: str, sentence: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_metric(text)

    assert str(raised.value).startswith(sentence)


@pytest.mark.parametrize(
    ("metric", "needs"),
    [("exact", True), ("contains", True), ("judge", True), ("json", False), ("regex:a", False)],
)
def test_the_metrics_comparing_with_an_answer_need_the_expected_column(
    metric: str, needs: bool
) -> None:
    assert parse_metric(metric).needs_expected is needs
