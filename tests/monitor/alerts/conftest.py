from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


class FakeClock:
    """Seconds since the epoch that move only when the test says."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
