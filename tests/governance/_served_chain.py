"""The lineage chain (`_chain`) served by the control plane with accounts: an owner
(olivia), a viewer (victor) and a token of olivia's that may read datasets only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._thread import api_in_thread
from forgeml.auth import issue_token
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.auth._accounts import fast_settings, person
from tests.cli._served import ACTOR, Served
from tests.governance._chain import copy_chain


@contextmanager
def served_chain(factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = factory.mktemp("lineage-served")
    home = copy_chain(factory, tmp / "home")
    workspace = Workspace(Settings(home=home, user=ACTOR))
    try:
        settings = fast_settings(tmp)
        tokens = {}
        for name, role in ((ACTOR, "owner"), ("victor", "viewer")):
            person(workspace, settings, name, role)
            tokens[name] = issue_token(workspace, name, "cli", actor="tester")[1]
        tokens["datasets_only"] = issue_token(
            workspace, ACTOR, "ci", actor=ACTOR, scopes=["datasets:read"]
        )[1]
        authorizer = AccountsAuthorizer(workspace, settings)
        with api_in_thread(workspace, authorizer=authorizer) as url:
            yield Served(home, None, url, tokens, workspace)
    finally:
        workspace.close()
