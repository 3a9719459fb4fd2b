"""Remote mode: each covered command prints the same through the API as it does on the
local workspace, with the same errors and exit codes, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.cli._served import Forgeml, assert_same_as_local, forgeml_on
from tests.client._remote_home import RemoteHome, remote_home
from tests.conftest import PG_URL, fresh_postgres_database
from tests.data.conftest import write_table_csv

# every covered read command; `{job}` is the queued job's id
READS = [
    ("runs", "list"),
    ("runs", "list", "--json"),
    ("runs", "list", "--name", "adult-mlp", "--json"),
    ("runs", "show", "adult-mlp"),
    ("runs", "show", "adult-mlp", "--json"),
    ("models", "list"),
    ("models", "list", "--json"),
    ("models", "show", "adult-mlp@production"),
    ("models", "show", "adult-mlp@v1", "--json"),
    ("models", "card", "adult-mlp@v1"),
    ("models", "card", "adult-mlp@production", "--format", "html", "--json"),
    ("data", "list"),
    ("data", "list", "--json"),
    ("data", "versions", "adult"),
    ("data", "versions", "adult", "--json"),
    ("data", "show", "adult@v1"),
    ("data", "show", "adult", "--json"),
    ("jobs", "list"),
    ("jobs", "list", "--state", "pending", "--json"),
    ("jobs", "list", "--state", "queued"),
    ("jobs", "show", "{job}"),
    ("jobs", "show", "{job}", "--json"),
    ("queues", "list"),
    ("queues", "list", "--json"),
    ("queues", "show", "default", "--json"),
    ("keys", "list"),
    ("keys", "list", "--json"),
    ("keys", "usage"),
    ("keys", "usage", "--since", "2026-01-01", "--json"),
    ("audit", "log", "--limit", "5"),
    ("audit", "log", "--json"),
    ("audit", "verify"),
    # the same error sentence and exit code
    ("runs", "show", "nosuch"),
    ("models", "show", "nosuch@v1"),
    ("models", "card", "nosuch@v1"),
    ("models", "card", "adult-mlp@v1", "--format", "pdf"),
    ("data", "show", "adult@v99"),
    ("jobs", "show", "nosuch"),
    ("queues", "show", "nosuch"),
    ("keys", "revoke", "nosuch"),
]


@pytest.fixture(scope="module")
def sqlite_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteHome]:
    with remote_home(tmp_path_factory, "sqlite") as home:
        yield home


@pytest.fixture(scope="module")
def postgresql_served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[RemoteHome]:
    if not PG_URL:
        pytest.skip("FORGEML_TEST_PG_URL is not set (no PostgreSQL server for this run)")
    db_url = request.getfixturevalue("module_postgres_url")
    with remote_home(tmp_path_factory, "postgresql", db_url) as home:
        yield home


@pytest.fixture
def served(request: pytest.FixtureRequest) -> RemoteHome:
    """The workspace served; on SQLite unless a test asks for `postgresql` (indirect)."""
    backend = getattr(request, "param", "sqlite")
    return request.getfixturevalue(f"{backend}_served")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this module, dropped afterwards."""
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def forgeml(
    served: RemoteHome, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Forgeml]:
    with forgeml_on(served, capsys, monkeypatch, user="tester") as run:
        yield run


BACKENDS = pytest.mark.parametrize("served", ["sqlite", "postgresql"], indirect=True)


@pytest.mark.slow
@BACKENDS
@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_remote_prints_what_local_prints(forgeml: Forgeml, command: tuple[str, ...]) -> None:
    args = [arg.replace("{job}", forgeml.served.job_id) for arg in command]

    local = forgeml(*args)
    remote = forgeml.remote(*args)

    assert_same_as_local(local, remote)  # an error is one sentence, the same through the API
    if not local.code:
        assert local.stdout and not local.stderr


@BACKENDS
def test_remote_mutations_print_what_local_ones_print(forgeml: Forgeml) -> None:
    job = forgeml.served.job_id
    promote = ("models", "promote", "adult-mlp", "1", "--alias", "production")
    card = ("models", "card", "adult-mlp@v1", "--intended-use", "Census research.", "--json")
    # cancel then retry leaves the job as it was, so the remote pair meets the same states
    steps = [("jobs", "cancel", job), ("jobs", "retry", job), promote, (*promote, "--json"), card]
    local = [forgeml(*step) for step in steps]
    remote = [forgeml.remote(*step) for step in steps]

    assert [(r.code, r.stdout) for r in remote] == [(r.code, r.stdout) for r in local]
    assert [r.code for r in local] == [0] * len(steps), [r.stderr for r in local]
    assert "cancelled" in local[0].stdout and "queued again" in local[1].stdout


def test_revoking_a_key_twice_is_refused_alike(forgeml: Forgeml) -> None:
    from forgeml.gateway import create_key

    with closing(Workspace(Settings(home=forgeml.served.home, user="tester"))) as workspace:
        prefix = create_key(workspace, "twice")[0]["prefix"]
    revoked = forgeml.remote("keys", "revoke", prefix)
    local = forgeml("keys", "revoke", prefix)
    remote = forgeml.remote("keys", "revoke", prefix)

    assert revoked.stdout == f"key {prefix} revoked\n"
    assert (remote.code, remote.stderr) == (local.code, local.stderr)
    assert local.code == 1 and local.stderr.startswith("error: ")


def test_a_key_created_remotely_is_the_server_s_and_bad_limits_are_refused_alike(
    forgeml: Forgeml,
) -> None:
    created = json.loads(forgeml.remote("keys", "create", "--name", "remote-made", "--json").stdout)
    listed = json.loads(forgeml("keys", "list", "--json").stdout)  # the served workspace's

    assert created["prefix"] in created["key"]
    assert created["prefix"] in [key["prefix"] for key in listed]
    for bad in (["--rate", "0"], ["--burst", "3"]):
        local = forgeml("keys", "create", "--name", "bad", *bad)
        remote = forgeml.remote("keys", "create", "--name", "bad", *bad)
        assert (remote.code, remote.stderr) == (local.code, local.stderr), bad
        assert local.code == 2 and local.stderr.startswith("error: "), local.stderr


def test_a_queue_created_remotely_is_the_server_s_and_a_taken_name_is_refused_alike(
    forgeml: Forgeml,
) -> None:
    made = forgeml.remote("queues", "create", "remote-q", "--weight", "3", "--cpus", "2", "--json")
    shown = json.loads(forgeml("queues", "show", "remote-q", "--json").stdout)  # the server's

    assert json.loads(made.stdout)["weight"] == 3 and shown["capability"] == {"cpus": 2.0}
    local = forgeml("queues", "create", "remote-q")
    remote = forgeml.remote("queues", "create", "remote-q")
    assert (remote.code, remote.stderr) == (local.code, local.stderr)
    assert local.code == 1 and "remote-q" in local.stderr


@BACKENDS
def test_data_add_uploads_the_file_and_prints_what_local_add_prints(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    csv = write_table_csv(tmp_path / "small.csv")
    added = forgeml.remote("data", "add", "small", str(csv), "--label", "label", "--json")
    # the version exists now: both sides find the identical content
    local = forgeml("data", "add", "small", str(csv), "--label", "label")
    remote = forgeml.remote("data", "add", "small", str(csv), "--label", "label")

    summary = json.loads(added.stdout)
    assert (summary["ref"], summary["rows"], summary["created"]) == ("small@v1", 120, True)
    assert (remote.code, remote.stdout) == (local.code, local.stdout)
    assert local.stdout.startswith("unchanged: identical content is small@v1 (120 rows")
    shown = forgeml("data", "show", "small@v1", "--json")
    assert shown.stdout == forgeml.remote("data", "show", "small@v1", "--json").stdout


def test_a_viewer_is_refused_a_promotion_in_one_sentence(forgeml: Forgeml) -> None:
    refused = forgeml.remote("models", "promote", "adult-mlp", "1", token="victor")

    assert refused.code == 1
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("error: ")
    assert "Traceback" not in refused.stderr


def test_no_token_against_an_accounts_server_says_to_set_one(forgeml: Forgeml) -> None:
    refused = forgeml.remote("runs", "list", token=None)

    assert refused.code == 1
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"error: The forgeml server at {forgeml.served.url}")
    assert "FORGEML_TOKEN" in refused.stderr


def test_a_server_that_is_down_is_one_sentence(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as unused:  # a port nothing listens on: bound, never listening
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}"
        monkeypatch.setenv("FORGEML_SERVER", url)
        down = forgeml("runs", "list")

    assert down.code == 1
    assert down.stderr == (
        f"error: Cannot reach the forgeml server at {url} (cannot connect); "
        "is `forgeml server` running there?\n"
    )


def test_a_server_url_that_is_not_http_is_refused(forgeml: Forgeml) -> None:
    refused = forgeml("--server", "file:///etc/passwd", "runs", "list")

    assert refused.code == 1
    assert "must be an http(s) URL" in refused.stderr


@pytest.mark.parametrize("command", [("init",), ("serve", "m@v1")])
def test_commands_that_run_beside_the_workspace_refuse_remote_mode(
    forgeml: Forgeml, command: tuple[str, ...]
) -> None:
    refused = forgeml.remote(*command)

    assert refused.code == 2
    assert refused.stderr == (
        f"error: `forgeml {command[0]}` cannot run in remote mode: it "
        + __import__("forgeml.cli._remote").cli._remote.LOCAL_ONLY[command[0]]
        + ".\n"
    )


def test_a_folder_cannot_be_uploaded(forgeml: Forgeml, tmp_path: Path) -> None:
    refused = forgeml.remote("data", "add", "texts", str(tmp_path))

    assert refused.code == 2
    assert "is not a file; only a file can be uploaded" in refused.stderr


def test_a_command_without_a_remote_mode_refuses_rather_than_run_locally(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every command has a remote mode now (a test walks them all); one added without it
    # is what this guard is for: `queues create` taken out of the table plays that command
    from forgeml.cli import _remote

    monkeypatch.setattr(
        _remote, "REMOTE_COMMANDS", _remote.REMOTE_COMMANDS - {("queues", "create")}
    )

    refused = forgeml.remote("queues", "create", "gpu")

    assert refused.code == 2
    assert "`forgeml queues create` has no remote mode" in refused.stderr
    assert forgeml.remote("queues", "list").code == 0  # nothing was created, here or there
    assert "gpu" not in forgeml.remote("queues", "list").stdout


@pytest.mark.parametrize("server", [None, "http://127.0.0.1:9"])
def test_deciding_the_mode_does_not_import_the_http_client(server: str | None) -> None:
    import os
    import subprocess
    import sys

    probe = (
        "import sys; from forgeml.cli._remote import check_command; "
        "check_command(['data', 'list']); print('httpx' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FORGEML_SERVER", "FORGEML_TOKEN")}
    if server:
        env["FORGEML_SERVER"] = server
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )

    assert done.stdout == "False\n"
