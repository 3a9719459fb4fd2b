"""Loading a model freezes the heap; a later freeze still frees what was frozen before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.serve import ModelRepository, ServeOptions
from forgeml.serve.heap import freeze_heap
from tests.serve.conftest import open_home


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_a_frozen_cycle_is_freed_by_the_next_freeze_once_unreferenced() -> None:
    node = _Node()
    alive = weakref.ref(node)
    freeze_heap()
    assert gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert alive() is not None  # frozen: out of the collector's reach
    freeze_heap()
    assert alive() is None


@pytest.mark.parametrize("freeze", [True, False])
def test_loading_freezes_the_heap_unless_told_not_to(served_home: Path, freeze: bool) -> None:
    workspace = open_home(served_home)
    repository = ModelRepository(workspace, ["adult-mlp@v1"], ServeOptions(freeze_heap=freeze))
    try:
        repository.load()
        assert (gc.get_freeze_count() > 0) is freeze
    finally:
        repository.close()
        workspace.close()
