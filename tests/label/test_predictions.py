"""Uncertainty sampling from a real model version: the trained Adult MLP's predictions."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from forgeml.core.errors import NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.label import Reorder, TaskSpec, create_task, next_item, reorder_task, uncertainty
from forgeml.label.predictions import model_probabilities
from tests.serve.conftest import open_home
from tests.train.conftest import copy_home, trained_adult_template

ROWS = 300


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, str]]:
    from forgeml.tracking import get_model_version

    template = trained_adult_template(tmp_path_factory)
    workspace = open_home(copy_home(template, tmp_path_factory.mktemp("label") / "home"))
    version = get_model_version(workspace, "adult-mlp@v1").dataset_version
    assert version is not None
    # a slice of the held-out rows, without their label, is the pool to label
    rows = catalog.read_frame(workspace, version, "test").drop("__split__", "Y").head(ROWS)
    path = tmp_path_factory.mktemp("pool") / "pool.parquet"
    rows.write_parquet(path)
    from forgeml.data.ingest import IngestOptions

    pool = pipeline.add(workspace, "adult-pool", path, IngestOptions()).version.ref
    yield workspace, pool
    workspace.close()


@pytest.mark.slow
def test_entropy_order_serves_the_model_s_least_sure_rows_first(
    adult: tuple[Workspace, str],
) -> None:
    workspace, pool = adult
    spec = {"name": "income", "dataset": pool, "schema": {"classes": ["<=50K", ">50K"]}}
    create_task(
        workspace, TaskSpec.model_validate({**spec, "strategy": "entropy", "model": "adult-mlp@v1"})
    )
    with workspace.store.session() as session:
        frame = catalog.read_frame(workspace, catalog.resolve(session, pool))
    probabilities = model_probabilities(workspace, "adult-mlp@v1", frame)
    assert probabilities.shape == (ROWS, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    scores = uncertainty(probabilities, "entropy")
    served = next_item(workspace, "income", "ann")
    assert served is not None
    assert scores[served["item"]] == pytest.approx(scores.max())
    # the first rows served are far less sure than the pool as a whole
    order = np.argsort(-scores)
    assert probabilities[order[:10]].max(axis=1).mean() < probabilities.max(axis=1).mean() - 0.1
    # a random task reordered by the model serves the same first item
    create_task(workspace, TaskSpec.model_validate({**spec, "name": "income-2"}))
    reorder_task(workspace, "income-2", Reorder(strategy="entropy", model="adult-mlp@v1"))
    again = next_item(workspace, "income-2", "ann")
    assert again is not None and scores[again["item"]] == pytest.approx(scores.max())


@pytest.mark.slow
def test_a_model_that_is_not_there_is_one_sentence(adult: tuple[Workspace, str]) -> None:
    workspace, pool = adult
    spec = {"name": "x", "dataset": pool, "schema": {"classes": ["a", "b"]}, "strategy": "margin"}
    with pytest.raises(NotFoundError, match="not registered"):
        create_task(workspace, TaskSpec.model_validate({**spec, "model": "nope@v1"}))
