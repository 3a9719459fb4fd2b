"""`forgeml.client.Client` against a real server: answers, keyset pages, errors as the
local code raises them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from forgeml.client import Client
from forgeml.core.errors import (
    AuthenticationError,
    ConfigError,
    NotFoundError,
    PermissionDeniedError,
)
from tests.client._remote_home import RemoteHome, remote_home


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteHome]:
    with remote_home(tmp_path_factory, "sqlite") as home:
        yield home


@pytest.fixture
def owner(served: RemoteHome) -> Iterator[Client]:
    with Client(served.url, served.tokens["olivia"]) as client:
        yield client


def test_lists_follow_every_keyset_page(owner: Client) -> None:
    whole = owner.transport.get("/audit", {"limit": 500})

    paged = owner.transport.pages("/audit", {"limit": 2})

    assert len(whole) > 4
    assert paged == whole


def test_answers_are_what_the_cli_json_prints(owner: Client, served: RemoteHome) -> None:
    model = owner.models.show("adult-mlp@production")
    assert (model["ref"], model["aliases"]) == ("adult-mlp@v1", ["production"])
    assert [job["job_id"] for job in owner.jobs.list(states=["PENDING"])] == [served.job_id]
    assert {run["status"] for run in owner.runs.list()} == {"FINISHED", "FAILED"}
    assert owner.datasets.show("adult@v1")["ref"] == "adult@v1"
    assert owner.audit.verify()["intact"] is True


def test_an_error_answer_is_the_error_the_local_code_raises(owner: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        owner.runs.show("nosuch")

    assert str(missing.value) == "Run 'nosuch' does not exist (see `forgeml runs list`)."


def test_a_viewer_is_refused_a_promotion(served: RemoteHome) -> None:
    with (
        Client(served.url, served.tokens["victor"]) as viewer,
        pytest.raises(PermissionDeniedError),
    ):
        viewer.models.promote("adult-mlp", 1)


def test_no_token_says_which_variable_to_set(served: RemoteHome) -> None:
    with Client(served.url) as anonymous, pytest.raises(AuthenticationError) as refused:
        anonymous.runs.list()

    assert "FORGEML_TOKEN" in str(refused.value)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "127.0.0.1:8080", "ftp://host/"])
def test_only_http_servers_are_spoken_to(url: str) -> None:
    with pytest.raises(ConfigError, match="must be an http"):
        Client(url)


def test_from_env_reads_the_server_and_token(
    served: RemoteHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGEML_SERVER", raising=False)
    assert Client.from_env() is None

    monkeypatch.setenv("FORGEML_SERVER", served.url)
    monkeypatch.setenv("FORGEML_TOKEN", served.tokens["olivia"])
    client = Client.from_env()

    assert client is not None
    with client:
        assert client.queues.show("default")["name"] == "default"
