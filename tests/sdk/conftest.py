from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli._served import Served
from tests.client._remote_home import RemoteHome
from tests.sdk._sides import Sides, sides_on


@pytest.fixture
def sides(
    served: Served | RemoteHome,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Sides]:
    """Both sides of the module's `served` workspace."""
    with sides_on(served, capsys, monkeypatch) as both:
        yield both
