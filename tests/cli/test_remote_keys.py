"""`forgeml keys` and `forgeml cost report` in remote mode act in FORGEML_PROJECT, as they do
locally: a project's admin creates, lists, reports and revokes its own keys through the
server, and another project neither sees nor revokes them (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.auth import issue_token
from forgeml.core.config import get_settings
from tests.auth._accounts import fast_settings, person
from tests.cli._served import Forgeml, Served, assert_same_as_local, served_on


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_on(request.param, tmp_path_factory) as home:
        yield home


def _in(monkeypatch: pytest.MonkeyPatch, project: str | None) -> None:
    if project is None:
        monkeypatch.delenv("FORGEML_PROJECT", raising=False)
    else:
        monkeypatch.setenv("FORGEML_PROJECT", project)
    get_settings.cache_clear()


def test_a_projects_keys_are_made_listed_and_revoked_in_it_through_the_server(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served = forgeml.served
    person(served.workspace, fast_settings(tmp_path), "ann", "admin", "team-a")
    served.tokens["ann"] = issue_token(served.workspace, "ann", "cli", actor="tester")[1]
    _in(monkeypatch, "team-a")
    made = forgeml.remote("keys", "create", "--name", "ci-a", "--json", token="ann")
    assert made.code == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["project"] == "team-a"
    for command in (("keys", "list", "--json"), ("keys", "usage", "--json"),
                    ("cost", "report", "--by", "key", "--json")):  # fmt: skip
        assert_same_as_local(forgeml(*command), forgeml.remote(*command, token="ann"), command)
    listed = json.loads(forgeml.remote("keys", "list", "--json", token="ann").stdout)
    assert [key["name"] for key in listed] == ["ci-a"]

    _in(monkeypatch, None)
    listed = json.loads(forgeml.remote("keys", "list", "--json").stdout)
    assert created["prefix"] not in {key["prefix"] for key in listed}
    # default's owner holds no role in team-a, where the key is authorized
    refused = forgeml.remote("keys", "revoke", created["prefix"])
    assert refused.code == 1 and refused.stderr.count("\n") == 1
    assert "in the project 'team-a'" in refused.stderr
    _in(monkeypatch, "team-a")
    assert forgeml.remote("keys", "revoke", created["prefix"], token="ann").code == 0
