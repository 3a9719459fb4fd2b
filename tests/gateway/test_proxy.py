from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from forgeml.core.errors import (
    BadGatewayError,
    ForgemlError,
    ServiceUnavailableError,
    UpstreamTimeoutError,
)
from forgeml.gateway import GatewayOptions
from forgeml.gateway._proxy import Forwarded, Outgoing, Upstreams

REQUEST = Outgoing("POST", "/v2/models/d/infer", [], b"{}")


class _Body(httpx.AsyncByteStream):
    """A streamed body that fails with `error` (if any) after its first chunk."""

    def __init__(self, chunk: bytes, error: Exception | None = None) -> None:
        self._chunk, self._error = chunk, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._chunk
        if self._error is not None:
            raise self._error


def _forward(
    handler: Callable[[httpx.Request], httpx.Response],
) -> tuple[Upstreams, Forwarded | ForgemlError]:
    """Forward `REQUEST` to replicas a then b, answered by `handler`."""

    async def run() -> tuple[Upstreams, Forwarded | ForgemlError]:
        upstreams = Upstreams(GatewayOptions(breaker_failures=1))
        await upstreams._client.aclose()
        upstreams._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        try:
            return upstreams, await upstreams.forward("d", ["http://a", "http://b"], REQUEST)
        except ForgemlError as error:
            return upstreams, error
        finally:
            await upstreams.close()

    return asyncio.run(run())


def _raise(error: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    return handler


@pytest.mark.parametrize(
    ("handler", "expected", "status"),
    [
        (_raise(httpx.ReadTimeout("slow")), UpstreamTimeoutError, 504),
        (_raise(httpx.RemoteProtocolError("garbled")), BadGatewayError, 502),
        (lambda _: httpx.Response(200, stream=_Body(b"{", httpx.ReadTimeout("slow"))),
         UpstreamTimeoutError, 504),
        (lambda _: httpx.Response(200, stream=_Body(b"{", httpx.ReadError("reset"))),
         BadGatewayError, 502),
    ],
)  # fmt: skip
def test_failure_after_sending_is_not_retried_and_opens_the_breaker(
    handler: Callable[[httpx.Request], httpx.Response], expected: type, status: int
) -> None:
    upstreams, outcome = _forward(handler)
    assert isinstance(outcome, expected) and outcome.http_status == status
    assert "Replica http://a" in str(outcome)
    assert upstreams.breakers["http://a"].state == "open"
    assert "http://b" not in upstreams.breakers  # the model may have run it: no retry


def test_connect_failure_is_retried_on_the_next_replica() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "a":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, stream=_Body(b"ok"))

    upstreams, outcome = _forward(handler)
    assert isinstance(outcome, Forwarded)
    assert (outcome.replica, outcome.status, outcome.body) == ("http://b", 200, b"ok")
    assert upstreams.breakers["http://a"].state == "open"


def test_every_replica_refusing_is_a_503() -> None:
    _, outcome = _forward(_raise(httpx.ConnectError("refused")))
    assert isinstance(outcome, ServiceUnavailableError) and "tried (2)" in str(outcome)
