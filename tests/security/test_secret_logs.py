"""No secret a session issues reaches a log: CLI commands at `--debug` and a real
`forgeml server --debug --access-log` write to files, then every file is searched for every
token, password, session cookie and gateway key; only the command that shows a secret once
(on its stdout) may hold it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
NEW_PASSWORD = "a second long passphrase"
WRONG_PASSWORD = "a guess that is wrong!"
CHEAP_ARGON2 = {
    "FORGEML_AUTH_ARGON2_TIME_COST": "1",
    "FORGEML_AUTH_ARGON2_MEMORY_KIB": "8",
    "FORGEML_AUTH_ARGON2_PARALLELISM": "1",
}


class Session:
    """Runs `forgeml --debug ...` in `home`, each command's stdout and stderr in `logs`."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.env = subprocess_env(home) | CHEAP_ARGON2
        self.logs = logs
        self.count = 0

    def run(self, *args: str, stdin: str = "") -> str:
        self.count += 1
        out, err = (self.logs / f"{self.count:02d}-{args[0]}.{kind}" for kind in ("out", "err"))
        with out.open("wb") as stdout, err.open("wb") as stderr:
            done = subprocess.run(
                forgeml_command("--debug", *args), check=False, env=self.env,
                input=stdin.encode(),
                stdout=stdout, stderr=stderr, timeout=120,
            )  # fmt: skip
        assert done.returncode == 0, err.read_text()
        return out.read_text()

    def serve(self, port: int) -> subprocess.Popen[bytes]:
        command = forgeml_command(
            "--debug", "server", "--api-port", str(port), "--auth", "accounts", "--access-log"
        )
        with (self.logs / "server.log").open("wb") as output:
            return subprocess.Popen(command, env=self.env, stdout=output, stderr=subprocess.STDOUT)


def _api(client: httpx.Client, port: int) -> dict[str, str]:
    """Signs in (a wrong password first), makes a token and a key, and uses them; returns
    every secret the server issued or was sent."""
    refused = client.post("/api/v1/auth/login", json={"name": "alice", "password": WRONG_PASSWORD})
    assert refused.status_code == 401
    login = client.post("/api/v1/auth/login", json={"name": "alice", "password": NEW_PASSWORD})
    assert login.status_code == 200, login.text
    cookie = login.cookies["forgeml_session"]
    token = client.post("/api/v1/tokens", json={"name": "laptop"}).json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    key = client.post("/api/v1/keys", json={"name": "app"}, headers=bearer)
    assert key.status_code == 201, key.text
    # a client that puts its token in the URL: the access log must not keep it
    baited = client.get("/api/v1/alerts", params={"access_token": token}, headers=bearer)
    assert baited.status_code == 200
    assert client.post("/api/v1/auth/logout").status_code == 200
    return {"session cookie": cookie, "API token": token, "gateway key (API)": key.json()["key"]}


def test_no_secret_reaches_a_log(tmp_path: Path) -> None:
    home, logs = tmp_path / "home", tmp_path / "logs"
    logs.mkdir()
    session = Session(home, logs)
    session.run("users", "create", "alice", "--role", "owner", "--password-stdin", stdin=PASSWORD)
    session.run("users", "password", "alice", "--password-stdin", stdin=NEW_PASSWORD)
    session.run("users", "create", "ci", "--service", "--role", "viewer")
    issued = session.run("tokens", "create", "--user", "ci", "--name", "build")
    keyed = session.run("keys", "create", "--name", "web")
    assert "DEBUG" in (logs / "01-users.err").read_text()  # debug logging is on
    secrets = {
        "password": PASSWORD,
        "new password": NEW_PASSWORD,
        "wrong password": WRONG_PASSWORD,
        "service token": issued.strip().splitlines()[-1],
        "gateway key (CLI)": keyed.strip().splitlines()[-1],
    }
    port = free_port()
    server = session.serve(port)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_until(lambda: _ready(client), 60, "the API answering")
            secrets |= _api(client, port)
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, (logs / "server.log").read_text()

    server_log = (logs / "server.log").read_text()
    assert '"GET /api/v1/alerts HTTP/1.1" 200' in server_log  # the access log was on
    shown_once = {issued: "service token", keyed: "gateway key (CLI)"}
    files = [*logs.iterdir(), *(home / "logs").rglob("*")]
    for file in (f for f in files if f.is_file()):
        text = file.read_text(errors="replace")
        for what, secret in secrets.items():
            if shown_once.get(text) == what:
                continue
            assert secret not in text, f"the {what} is in {file.name}"


def _ready(client: httpx.Client) -> bool:
    try:
        return client.get("/api/v1/alerts").status_code == 401
    except httpx.HTTPError:
        return False
