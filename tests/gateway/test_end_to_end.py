from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import DeploymentRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key, usage_report
from tests._wait import wait_until
from tests.gateway.conftest import add_deployment, dead_url
from tests.serve.conftest import adult_records
from tests.train.conftest import (
    copy_home,
    forgeml_command,
    subprocess_env,
    trained_adult_template,
)

pytestmark = pytest.mark.slow


def _free_port() -> int:
    return int(dead_url().rsplit(":", 1)[1])


def _start(home: Path, logs: Path, *args: str, ready: str) -> subprocess.Popen[bytes]:
    with logs.open("wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            forgeml_command(*args), env=subprocess_env(home), stdout=log, stderr=subprocess.STDOUT
        )

    def up() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{args[0]} exited before it was ready: {logs.read_text()[-2000:]}")
        try:
            return httpx.get(ready, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, 120, f"{args[0]}'s start", interval=0.2)
    except BaseException:
        process.kill()
        raise
    return process


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A home whose deployment `adult` is one real `forgeml serve` process."""
    root = tmp_path_factory.mktemp("gw-e2e")
    home = copy_home(trained_adult_template(tmp_path_factory), root / "home")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start(
        home, root / "serve.log", "serve", "adult-mlp@v1", "--name", "adult",
        "--port", str(port), ready=f"{url}/v2/health/ready",
    )  # fmt: skip
    try:
        yield home, url
    finally:
        _stop(server)


@pytest.mark.parametrize(
    "entry",
    [("gateway", "--port"), ("server", "--interval", "0.5", "--gateway-port")],
    ids=["forgeml-gateway", "inside-forgeml-server"],
)
def test_a_real_model_server_behind_the_gateway_with_a_key(
    served: tuple[Path, str], entry: tuple[str, ...]
) -> None:
    home, replica = served
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        with workspace.store.session() as session:
            deployed = session.scalars(select(DeploymentRecord.name)).all()
        if "adult" not in deployed:
            add_deployment(workspace, "adult", [replica])
        summary, key = create_key(workspace, "e2e", ["adult"])
        port = _free_port()
        gateway_url = f"http://127.0.0.1:{port}"
        gateway = _start(
            home, home.parent / f"{entry[0]}.log", *entry, str(port),
            ready=f"{gateway_url}/healthz",
        )  # fmt: skip
        try:
            records = adult_records(5)
            with httpx.Client(base_url=gateway_url, timeout=30) as client:
                answer = client.post(
                    "/v1/models/adult:predict",
                    headers={"Authorization": f"Bearer {key}"},
                    json={"instances": records},
                )
                refused = client.post("/v1/models/adult:predict", json={"instances": records})
            direct = httpx.post(f"{replica}/v1/models/adult:predict", json={"instances": records})
        finally:
            assert _stop(gateway) == 0
        assert answer.status_code == 200, answer.text
        assert answer.json() == direct.json()
        assert len(answer.json()["predictions"]) == 5
        assert refused.status_code == 401
        (row,) = [r for r in usage_report(workspace) if r["key_id"] == summary["id"]]  # flushed
        assert (row["deployment"], row["requests"], row["errors"]) == ("adult", 1, 0)
    finally:
        workspace.close()
