from __future__ import annotations

from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from forgeml.gateway import verify_key
from forgeml.gateway._usage import UsageRecorder
from tests.cli.conftest import assert_cli_error, assert_ok, json_out


def test_create_prints_the_key_once_and_list_never_shows_it(
    cli: Any, home_workspace: Workspace
) -> None:
    result = cli("keys", "create", "--name", "ci", "--scope", "adult", "--rate", "5")
    assert_ok(result)
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("fml_") and "not shown again" in result.stdout
    assert verify_key(home_workspace, key).allows("adult", "default")
    listed = json_out(cli("keys", "list", "--json"))
    assert [(k["name"], k["scopes"], k["rate_per_s"], k["burst"]) for k in listed] == [
        ("ci", ["adult"], 5.0, 5)
    ]
    secret = key.split("_", 2)[2]
    assert secret not in cli("keys", "list").stdout
    assert secret not in str(listed) and "secret_hash" not in listed[0]


def test_create_json_then_revoke(cli: Any, home_workspace: Workspace) -> None:
    created = json_out(cli("keys", "create", "--name", "ci", "--daily-quota", "100", "--json"))
    assert created["scopes"] == ["*"] and created["daily_quota"] == 100
    revoked = json_out(cli("keys", "revoke", created["prefix"], "--json"))
    assert revoked["revoked_at"] is not None
    table = cli("keys", "list").stdout
    assert created["prefix"] in table and "revoked" in table
    assert_cli_error(cli("keys", "revoke", created["prefix"]), "revoked already")


def test_revoke_unknown_key_fails(cli: Any) -> None:
    assert_cli_error(cli("keys", "revoke", "nope"), "No API key has prefix or id 'nope'")


def test_bad_limits_are_usage_errors(cli: Any) -> None:
    assert_cli_error(cli("keys", "create", "--name", "ci", "--rate", "0"), "--rate", code=2)
    assert_cli_error(cli("keys", "create", "--name", "ci", "--burst", "3"), "--burst", code=2)
    assert_cli_error(cli("keys", "create", "--name", "a/b"), "Invalid key name")
    assert json_out(cli("keys", "list", "--json")) == []


def test_usage_reports_flushed_counts(cli: Any, home_workspace: Workspace) -> None:
    assert json_out(cli("keys", "usage", "--json")) == []
    created = json_out(cli("keys", "create", "--name", "ci", "--json"))
    recorder = UsageRecorder(home_workspace)
    for latency in (2.0, 4.0):
        recorder.record(created["id"], "adult", forwarded=True, error=False, latency_ms=latency)
    recorder.record(created["id"], "adult", forwarded=False, error=False, latency_ms=0.0)
    assert recorder.flush() == 1
    (row,) = json_out(cli("keys", "usage", "--json"))
    assert (row["prefix"], row["deployment"], row["requests"], row["rejected"]) == (
        created["prefix"], "adult", 2, 1,
    )  # fmt: skip
    assert row["mean_latency_ms"] == 3.0
    assert json_out(cli("keys", "usage", "--since", "2999-01-01", "--json")) == []
    assert "adult" in cli("keys", "usage").stdout


@pytest.mark.parametrize(
    ("flag", "value"), [("--timeout", "0"), ("--max-body-mb", "0"), ("--max-body-mb", "1e-9")]
)
def test_gateway_refuses_bad_options(cli: Any, flag: str, value: str) -> None:
    assert_cli_error(cli("gateway", flag, value), f"Invalid {flag}", code=2)
