"""The gateway app: forwarded requests reach the forward lane before any of FastAPI's layers."""

from __future__ import annotations

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from forgeml.core.workspace import Workspace
from forgeml.gateway import create_app, create_key
from tests._wait import wait_until
from tests.gateway.conftest import TEST_OPTIONS, ServerThread, Upstream, add_deployment


class _Recorder:
    """ASGI middleware noting the path of every HTTP request that passes through it."""

    def __init__(self, app: ASGIApp, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append(scope["path"])
        await self.app(scope, receive, send)


def test_forwarded_requests_skip_fastapis_middleware(gateway_home: Workspace) -> None:
    seen: list[str] = []
    app = create_app(gateway_home, TEST_OPTIONS)
    app.add_middleware(_Recorder, seen=seen)
    replica = Upstream("outside")
    replica.server = ServerThread(replica.app())
    gateway = ServerThread(app)
    try:
        add_deployment(gateway_home, "outside", [replica.url])
        wait_until(lambda: "outside" in app.state.gateway.routes, what="the deployment's load")
        _, key = create_key(gateway_home, "app-test", ["outside"])
        with httpx.Client(base_url=gateway.url, timeout=10) as client:
            answer = client.post(
                "/v1/models/outside:predict",
                json={"instances": [1]},
                headers={"Authorization": f"Bearer {key}"},
            )
            health = client.get("/healthz")
    finally:
        gateway.stop()
        replica.server.stop()
    assert answer.status_code == 200 and answer.json()["replica"] == "outside"
    assert health.status_code == 200
    assert seen == ["/healthz"]  # the predict call never entered FastAPI's stack
