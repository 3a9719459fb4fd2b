"""`forgeml users|projects|tokens` in remote mode print what they print locally, with the
same errors and exit codes (a 409 is the error the local code raises: a name taken, the
last owner, a token revoked already), on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from tests.cli._served import Forgeml, Served, assert_same_as_local, served_on

# made through the server first; each is then repeated on both sides, which must print
# alike (a repeat finds the state the first made: often an error, the same one)
CHANGES = [
    ("users", "create", "ci", "--service", "--role", "developer"),
    ("users", "create", "bot", "--service", "--json"),
    ("users", "disable", "bot"),
    ("users", "enable", "bot", "--json"),
    ("projects", "create", "vision"),
    ("projects", "add-member", "vision", "ci", "--role", "maintainer"),
    ("projects", "add-member", "vision", "bot", "--role", "viewer", "--json"),
    ("projects", "remove-member", "vision", "bot"),
]
READS = [
    ("users", "list"),
    ("users", "list", "--json"),
    ("users", "show", "ci"),
    ("users", "show", "ci", "--json"),
    ("projects", "list"),
    ("projects", "list", "--json"),
    ("projects", "members", "vision"),
    ("projects", "members", "default", "--json"),
    ("tokens", "list", "--user", "ci"),
    ("tokens", "list", "--user", "ci", "--json"),
    # the same sentence and exit code
    ("users", "show", "nosuch"),
    ("users", "create", "x", "--service", "--role", "emperor"),  # a usage error: 2
    ("projects", "remove-member", "default", "olivia"),  # the last owner: 409
    ("projects", "add-member", "vision", "nosuch", "--role", "viewer"),
    ("tokens", "list", "--user", "nosuch"),
    ("tokens", "revoke", "fmlt_nosuch"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_on(request.param, tmp_path_factory) as home:
        yield home


def _alike(forgeml: Forgeml, *args: str) -> None:
    local, remote = forgeml(*args), forgeml.remote(*args)
    assert_same_as_local(local, remote, args)


@pytest.mark.slow
def test_account_changes_then_reads_print_alike(forgeml: Forgeml) -> None:
    for command in CHANGES:
        first = forgeml.remote(*command)
        assert first.code == 0, (command, first.stderr)
        _alike(forgeml, *command)
    for command in READS:
        _alike(forgeml, *command)
    # a project the caller holds no role in is refused before it is looked up: its
    # existence is not told (exit 1 on both sides, another sentence)
    unknown = forgeml.remote("projects", "members", "nosuch")
    assert unknown.code == forgeml("projects", "members", "nosuch").code == 1
    last_owner = forgeml.remote("projects", "remove-member", "default", "olivia")
    assert last_owner.code == 1 and "owner" in last_owner.stderr


def test_a_token_is_created_listed_and_revoked_alike(forgeml: Forgeml) -> None:
    assert forgeml.remote("users", "create", "deployer", "--service").code == 0
    created = forgeml.remote("tokens", "create", "--user", "deployer", "--name", "ci", "--json")
    token = json.loads(created.stdout)
    assert token["token"].startswith(token["prefix"] + "_") and token["user"] == "deployer"
    _alike(forgeml, "tokens", "list", "--user", "deployer", "--json")

    revoked = forgeml.remote("tokens", "revoke", token["prefix"])
    assert revoked.stdout == f"token {token['prefix']} revoked\n"
    # revoked already: KeyStateError on both sides, the same sentence
    _alike(forgeml, "tokens", "revoke", token["prefix"])
    _alike(forgeml, "tokens", "revoke", token["id"], "--json")


def test_every_token_lists_alike_for_an_owner(forgeml: Forgeml) -> None:
    assert forgeml.remote("users", "create", "lister", "--service").code == 0
    assert forgeml.remote("tokens", "create", "--user", "lister", "--name", "a").code == 0
    # olivia's own token is used (and stamped) by the remote call: compare the others
    local = json.loads(forgeml("tokens", "list", "--json").stdout)
    remote = json.loads(forgeml.remote("tokens", "list", "--json").stdout)

    def unused(tokens: list[dict[str, object]]) -> list[dict[str, object]]:
        return [t for t in tokens if t["user"] != "olivia"]

    assert unused(remote) == unused(local)
    assert {t["user"] for t in remote} >= {"olivia", "victor", "lister"}


def test_my_own_token_is_made_through_the_server(forgeml: Forgeml) -> None:
    made = forgeml.remote("tokens", "create", "--user", "olivia", "--name", "laptop", "--json")

    assert made.code == 0 and json.loads(made.stdout)["user"] == "olivia"
    # people make their own tokens: the server refuses one for another person
    refused = forgeml.remote("tokens", "create", "--user", "victor", "--name", "x")
    assert refused.code == 1 and "people make their own tokens" in refused.stderr


def test_a_password_is_set_through_the_server(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a new long password\n"))
    done = forgeml.remote("users", "password", "victor", "--password-stdin")

    assert (done.code, done.stdout) == (0, "password of victor set\n")


def test_a_viewer_may_list_projects_but_not_create_an_account(forgeml: Forgeml) -> None:
    assert forgeml.remote("projects", "list", token="victor").code == 0
    refused = forgeml.remote("users", "create", "mallory", "--service", token="victor")

    assert refused.code == 1 and refused.stderr.count("\n") == 1
    assert "users:manage" in refused.stderr
