from __future__ import annotations

import polars as pl
import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.label import export_task, settle, submit
from tests.label.conftest import make_task


def test_settle_takes_the_majority_or_the_adjudication() -> None:
    given = [
        (0, "ann", "pos", False), (0, "bob", "pos", False), (0, "eve", "neg", False),
        (1, "ann", "pos", False), (1, "bob", "neg", False),
        (2, "ann", "pos", False), (2, "bob", "neg", False), (2, "lead", "neg", True),
    ]  # fmt: skip
    assert settle(given, "adjudicated") == ({0: "pos", 2: "neg"}, {"ann", "bob", "lead"}, 1)
    assert settle(given, "majority") == ({0: "pos"}, {"ann", "bob"}, 2)


def test_export_records_a_version_whose_lineage_names_the_task(reviews: Workspace) -> None:
    make_task(reviews)
    submit(reviews, "sentiment", 1, "ann", "neg")
    submit(reviews, "sentiment", 0, "ann", "pos")
    submit(reviews, "sentiment", 0, "bob", "pos")
    found = export_task(reviews, "sentiment")
    assert found["ref"] == "reviews-labelled@v1"
    assert found["parents"] == ["reviews@v1"]
    assert (found["labelled"], found["unlabelled"], found["annotators"]) == (2, 4, ["ann", "bob"])
    with reviews.store.session() as session:
        version = catalog.resolve(session, "reviews-labelled@v1")
    frame = catalog.read_frame(reviews, version)
    assert frame.select("id", "label").rows() == [("r0", "pos"), ("r1", "neg")]
    assert version.recipe["op"] == "label"
    assert version.recipe["params"]["task"] == "sentiment"
    # the recipe holds the labels, so the version rebuilds from its parent alone
    assert pipeline.rebuild(reviews, "reviews-labelled@v1").actual == version.digest
    # the same labels again: the same version
    assert export_task(reviews, "sentiment")["created"] is False


def test_spans_export_as_json_text(reviews: Workspace) -> None:
    make_task(reviews, schema={"kind": "spans", "classes": ["PLACE"], "column": "text"})
    submit(reviews, "sentiment", 5, "ann", [{"start": 0, "end": 5, "label": "PLACE"}])
    export_task(reviews, "sentiment", dataset="places", column="entities")
    with reviews.store.session() as session:
        version = catalog.resolve(session, "places")
    frame = catalog.read_frame(reviews, version)
    assert frame["entities"].to_list() == ['[{"end": 5, "label": "PLACE", "start": 0}]']
    assert frame.schema["entities"] == pl.String


def test_nothing_to_export_is_one_sentence(reviews: Workspace) -> None:
    make_task(reviews)
    with pytest.raises(InvalidDataError, match="no settled label to export"):
        export_task(reviews, "sentiment")
