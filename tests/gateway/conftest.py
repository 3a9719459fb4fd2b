from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from forgeml.core.config import Settings
from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway import GatewayOptions, create_app, create_key
from forgeml.serve.transport import CoalescingHttpProtocol
from tests._wait import FakeClock, wait_until

# short intervals so refresh and flush show up within a test; the key cache TTL and the
# breaker's cool-down run on the gateway's fake clock (`GatewayUnderTest.clock`)
TEST_OPTIONS = GatewayOptions(
    request_timeout_s=1.0,
    connect_timeout_s=0.5,
    breaker_failures=2,
    breaker_cooldown_s=2.0,
    max_body_bytes=4096,
    refresh_s=0.3,
    key_cache_ttl_s=0.3,
    usage_flush_s=0.3,
    seed=7,
)


class ServerThread:
    """A real uvicorn server on a loopback port, in a thread."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", http=CoalescingHttpProtocol
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})
        self.thread.start()
        wait_until(
            lambda: self.server.started or not self.thread.is_alive(), what="the server start"
        )
        if not self.server.started:
            raise RuntimeError("test server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@dataclass
class Upstream:
    """A stand-in replica that says who answered; it can be told to fail or hang."""

    name: str
    mode: str = "ok"  # ok | fail | hang
    hang_s: float = 3.0  # a hang ends after this long, or when `released` is set
    hits: list[dict[str, Any]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    server: ServerThread | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{path:path}", methods=["GET", "POST"])
        async def anything(request: Request, path: str) -> Response:
            body = await request.body()
            self.hits.append({"path": "/" + path, "headers": dict(request.headers), "body": body})
            if self.mode == "fail":
                return JSONResponse({"error": f"{self.name} is failing"}, status_code=503)
            if self.mode == "hang":
                await asyncio.to_thread(self.released.wait, self.hang_s)
            if path.endswith("chat/completions") and b'"stream": true' in body:
                return StreamingResponse(_events(self.name), media_type="text/event-stream")
            return JSONResponse(
                {"replica": self.name, "path": "/" + path, "query": request.url.query}
            )

        return app


async def _events(name: str) -> Any:
    for part in ("a", "b", "c"):
        yield f'data: {{"replica": "{name}", "part": "{part}"}}\n\n'
        await asyncio.sleep(0)
    yield "data: [DONE]\n\n"


def dead_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def add_deployment(
    workspace: Workspace,
    name: str,
    primary: list[str],
    canary: list[str] | None = None,
    shadow: list[str] | None = None,
    weight: float = 0,
    project: str = "default",
) -> None:
    """Record a deployment and its ready replicas the way the control plane does."""
    spec = {
        "model": f"{name}-model@v1", "model_ref": f"{name}-model", "replicas": len(primary),
        "canary": {"model": f"{name}-model@v2", "weight": weight, "replicas": len(canary)}
        if canary else None,
        "shadow": {"model": f"{name}-model@v3"} if shadow else None,
        "runtime": "torch", "max_batch_size": 8, "max_wait_ms": 2.0,
    }  # fmt: skip
    with workspace.store.session() as session:
        record = DeploymentRecord(
            id=new_id(), name=name, project=project, status="ready", spec=spec, revision=1,
            created_by="tester",
        )  # fmt: skip
        session.add(record)
        roles = [("primary", primary), ("canary", canary or []), ("shadow", shadow or [])]
        for role, urls in roles:
            for url in urls:
                host, port = url.removeprefix("http://").split(":")
                session.add(
                    DeploymentReplicaRecord(
                        id=new_id(),
                        deployment_id=record.id,
                        role=role,
                        model_ref=spec["model"],
                        host=host,
                        port=int(port),
                        status="ready",
                    )
                )


@dataclass
class GatewayUnderTest:
    workspace: Workspace
    server: ServerThread
    app: Any
    client: httpx.Client
    upstream: Callable[[str], Upstream]
    clock: FakeClock

    def deploy(self, name: str, primary: list[str], **roles: Any) -> None:
        """Record a deployment and wait until the gateway's route table has it."""
        add_deployment(self.workspace, name, primary, **roles)
        wait_until(lambda: name in self.app.state.gateway.routes, what=f"loading {name}")

    def key(self, scopes: list[str] | None = None, project: str = "default", **limits: Any) -> str:
        _, secret = create_key(self.workspace.in_project(project), "test", scopes, **limits)
        return secret

    def post(self, path: str, key: str | None, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return self.client.post(path, headers=headers, **kwargs)


@pytest.fixture(scope="module")
def gateway_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path_factory.mktemp("gw") / "home", user="tester"))
    yield workspace
    workspace.close()


def start_gateway(
    workspace: Workspace, options: GatewayOptions, fast_lane: bool = True
) -> Iterator[GatewayUnderTest]:
    """A real gateway over `workspace`; `upstream(name)` starts a replica on loopback.

    Its key cache, rate limits and breakers run on `clock`, which the test advances.
    """
    started: list[ServerThread] = []

    def upstream(name: str) -> Upstream:
        replica = Upstream(name)
        replica.server = ServerThread(replica.app())
        started.append(replica.server)
        return replica

    clock = FakeClock()
    app = create_app(workspace, options, fast_lane=fast_lane, clock=clock)
    server = ServerThread(app)
    client = httpx.Client(base_url=server.url, timeout=10)
    try:
        yield GatewayUnderTest(workspace, server, app, client, upstream, clock)
    finally:
        client.close()
        server.stop()
        for replica in started:  # ask every replica first, then wait: they stop together
            replica.server.should_exit = True
        for replica in started:
            replica.stop()


@pytest.fixture(scope="module")
def gw(gateway_home: Workspace) -> Iterator[GatewayUnderTest]:
    """A gateway with short intervals (`TEST_OPTIONS`)."""
    yield from start_gateway(gateway_home, TEST_OPTIONS)


@pytest.fixture(scope="module")
def steady_gw(gateway_home: Workspace) -> Iterator[GatewayUnderTest]:
    """A gateway that trusts a verified key for a minute and waits for slow replicas (for
    traffic-volume tests: on a loaded 2-core machine a replica can take over a second, and
    the 1 s `TEST_OPTIONS` timeout turned that into a 504)."""
    steady = {"key_cache_ttl_s": 60.0, "usage_flush_s": 60.0, "request_timeout_s": 30.0}
    yield from start_gateway(gateway_home, TEST_OPTIONS.model_copy(update=steady))
