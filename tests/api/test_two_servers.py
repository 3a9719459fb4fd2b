"""Two real `forgeml server` processes on one PostgreSQL database, hammered at once: no
operation is lost or doubled (issue 15)."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from forgeml.api._accounts import SESSION_COOKIE
from forgeml.auth import Passwords, add_member, create_user, issue_token
from forgeml.core.audit_anchor import KEY_FILE
from forgeml.core.config import Settings
from forgeml.core.store import (
    AuditEvent,
    DatasetVersion,
    JobAttemptRecord,
    JobRecord,
    QueueRecord,
    TokenRecord,
)
from forgeml.core.workspace import Workspace
from forgeml.prompts.registry import create_prompt
from forgeml.prompts.spec import PromptSpec
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.auth._accounts import PASSWORD, fast_settings
from tests.conftest import PG_URL, fresh_postgres_database
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PG_URL, reason="FORGEML_TEST_PG_URL is not set (no PostgreSQL)"),
]

QUEUES, JOBS, TOKENS, UPLOADS, ALIASES = 8, 16, 8, 8, 8


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/v1/alerts", timeout=5).status_code == 401
    except httpx.HTTPError:
        return False


def _start(
    home: Path, db_url: str, artifacts: Path, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = subprocess_env(home) | {
        "FORGEML_DB_URL": db_url, "FORGEML_ARTIFACTS_URL": str(artifacts)
    }  # fmt: skip
    command = forgeml_command("server", "--api-port", str(port), "--auth", "accounts")
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def _stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, log.read_text()


@pytest.fixture(scope="module")
def two_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Workspace, list[str], str]]:
    """Two servers, as on two machines: a home each (one server per home), one database and
    one artifact store, nothing copied between the homes (the signing keys are the
    store's); the workspace they share, their URLs and an owner's token."""
    tmp = tmp_path_factory.mktemp("two-servers")
    artifacts = tmp / "artifacts"
    with fresh_postgres_database() as db_url, ExitStack() as stack:
        settings = Settings(
            home=tmp / "home-0", user="tester", db_url=db_url, artifacts_url=str(artifacts)
        )
        workspace = Workspace(settings)
        stack.callback(workspace.close)
        passwords = Passwords(fast_settings(tmp))
        create_user(workspace, "ops", actor="tester", password=PASSWORD, passwords=passwords)
        add_member(workspace, "default", "ops", "owner", actor="tester")
        _, token = issue_token(workspace, "ops", "hammer", actor="tester")
        for n in range(3):
            create_prompt(workspace, "greet", PromptSpec(template=f"Hello {n}."))
        workspace.verify_audit()  # creates the key that signs the checkpoints, in the store
        urls = []
        for index in range(2):
            log = tmp / f"server-{index}.log"
            process, url = _start(tmp / f"home-{index}", db_url, artifacts, log)
            stack.callback(_stop, process, log)
            urls.append(url)
        for url in urls:
            wait_until(lambda u=url: _up(u), 90, f"the server at {url}")
        yield workspace, urls, token


def _operations(urls: list[str]) -> list[tuple[str, Callable[[httpx.Client], httpx.Response]]]:
    """Every operation twice where a duplicate must be refused, spread over both servers."""
    ops: list[tuple[str, Callable[[httpx.Client], httpx.Response]]] = []
    for n in range(QUEUES):  # each name sent to both servers: one 201, one 409
        body = {"name": f"q{n}"}
        ops += [("queue", lambda c, b=body: c.post("/api/v1/queues", json=b))] * 2
    for n in range(JOBS):
        body = {"command": ["true"], "name": f"job{n}"}
        ops.append(("job", lambda c, b=body: c.post("/api/v1/jobs", json=b)))
    for n in range(TOKENS):
        ops.append(("token", lambda c, n=n: c.post("/api/v1/tokens", json={"name": f"t{n}"})))
    for n in range(UPLOADS):
        csv = f"x,y\n{n},{n * 2}\n".encode()
        ops.append((
            "upload",
            lambda c, b=csv: c.post(
                "/api/v1/datasets/numbers/versions", params={"filename": "n.csv"}, content=b
            ),
        ))  # fmt: skip
    for n in range(ALIASES):
        ref = f"greet@v{n % 3 + 1}"
        ops.append(("alias", lambda c, r=ref: c.post(f"/api/v1/prompts/{r}/alias",
                                                     json={"alias": "production"})))  # fmt: skip
    return ops


def test_two_servers_on_one_database_neither_lose_nor_double_an_operation(
    two_servers: tuple[Workspace, list[str], str],
) -> None:
    workspace, urls, token = two_servers
    headers = {"Authorization": f"Bearer {token}"}
    clients = [httpx.Client(base_url=url, headers=headers, timeout=120) for url in urls]
    ops = _operations(urls)

    def run(
        indexed: tuple[int, tuple[str, Callable[[httpx.Client], httpx.Response]]],
    ) -> tuple[str, int]:
        index, (kind, call) = indexed
        return kind, call(clients[index % 2]).status_code

    try:
        with ThreadPoolExecutor(8) as pool:
            answers = Counter(pool.map(run, enumerate(ops)))
        verified = clients[1].get("/api/v1/audit/verify")
    finally:
        for client in clients:
            client.close()

    assert answers == Counter({
        ("queue", 201): QUEUES, ("queue", 409): QUEUES, ("job", 201): JOBS,
        ("token", 201): TOKENS, ("upload", 201): UPLOADS, ("alias", 200): ALIASES,
    })  # fmt: skip
    assert verified.status_code == 200, verified.text
    with workspace.store.read_session() as session:
        queues = session.scalars(select(QueueRecord.name).where(QueueRecord.name != "default"))
        assert sorted(queues) == sorted(f"q{n}" for n in range(QUEUES))
        assert session.scalar(select(func.count()).select_from(JobRecord)) == JOBS
        assert session.scalar(select(func.count()).select_from(TokenRecord)) == TOKENS + 1
        versions = session.scalars(select(DatasetVersion.version)).all()
        assert sorted(versions) == list(range(1, UPLOADS + 1))
        actions = Counter(session.scalars(select(AuditEvent.action)))
        events = session.scalar(select(func.count()).select_from(AuditEvent))
    # both servers' schedulers dispatch: each job runs once, to its end
    wait_until(lambda: _finished(workspace) == JOBS, 120, "every job to succeed")
    with workspace.store.read_session() as session:
        attempts = Counter(session.scalars(select(JobAttemptRecord.job_id)))
    assert len(attempts) == JOBS and set(attempts.values()) == {1}
    assert actions["queue.create"] == QUEUES
    assert actions["job.submit"] == JOBS
    assert actions["token.create"] == TOKENS + 1
    assert verified.json()["events"] == events


def _finished(workspace: Workspace) -> int:
    with workspace.store.read_session() as session:
        query = select(func.count()).select_from(JobRecord).where(JobRecord.state == "SUCCEEDED")
        return int(session.scalar(query) or 0)


def test_two_servers_share_the_signing_keys_without_a_file_copied_between_homes(
    two_servers: tuple[Workspace, list[str], str],
) -> None:
    workspace, urls, _ = two_servers
    login = {"name": "ops", "password": PASSWORD}
    with httpx.Client(base_url=urls[0], timeout=60) as first:
        signed_in = first.post("/api/v1/auth/login", json=login)
        assert signed_in.status_code == 200, signed_in.text
        first_verified = first.get("/api/v1/audit/verify")  # the cookie the client kept
    with httpx.Client(base_url=urls[1], timeout=60) as second:
        second.cookies.set(SESSION_COOKIE, signed_in.cookies[SESSION_COOKIE])
        me = second.get("/api/v1/auth/me")
        second_verified = second.get("/api/v1/audit/verify")

    assert me.status_code == 200 and me.json()["name"] == "ops", me.text
    assert first_verified.status_code == second_verified.status_code == 200, (
        first_verified.text, second_verified.text,
    )  # fmt: skip
    assert second_verified.json()["events"] >= first_verified.json()["events"] > 0
    for home in (workspace.settings.home, workspace.settings.home.parent / "home-1"):
        assert not (home / KEY_FILE).exists()
