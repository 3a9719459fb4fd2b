"""`forgeml.connect()`: the SDK's seam of remote mode, against a real server on SQLite; and
the client raising the very error class the server raised (the `code` of its answer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import forgeml
from forgeml.client import Client
from forgeml.core.config import Settings, get_settings
from forgeml.core.errors import (
    AlreadyExistsError,
    KeyStateError,
    LastOwnerError,
    NotFoundError,
    UsageError,
)
from tests.cli._served import Served, served_on


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_on("sqlite", tmp_path_factory) as home:
        yield home


@pytest.fixture
def client(served: Served, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("FORGEML_SERVER", served.url)
    monkeypatch.setenv("FORGEML_TOKEN", served.tokens["olivia"])
    connected = forgeml.connect()
    assert isinstance(connected, Client)
    with connected:
        yield connected


def test_connect_answers_the_server_when_one_is_set(client: Client) -> None:
    created = client.prompts.create(
        "greet", {"template": "Hi {{ who }}", "variables": [{"name": "who"}]}
    )

    assert (created["ref"], created["created"], created["created_by"]) == (
        "greet@v1",
        True,
        "olivia",
    )
    assert client.prompts.render("greet", {"who": "Ada"})["rendered"] == "Hi Ada"
    assert [p["ref"] for p in client.prompts.list()] == ["greet@v1"]


def test_connect_opens_the_local_workspace_without_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGEML_SERVER", raising=False)
    monkeypatch.setenv("FORGEML_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    try:
        connected = forgeml.connect()
        assert isinstance(connected, forgeml.Workspace)
        connected.close()
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.prompts.split("greet", {"a": 100, "b": 0}), UsageError),
        (lambda c: c.projects.remove_member("default", "olivia"), LastOwnerError),
        (lambda c: c.projects.create("default"), AlreadyExistsError),
        (lambda c: c.users.show("nosuch"), NotFoundError),
    ],
    ids=["usage", "last_owner", "already_exists", "not_found"],
)
def test_each_error_is_raised_as_the_class_the_server_raised(
    client: Client, call: object, error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        call(client)  # type: ignore[operator]

    assert type(raised.value) is error


def test_a_token_revoked_twice_is_a_key_state_error_not_a_name_taken(client: Client) -> None:
    client.users.create("svc", kind="service")
    token = client.tokens.create("svc", "ci")
    client.tokens.revoke(token["prefix"])

    with pytest.raises(KeyStateError, match="revoked already"):
        client.tokens.revoke(token["prefix"])


def test_open_workspace_refuses_when_the_environment_names_a_server(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_SERVER", served.url)

    with pytest.raises(UsageError) as refused:
        forgeml.open_workspace()

    assert str(refused.value) == (
        "FORGEML_SERVER is set, so the workspace is the server's: use forgeml.sdk or "
        "forgeml.connect() (its Client), or unset FORGEML_SERVER to open the local workspace."
    )


def test_open_workspace_opens_the_workspace_its_settings_name_even_with_a_server(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_SERVER", served.url)

    workspace = forgeml.open_workspace(Settings(home=tmp_path / "home", user="ada"))
    try:
        assert workspace.settings.home == tmp_path / "home"
    finally:
        workspace.close()


def test_open_workspace_opens_the_local_one_without_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGEML_SERVER", raising=False)
    monkeypatch.setenv("FORGEML_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    try:
        workspace = forgeml.open_workspace()
        assert workspace.settings.home == tmp_path / "home"
        workspace.close()
    finally:
        get_settings.cache_clear()
