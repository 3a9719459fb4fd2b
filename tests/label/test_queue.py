from __future__ import annotations

import pytest
from sqlalchemy import select

from forgeml.core.errors import (
    InvalidLabelError,
    LabelStateError,
    NotFoundError,
)
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.label import describe_task, next_item, submit
from tests.label.conftest import FakeClock, make_task


def test_next_serves_items_in_the_task_order_with_their_rows(
    reviews: Workspace, clock: FakeClock
) -> None:
    make_task(reviews, seed=3)
    order = describe_task(reviews, "sentiment")
    served = next_item(reviews, "sentiment", "ann", clock)
    assert served is not None
    assert served["row"]["id"] == f"r{served['item']}"
    assert served["schema"]["classes"] == ["pos", "neg", "neutral"]
    assert order["items"] == 6


def test_an_item_is_leased_to_one_annotator_until_it_expires(
    reviews: Workspace, clock: FakeClock
) -> None:
    make_task(reviews, lease_seconds=60)
    first = next_item(reviews, "sentiment", "ann", clock)
    second = next_item(reviews, "sentiment", "bob", clock)
    assert first is not None and second is not None
    assert first["item"] != second["item"]
    # asking again before submitting answers the same item
    again = next_item(reviews, "sentiment", "ann", clock)
    assert again is not None and again["item"] == first["item"]
    with pytest.raises(LabelStateError, match="leased to ann"):
        submit(reviews, "sentiment", first["item"], "bob", "pos", clock=clock)
    clock.advance(61)
    # both leases lapsed: the first item in the order is free again, and bob gets it
    taken = next_item(reviews, "sentiment", "bob", clock)
    assert taken is not None and taken["item"] == first["item"]
    submit(reviews, "sentiment", first["item"], "bob", "neg", clock=clock)
    with pytest.raises(LabelStateError, match="labelled item"):
        submit(reviews, "sentiment", first["item"], "bob", "pos", clock=clock)


def test_overlap_serves_each_item_to_that_many_annotators(
    any_reviews: Workspace, clock: FakeClock
) -> None:
    reviews = any_reviews
    make_task(reviews, overlap=2, assignees=["ann", "bob"])
    labelled: dict[str, list[int]] = {"ann": [], "bob": []}
    for who in ["ann", "bob"] * 6:
        served = next_item(reviews, "sentiment", who, clock)
        assert served is not None
        submit(reviews, "sentiment", served["item"], who, "pos", clock=clock)
        labelled[who].append(served["item"])
    assert sorted(labelled["ann"]) == sorted(labelled["bob"]) == list(range(6))
    assert next_item(reviews, "sentiment", "ann", clock) is None
    assert describe_task(reviews, "sentiment")["progress"]["items_done"] == 6


def test_submit_checks_the_label_against_the_schema(reviews: Workspace, clock: FakeClock) -> None:
    make_task(reviews)
    with pytest.raises(InvalidLabelError, match="not one of the task's classes"):
        submit(reviews, "sentiment", 0, "ann", "great", clock=clock)
    with pytest.raises(InvalidLabelError, match="Item 6 is not in"):
        submit(reviews, "sentiment", 6, "ann", "pos", clock=clock)
    submit(reviews, "sentiment", 0, "ann", "pos", clock=clock)
    with pytest.raises(LabelStateError, match="labelled item 0"):
        submit(reviews, "sentiment", 0, "ann", "neg", clock=clock)
    # an adjudicator may settle it, replacing nothing of ann's
    submit(reviews, "sentiment", 0, "lead", "neg", adjudicate=True, clock=clock)
    progress = describe_task(reviews, "sentiment")["progress"]
    assert progress["labels"] == 2 and progress["adjudicated"] == 1
    with reviews.store.session() as session:
        actions = session.scalars(select(AuditEvent.action)).all()
    assert actions.count("label.submit") == 2


def test_only_assignees_are_served(reviews: Workspace, clock: FakeClock) -> None:
    make_task(reviews, assignees=["ann"])
    with pytest.raises(LabelStateError, match="not an assignee"):
        next_item(reviews, "sentiment", "eve", clock)
    with pytest.raises(NotFoundError, match="does not exist"):
        next_item(reviews, "nope", "ann", clock)


def test_spans_must_lie_inside_the_text(reviews: Workspace, clock: FakeClock) -> None:
    make_task(reviews, schema={"kind": "spans", "classes": ["PLACE"], "column": "text"})
    # item 5 is "Paris in the spring"
    stored = submit(reviews, "sentiment", 5, "ann", [{"start": 0, "end": 5, "label": "PLACE"}])
    assert stored["label"] == [{"start": 0, "end": 5, "label": "PLACE"}]
    with pytest.raises(InvalidLabelError, match="past the 19 characters"):
        submit(reviews, "sentiment", 5, "bob", [{"start": 10, "end": 40, "label": "PLACE"}])
    with pytest.raises(InvalidLabelError, match="not one of the task's classes"):
        submit(reviews, "sentiment", 5, "bob", [{"start": 0, "end": 5, "label": "PERSON"}])
    with pytest.raises(InvalidLabelError, match="list of spans"):
        submit(reviews, "sentiment", 5, "bob", "PLACE")


def test_reorder_changes_what_next_serves_and_keeps_the_labels(
    reviews: Workspace, clock: FakeClock
) -> None:
    from forgeml.core.configfile import parse_model
    from forgeml.core.errors import ConfigError
    from forgeml.label import Reorder, reorder_task

    make_task(reviews, seed=0)
    first = next_item(reviews, "sentiment", "ann", clock)
    assert first is not None
    submit(reviews, "sentiment", first["item"], "ann", "pos", clock=clock)
    orders = set()
    for seed in range(4):
        task = reorder_task(reviews, "sentiment", Reorder(strategy="random", seed=seed))
        orders.add(tuple(task.item_order))
        served = next_item(reviews, "sentiment", "bob", clock)
        # the first item of the new order that still needs a label
        expected = next(item for item in task.item_order if item != first["item"])
        assert served is not None and served["item"] == expected
        clock.advance(10_000)  # bob's lease lapses before the next order
    assert len(orders) == 4
    assert describe_task(reviews, "sentiment")["progress"]["labels"] == 1
    with pytest.raises(ConfigError, match="needs a model version"):
        parse_model(Reorder, {"strategy": "margin"}, "reorder")
