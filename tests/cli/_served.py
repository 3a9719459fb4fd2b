"""A small workspace served by the control plane with accounts, for the remote-mode parity
tests of one command group each (tests/cli/test_remote_<group>.py): no trained model, an
owner's (olivia) and a viewer's (victor) token, on SQLite or on a PostgreSQL database.

`Forgeml` runs `forgeml ...` in-process as olivia: locally on the served workspace, or
through the server with olivia's token, so both sides write the same actor."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._limits import ApiLimits
from forgeml.api._thread import api_in_thread
from forgeml.auth import add_member, issue_token
from forgeml.core.config import Settings, get_settings
from forgeml.core.workspace import Workspace
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.service import Scheduler
from tests.auth._accounts import fast_settings, person
from tests.client._remote_home import RemoteHome
from tests.conftest import PG_URL, CliResult, fresh_postgres_database

ACTOR = "olivia"


@dataclass(frozen=True)
class Served:
    home: Path
    db_url: str | None
    url: str
    tokens: dict[str, str]
    workspace: Workspace


@contextmanager
def served(
    tmp: Path, db_url: str | None = None, limits: ApiLimits | None = None
) -> Iterator[Served]:
    """A fresh workspace under `tmp` (its database at `db_url` if given), with accounts,
    served on loopback (with the API's `limits`, if given) until the block ends."""
    home = tmp / "home"
    workspace = Workspace(Settings(home=home, db_url=db_url, user=ACTOR))
    try:
        settings = fast_settings(tmp)
        tokens = {}
        for name, role in ((ACTOR, "owner"), ("victor", "viewer")):
            person(workspace, settings, name, role)
            tokens[name] = issue_token(workspace, name, "cli", actor="tester")[1]
        authorizer = AccountsAuthorizer(workspace, settings)
        with api_in_thread(workspace, authorizer=authorizer, limits=limits) as url:
            yield Served(home, db_url, url, tokens, workspace)
    finally:
        workspace.close()


@contextmanager
def served_on(backend: str, factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`served` on `sqlite` or on a fresh `postgresql` database (skipped without one)."""
    tmp = factory.mktemp(f"served-{backend}")
    if backend == "sqlite":
        with served(tmp) as home:
            yield home
        return
    if not PG_URL:
        pytest.skip("FORGEML_TEST_PG_URL is not set (no PostgreSQL server for this run)")
    with fresh_postgres_database() as url, served(tmp, url) as home:
        yield home


@contextmanager
def served_teams(
    tmp: Path,
    people: dict[str, tuple[str, str]],
    members: tuple[tuple[str, str, str], ...] = (),
) -> Iterator[Served]:
    """A fresh workspace under `tmp` (acting as olivia) whose `people` (name -> role, project)
    and extra `members` ((project, name, role)) each hold a token, served with the web UI on
    loopback until the block ends, MLflow's tracking URI unset for it."""
    from forgeml.ui import create_app

    workspace = Workspace(Settings(home=tmp / "home", user=ACTOR))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("MLFLOW_TRACKING_URI", raising=False)
            settings = fast_settings(tmp)
            for name, (role, project) in people.items():
                person(workspace, settings, name, role, project)
            for project, name, role in members:
                add_member(workspace, project, name, role, actor="tester")
            tokens = {name: issue_token(workspace, name, "t", actor="tester")[1] for name in people}
            authorizer = AccountsAuthorizer(workspace, settings)
            with api_in_thread(workspace, authorizer=authorizer, app_factory=create_app) as url:
                yield Served(tmp / "home", None, url, tokens, workspace)
    finally:
        workspace.close()


class Forgeml:
    """`forgeml ...` in-process on the served workspace, locally or through its server."""

    def __init__(self, served: Served | RemoteHome, capsys: pytest.CaptureFixture[str]) -> None:
        self.served = served
        self.capsys = capsys

    def __call__(self, *args: str) -> CliResult:
        from forgeml.cli import main

        self.capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        out = self.capsys.readouterr()
        return CliResult(code, out.out, out.err)

    def remote(self, *args: str, token: str | None = ACTOR) -> CliResult:
        login = ["--token", self.served.tokens[token]] if token else []
        return self("--server", self.served.url, *login, *args)


@contextmanager
def forgeml_on(
    served: Served | RemoteHome,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    user: str = ACTOR,
) -> Iterator[Forgeml]:
    """The environment of the local side set to the served workspace, acting as `user`."""
    monkeypatch.setenv("FORGEML_HOME", str(served.home))
    monkeypatch.setenv("FORGEML_USER", user)
    for name in ("FORGEML_SERVER", "FORGEML_TOKEN", "FORGEML_PROJECT", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FORGEML_ARTIFACTS_URL", raising=False)
    if served.db_url:
        monkeypatch.setenv("FORGEML_DB_URL", served.db_url)
    else:
        monkeypatch.delenv("FORGEML_DB_URL", raising=False)
    get_settings.cache_clear()
    try:
        yield Forgeml(served, capsys)
    finally:
        get_settings.cache_clear()


def assert_same_as_local(local: CliResult, remote: CliResult, context: object = None) -> None:
    """The remote run printed and exited as the local one, and an error is one sentence."""
    assert (remote.code, remote.stdout, remote.stderr) == (
        local.code, local.stdout, local.stderr,
    ), context  # fmt: skip
    if local.code:
        assert local.stderr.startswith("error: ") and local.stderr.count("\n") == 1, context


def assert_queued_as_job(run: Forgeml, command: tuple[str, ...]) -> None:
    """`forgeml --server URL COMMAND --detach` queues `forgeml COMMAND` as the caller's job
    (cancelled here: no scheduler runs it)."""
    queued = run.remote(*command, "--detach")
    found = re.match(r"job (\w+) queued in 'default'; follow it with\s+`forgeml", queued.stdout)
    assert queued.code == 0 and found, queued
    job = json.loads(run.remote("jobs", "show", found[1], "--json").stdout)
    assert job["command"][1:] == ["-m", "forgeml.cli", *command]
    assert run.remote("jobs", "cancel", found[1]).code == 0


@contextmanager
def scheduling(home: Served) -> Iterator[Workspace]:
    """The served workspace's scheduler, running jobs on this machine until the block ends."""
    workspace = Workspace(Settings(home=home.home, db_url=home.db_url, user="tester"))
    scheduler = Scheduler(workspace, LocalExecutor(cpus=[0, 1], gpus=0))
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.serve_forever, args=(0.05, stop), daemon=True)
    thread.start()
    try:
        yield workspace
    finally:
        stop.set()
        thread.join()
        workspace.close()
