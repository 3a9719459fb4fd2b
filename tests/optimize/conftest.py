"""Workspaces with trained models to optimise, one private copy per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.train.conftest import copy_home, trained_adult_template, trained_text_template


def _open(template: Path, factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_home(template, factory.mktemp("optimize") / "home")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            yield workspace
        finally:
            workspace.close()


@pytest.fixture(scope="module")
def adult_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A copy of the trained Adult workspace (adult-mlp@v1, @v2, adult-small@v1)."""
    yield from _open(trained_adult_template(tmp_path_factory), tmp_path_factory)


@pytest.fixture(scope="module")
def text_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A copy of the trained text workspace (sst2-minilm@v1, pydoc-gpt@v1)."""
    yield from _open(trained_text_template(tmp_path_factory), tmp_path_factory)


@pytest.fixture(scope="module")
def kg_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A copy of the WordNet verbs workspace (wn-rotate@v1, its ONNX export @v2)."""
    from tests.train._kg_home import wordnet_trained_template

    yield from _open(wordnet_trained_template(tmp_path_factory), tmp_path_factory)
