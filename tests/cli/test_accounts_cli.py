from __future__ import annotations

import io
from typing import Any

import pytest

from forgeml.auth import authenticate, list_members
from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, assert_ok, json_out

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    from forgeml.auth._settings import get_auth_settings

    monkeypatch.setenv("FORGEML_AUTH_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("FORGEML_AUTH_ARGON2_MEMORY_KIB", "8")
    monkeypatch.setenv("FORGEML_AUTH_ARGON2_PARALLELISM", "1")
    get_auth_settings.cache_clear()
    yield
    get_auth_settings.cache_clear()


def _with_stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_users_create_list_disable(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_stdin(monkeypatch, PASSWORD + "\n")
    made = cli("users", "create", "alice", "--role", "owner", "--password-stdin", "--json")
    assert json_out(made)["roles"] == {"default": "owner"}
    assert_ok(cli("users", "create", "ci", "--service"))
    listed = json_out(cli("users", "list", "--json"))
    assert [(u["name"], u["kind"], u["has_password"]) for u in listed] == [
        ("alice", "user", True),
        ("ci", "service", False),
    ]
    assert PASSWORD not in str(listed) and "hash" not in str(listed)
    shown = json_out(cli("users", "show", "alice", "--json"))
    assert (shown["name"], shown["roles"]) == ("alice", {"default": "owner"})
    assert "owner" in cli("users", "show", "alice").stdout
    assert_cli_error(cli("users", "show", "nobody"), "No account")
    assert_ok(cli("users", "disable", "ci"))
    assert "disabled" in cli("users", "list").stdout
    assert json_out(cli("users", "enable", "ci", "--json"))["disabled"] is False


def test_user_errors_are_one_sentence(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_stdin(monkeypatch, "")
    assert_cli_error(cli("users", "create", "bob", "--password-stdin"), "read no password", 2)
    _with_stdin(monkeypatch, "short\n")
    assert_cli_error(cli("users", "create", "bob", "--password-stdin"), "at least 12", 2)
    assert_cli_error(cli("users", "create", "bob", "--role", "root"), "Unknown role", 2)
    assert_cli_error(cli("users", "create", "../bob"), "Invalid account name")
    assert_cli_error(cli("users", "disable", "nobody"), "No account is called 'nobody'")
    assert_ok(cli("users", "create", "bob"))
    assert_cli_error(cli("users", "create", "bob"), "exists already")
    assert_cli_error(cli("users", "password", "bob"), "No password given", 2)
    assert_ok(cli("users", "create", "ci", "--service"))
    _with_stdin(monkeypatch, PASSWORD + "\n")
    assert_cli_error(cli("users", "password", "ci", "--password-stdin"), "service account")


def test_users_password_sets_a_hash_that_signs_in(
    cli: Any, home_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.auth import Passwords, check_password, get_auth_settings

    assert_ok(cli("users", "create", "bob"))
    _with_stdin(monkeypatch, PASSWORD + "\n")
    assert_ok(cli("users", "password", "bob", "--password-stdin"))
    passwords = Passwords(get_auth_settings())
    assert check_password(home_workspace, "bob", PASSWORD, passwords)
    assert not check_password(home_workspace, "bob", PASSWORD + "x", passwords)


def test_projects_create_members_and_remove(cli: Any, home_workspace: Workspace) -> None:
    assert_ok(cli("users", "create", "alice"))
    assert_ok(cli("users", "create", "bob"))
    assert_ok(cli("projects", "create", "vision", "--owner", "alice"))
    assert_ok(cli("projects", "add-member", "vision", "bob", "--role", "developer"))
    members = json_out(cli("projects", "members", "vision", "--json"))
    assert {m["user"]: m["role"] for m in members} == {"alice": "owner", "bob": "developer"}
    assert json_out(cli("projects", "list", "--json"))[0]["members"] == 2
    assert_ok(cli("projects", "remove-member", "vision", "bob"))
    assert [m["user"] for m in list_members(home_workspace, "vision")] == ["alice"]
    assert_cli_error(cli("projects", "remove-member", "vision", "bob"), "not a member")
    assert_cli_error(cli("projects", "add-member", "nlp", "bob", "--role", "viewer"), "No project")


def test_the_last_owner_is_kept_in_one_sentence(cli: Any) -> None:
    assert_ok(cli("users", "create", "alice"))
    assert_ok(cli("projects", "create", "vision", "--owner", "alice"))
    last = "alice is the last owner of the project 'vision'; make someone else its owner first"
    assert_cli_error(cli("projects", "remove-member", "vision", "alice"), last)
    assert_cli_error(cli("projects", "add-member", "vision", "alice", "--role", "admin"), last)
    assert_cli_error(cli("users", "disable", "alice"), last)


def test_tokens_create_prints_the_token_once(cli: Any, home_workspace: Workspace) -> None:
    assert_ok(cli("users", "create", "ci", "--service"))
    result = cli(
        "tokens", "create", "--user", "ci", "--name", "build", "--scope", "datasets:read",
        "--expires-days", "30",
    )  # fmt: skip
    assert_ok(result)
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("fmlt_") and "not shown again" in result.stdout
    assert authenticate(home_workspace, token).scopes == {"datasets:read"}
    listed = json_out(cli("tokens", "list", "--json"))
    secret = token.split("_", 2)[2]
    assert secret not in str(listed) and secret not in cli("tokens", "list").stdout
    assert [(t["user"], t["scopes"]) for t in listed] == [("ci", ["datasets:read"])]
    assert json_out(cli("tokens", "revoke", listed[0]["prefix"], "--json"))["revoked_at"]
    assert_cli_error(cli("tokens", "revoke", listed[0]["prefix"]), "revoked already")
    bad = cli("tokens", "create", "--user", "ci", "--name", "x", "--scope", "root:all")
    assert_cli_error(bad, "Unknown permission 'root:all'", 2)
    assert_cli_error(cli("tokens", "create", "--user", "zed", "--name", "x"), "No account")


def test_the_server_refuses_a_public_api_without_accounts(home_workspace: Workspace) -> None:
    from forgeml.cli.server import _api
    from forgeml.core.errors import UsageError

    public = _api(home_workspace, "0.0.0.0", 1, "auto")
    with pytest.raises(UsageError, match="without accounts would let anyone"), public:
        pass
    without = _api(home_workspace, "127.0.0.1", 1, "accounts")
    with pytest.raises(UsageError, match="No account exists"), without:
        pass


def test_the_server_s_oidc_config_is_checked_before_serving(
    home_workspace: Workspace, tmp_path
) -> None:
    from forgeml.cli.server import _api
    from forgeml.core.errors import ConfigError, UsageError

    missing = _api(home_workspace, "127.0.0.1", 1, "single-user", None, tmp_path / "none.yaml")
    with pytest.raises(ConfigError), missing:
        pass
    config = tmp_path / "oidc.yaml"
    config.write_text(
        "issuer: https://idp.example\nclient_id: forgeml\n"
        "redirect_uri: https://forgeml.example/api/v1/auth/oidc/callback\n"
    )
    single = _api(home_workspace, "127.0.0.1", 1, "single-user", None, config)
    with pytest.raises(UsageError, match="OIDC sign-in needs accounts"), single:
        pass
    bad_proxy = _api(home_workspace, "127.0.0.1", 1, "auto", ["proxy.local"])
    with pytest.raises(UsageError, match="not an IP address"), bad_proxy:
        pass


@pytest.mark.parametrize(
    ("allowed", "sentence"),
    [
        ((["http://ml.corp/"], []), "--allowed-host: 'http://ml.corp/' is not a host name"),
        (([], ["ml.corp"]), "--allowed-origin: 'ml.corp' is not an origin"),
    ],
)
def test_the_server_s_allowed_hosts_are_checked_before_serving(
    home_workspace: Workspace, allowed: tuple[list[str], list[str]], sentence: str
) -> None:
    from forgeml.cli.server import _api
    from forgeml.core.errors import UsageError

    served = _api(home_workspace, "127.0.0.1", 1, "single-user", allowed=allowed)
    with pytest.raises(UsageError, match=sentence), served:
        pass
