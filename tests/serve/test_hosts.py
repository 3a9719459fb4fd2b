"""The model server and the gateway answer to their own names only: DNS rebinding (Ray
CVE-2025-62593) replayed against a real `forgeml gateway`, and `forgeml serve`'s guard."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from forgeml.core.errors import UsageError
from forgeml.serve._supervisor import free_port
from forgeml.serve.hosts import guarded, served_hosts
from tests._wait import wait_until
from tests.train.conftest import forgeml_command, subprocess_env


def _ok(_request: object) -> PlainTextResponse:
    return PlainTextResponse("served")


def _status(url: str, host: str) -> int | None:
    try:
        return httpx.get(f"{url}/v1/models", headers={"Host": host}, timeout=5).status_code
    except httpx.HTTPError:
        return None


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `forgeml gateway` on 127.0.0.1, also reached as gw.example."""
    home = tmp_path_factory.mktemp("gateway-hosts") / "home"
    port = free_port()
    command = forgeml_command("gateway", "--port", str(port), "--allowed-host", "gw.example")
    log = home.parent / "gateway.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env=subprocess_env(home), stdout=output, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _status(url, f"127.0.0.1:{port}") is not None, 60, "the gateway")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions", "/metrics"])
def test_cve_2025_62593_the_gateway_refuses_a_rebound_host(gateway: str, path: str) -> None:
    answer = httpx.post(f"{gateway}{path}", headers={"Host": "attacker.example"}, json={})

    assert answer.status_code == 400
    assert "This server is not 'attacker.example'" in answer.json()["error"]
    assert answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("host", ["gw.example", "localhost:8080", "127.0.0.1"])
def test_the_gateway_answers_its_own_names(gateway: str, host: str) -> None:
    assert _status(gateway, host) not in (None, 400)


def test_a_guarded_model_server_app_refuses_other_hosts_on_every_path() -> None:
    app = Starlette(routes=[Route("/v2/health/ready", _ok)])
    client = TestClient(guarded(app, served_hosts("0.0.0.0", ["models.internal"])))

    assert client.get("/v2/health/ready", headers={"Host": "models.internal:9000"}).text == "served"
    assert client.get("/v2/health/ready", headers={"Host": "localhost"}).status_code == 200
    assert client.get("/v2/health/ready", headers={"Host": "evil.example"}).status_code == 400


def test_a_malformed_allowed_host_is_one_sentence() -> None:
    with pytest.raises(UsageError, match=r"^Invalid --allowed-host: 'a/b' is not a host"):
        served_hosts("127.0.0.1", ["a/b"])


@pytest.mark.parametrize("command", ["serve", "gateway"])
def test_the_cli_refuses_a_malformed_allowed_host(tmp_path: Path, command: str) -> None:
    args = ["serve", "m", "--port", "9"] if command == "serve" else ["gateway"]
    done = subprocess.run(
        forgeml_command(*args, "--allowed-host", "a/b"),
        env=subprocess_env(tmp_path / "home"), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip

    assert done.returncode == 2  # a usage error
    assert done.stderr.startswith("error: Invalid --allowed-host:")
    assert "Traceback" not in done.stderr
