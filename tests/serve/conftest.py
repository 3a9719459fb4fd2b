"""A workspace with an Adult MLP and the SST-2 MiniLM classifier, and a live server over it.

The served home is the trained Adult workspace with `sst2-minilm@v1` imported from the
text workspace (registered under a run of its own), built once per session; each test
module copies it. `LiveServer` runs the app under uvicorn on a free loopback port in a
thread and stops it in its fixture's finaliser.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import uvicorn

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.serve import ServeOptions, create_app
from forgeml.serve._supervisor import free_port, probe
from tests._wait import wait_until
from tests.train.conftest import (
    SHARED_DATA,
    copy_home,
    trained_adult_template,
    trained_text_template,
)

ADULT_TEST = SHARED_DATA / "adult" / "adult.test"


def adult_records(count: int, offset: int = 0) -> list[dict[str, Any]]:
    """Raw Adult test rows as a caller sends them: cleaned as the example does, no label."""
    frame = pl.read_csv(
        ADULT_TEST, skip_rows=1, has_header=False, n_rows=2 * (offset + count), infer_schema=False
    )
    names = [
        "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
        "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
        "hours-per-week", "native-country", "Y",
    ]  # fmt: skip
    frame = frame.rename(dict(zip(frame.columns, names, strict=True)))
    frame = frame.with_columns(pl.col(pl.String).str.strip_chars().replace("?", None))
    numbers = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    frame = frame.with_columns(pl.col(numbers).cast(pl.Int64))
    return frame.drop_nulls().slice(offset, count).drop("Y").to_dicts()


def open_home(home: Path) -> Workspace:
    return Workspace(Settings(home=home, user="tester"))


def _import_text_model(home: Path, text_home: Path, scratch: Path) -> None:
    from forgeml.tracking import (
        download_bundle,
        finish_run,
        get_model_version,
        register_model,
        start_run,
    )

    source = open_home(text_home)
    try:
        bundle = download_bundle(source, get_model_version(source, "sst2-minilm@v1"), scratch)
    finally:
        source.close()
    workspace = open_home(home)
    try:
        handle = start_run(workspace, {"imported": "sst2-minilm@v1"}, "sst2-minilm", None)
        register_model(workspace, handle, "sst2-minilm", bundle, metrics={"accuracy": 0.5})
        finish_run(handle, "FINISHED", {})
    finally:
        workspace.close()


@pytest.fixture(scope="session")
def serve_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """adult-mlp@v1, @v2, adult-small@v1 and sst2-minilm@v1 in one FORGEML_HOME."""
    root = tmp_path_factory.getbasetemp() / "templates" / "serve"
    home = root / "home"
    if not (root / ".done").exists():
        shutil.rmtree(root, ignore_errors=True)
        adult, text = (
            trained_adult_template(tmp_path_factory),
            trained_text_template(tmp_path_factory),
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("MLFLOW_TRACKING_URI", raising=False)
            shutil.copytree(adult, home)
            _import_text_model(home, text, root / "bundle")
        (root / ".done").touch()
    return home


def wait_ready(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Return once the server at `url` is ready; fail early if its `process` exits."""

    def ready() -> bool:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"forgeml serve exited with {process.returncode}")
        return probe(url, timeout=5)

    wait_until(ready, timeout, f"the model server at {url} being ready", interval=0.1)


class LiveServer:
    """`create_app(...)` under uvicorn in a thread, on a free loopback port."""

    def __init__(self, workspace: Workspace, refs: list[str], options: ServeOptions) -> None:
        self.app = create_app(workspace, refs, options)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_config=None)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout: float = 180.0) -> LiveServer:
        self.thread.start()
        try:
            wait_ready(self.url, timeout)
        except AssertionError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def request_log_entry(server: LiveServer, value: str, key: str = "id") -> dict[str, Any]:
    """The request log entry whose `key` is `value` (the log is written by a background
    thread, so this waits for it)."""
    import json

    path: Path = server.app.state.request_log.path
    found: list[dict[str, Any]] = []

    def entry() -> bool:
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            found[:] = [e for e in map(json.loads, lines) if e.get(key) == value]
        return bool(found)

    wait_until(entry, what=f"a request with {key} {value} in the request log")
    return found[0]


@pytest.fixture(scope="module")
def served_home(serve_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private copy of the serve template for one test module."""
    home = copy_home(serve_template, tmp_path_factory.mktemp("served") / "home")
    saved = os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield home
    if saved is not None:
        os.environ["MLFLOW_TRACKING_URI"] = saved
