"""A workspace holding a small text dataset (`reviews@v1`) and a labelling task over it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forgeml.core.workspace import Workspace
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.label import TaskSpec, create_task

REVIEWS = [
    ("r0", "a wonderful, moving film"),
    ("r1", "dull and far too long"),
    ("r2", "the cast is superb"),
    ("r3", "I walked out after an hour"),
    ("r4", "fine, nothing more"),
    ("r5", "Paris in the spring"),
]


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def add_reviews(workspace: Workspace, folder: Path) -> str:
    source = folder / "reviews.csv"
    lines = ["id,text", *(f"{key},{text!r}".replace("'", '"') for key, text in REVIEWS)]
    source.write_text("\n".join(lines) + "\n")
    return pipeline.add(workspace, "reviews", source, IngestOptions()).version.ref


def make_task(workspace: Workspace, name: str = "sentiment", **fields: object) -> str:
    spec = {
        "name": name,
        "dataset": "reviews@v1",
        "schema": {"classes": ["pos", "neg", "neutral"]},
        **fields,
    }
    create_task(workspace, TaskSpec.model_validate(spec))
    return name


@pytest.fixture
def reviews(workspace: Workspace, tmp_path: Path) -> Workspace:
    add_reviews(workspace, tmp_path)
    return workspace


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def any_reviews(any_workspace: Workspace, tmp_path: Path) -> Workspace:
    """`reviews@v1` on each metadata backend (SQLite always, PostgreSQL when up)."""
    add_reviews(any_workspace, tmp_path)
    return any_workspace
