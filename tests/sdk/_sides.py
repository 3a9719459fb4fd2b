"""Both sides of one SDK call on a served workspace: the local workspace, and its server
through olivia's token (the parity tests of tests/sdk)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from forgeml.core.errors import ForgemlError
from tests.cli._served import Served, forgeml_on
from tests.client._remote_home import RemoteHome

Call = Callable[[], Any]


class Sides:
    """Runs one SDK call on the local workspace, then through the server, as olivia."""

    def __init__(self, served: Served | RemoteHome, monkeypatch: pytest.MonkeyPatch) -> None:
        self.served, self.monkeypatch = served, monkeypatch

    def local(self, call: Call) -> Any:
        self.monkeypatch.delenv("FORGEML_SERVER", raising=False)
        self.monkeypatch.delenv("FORGEML_TOKEN", raising=False)
        return outcome(call)

    def remote(self, call: Call) -> Any:
        self.monkeypatch.setenv("FORGEML_SERVER", self.served.url)
        self.monkeypatch.setenv("FORGEML_TOKEN", self.served.tokens["olivia"])
        return outcome(call)


def outcome(call: Call) -> Any:
    """What `call` answers; an error as its class and sentence, compared as a value is."""
    try:
        return call()
    except ForgemlError as error:
        return type(error).__name__, str(error)


@contextmanager
def sides_on(
    served: Served | RemoteHome,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Sides]:
    """`Sides` of `served`, its local side's environment set to the served workspace."""
    with forgeml_on(served, capsys, monkeypatch):
        yield Sides(served, monkeypatch)
