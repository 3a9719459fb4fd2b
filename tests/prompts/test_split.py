from __future__ import annotations

import math
import random
import re
from collections import Counter

import pytest
from sqlalchemy import select

from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.prompts import (
    PromptSplit,
    clear_split,
    create_prompt,
    get_split,
    parse_weights,
    set_alias,
    set_split,
)
from tests.prompts.conftest import chat_spec, text_spec


@pytest.fixture
def qa(workspace: Workspace) -> Workspace:
    """qa@v1 (text) @stable, qa@v2 (chat) @canary."""
    create_prompt(workspace, "qa", text_spec())
    create_prompt(workspace, "qa", chat_spec())
    set_alias(workspace, "qa@v1", "stable")
    set_alias(workspace, "qa@v2", "canary")
    return workspace


class _Points(random.Random):
    """An rng whose `randrange` returns the given points in turn."""

    def __init__(self, points: list[int]) -> None:
        super().__init__(0)
        self.points = iter(points)

    def randrange(self, *args: object, **kwargs: object) -> int:  # type: ignore[override]
        return next(self.points)


def test_a_split_reads_back_sorted_by_alias(qa: Workspace) -> None:
    set_split(qa, "qa", {"stable": 90, "canary": 10})

    split = get_split(qa, "qa")

    assert split == PromptSplit("qa", (("canary", 10), ("stable", 90)))
    assert split.as_dict() == {"canary": 10, "stable": 90}
    assert str(split) == "canary=10 stable=90"


def test_each_point_of_the_hundred_draws_the_alias_whose_band_holds_it() -> None:
    split = PromptSplit("qa", (("canary", 10), ("stable", 90)))

    drawn = [split.draw(_Points([point])) for point in range(100)]

    assert drawn == ["canary"] * 10 + ["stable"] * 90


@pytest.mark.parametrize(
    "weights", [{"a": 50, "b": 50}, {"a": 90, "b": 10}, {"a": 70, "b": 20, "c": 10}]
)
def test_seeded_draws_follow_the_weights_within_a_binomial_bound(weights: dict[str, int]) -> None:
    split = PromptSplit("qa", tuple(sorted(weights.items())))
    rng = random.Random(1234)
    draws = 1000

    counts = Counter(split.draw(rng) for _ in range(draws))

    for alias, weight in weights.items():
        p = weight / 100
        sigma = math.sqrt(draws * p * (1 - p))
        assert abs(counts[alias] - draws * p) <= 4 * sigma, (alias, counts)


def test_set_replaces_and_clear_removes_each_audited(qa: Workspace) -> None:
    set_split(qa, "qa", {"stable": 90, "canary": 10})
    set_split(qa, "qa", {"stable": 50, "canary": 50})
    removed = clear_split(qa, "qa")
    nothing = clear_split(qa, "qa")

    with qa.store.session() as session:
        events = [
            (e.action, e.object_ref, e.payload)
            for e in session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action == "prompt.split")
                .order_by(AuditEvent.seq)
            )
        ]
    assert removed == PromptSplit("qa", (("canary", 50), ("stable", 50)))
    assert nothing is None
    assert get_split(qa, "qa") is None
    assert events == [
        ("prompt.split", "qa", {"split": {"canary": 10, "stable": 90}, "previous": None}),
        (
            "prompt.split",
            "qa",
            {"split": {"canary": 50, "stable": 50}, "previous": {"canary": 10, "stable": 90}},
        ),
        ("prompt.split", "qa", {"split": None, "previous": {"canary": 50, "stable": 50}}),
    ]


@pytest.mark.parametrize(
    ("weights", "error", "sentence"),
    [
        ({"stable": 100}, UsageError, "A split needs two or more aliases"),
        ({"stable": 90, "canary": 20}, UsageError, "The split's weights sum to 110"),
        ({"canary": 0, "stable": 100}, UsageError, "The weight of alias 'canary' is 0"),
        ({"stable": 50, "v2": 50}, UsageError, "Invalid alias 'v2'"),
        ({"stable": 50, "gone": 50}, NotFoundError, "Prompt 'qa' has no alias 'gone'"),
    ],
)
def test_a_bad_split_is_one_sentence_and_writes_nothing(
    qa: Workspace, weights: dict[str, int], error: type[Exception], sentence: str
) -> None:
    set_split(qa, "qa", {"stable": 60, "canary": 40})

    with pytest.raises(error, match=f"^{re.escape(sentence)}"):
        set_split(qa, "qa", weights)

    assert get_split(qa, "qa") == PromptSplit("qa", (("canary", 40), ("stable", 60)))


def test_a_split_of_an_unknown_prompt_is_not_found(workspace: Workspace) -> None:
    with pytest.raises(NotFoundError, match=r"^Prompt 'nosuch' does not exist"):
        set_split(workspace, "nosuch", {"a": 50, "b": 50})


@pytest.mark.parametrize(
    ("items", "sentence"),
    [
        (["stable"], "Invalid split 'stable'"),
        (["stable=ninety"], "Invalid split 'stable=ninety'"),
        (["=50"], "Invalid split '=50'"),
        (["a=50", "a=50"], "The split names alias 'a' twice."),
    ],
)
def test_malformed_weights_are_a_usage_error(items: list[str], sentence: str) -> None:
    with pytest.raises(UsageError, match=f"^{re.escape(sentence)}"):
        parse_weights(items)
