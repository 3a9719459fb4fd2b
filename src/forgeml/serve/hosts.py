"""The names and origins a forgeml server answers to (Ray CVE-2025-62593: DNS rebinding).

The control plane (`forgeml server --api-port`), the model server (`forgeml serve`) and the
gateway (`forgeml gateway`) each put `HostGuard` in front of everything they serve (fast
lanes included), each with `--allowed-host` for the other names it is reached by.

A page on another site can point its own name at the server's address (DNS rebinding): the
visitor's browser then sends it requests as if to that site, the page may read the answers,
and each request carries the attacker's name in `Host`. So a request whose `Host` is not one
of the server's own names is refused (400) before any route runs. A change (POST, PUT,
PATCH, DELETE) sent by a page of another origin is refused as well (403): a browser names
the page's origin in `Origin`, while clients that are no browser (the CLI, the SDK) send
none. Every answer carries `X-Content-Type-Options: nosniff`, so no browser renders JSON
that echoes a name as HTML (MLflow CVE-2024-27132, CVE-2024-27133).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from forgeml.auth import client_scheme
from forgeml.core.errors import UsageError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
NOSNIFF = {"X-Content-Type-Options": "nosniff"}
_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(value: str) -> str | None:
    """The host of `value` (`name`, `name:port`, `1.2.3.4`, `::1`, `[::1]:8080`), lower
    case, without brackets or a trailing dot; None when there is none."""
    value = value.strip()
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    try:
        name = urlsplit(f"//{value}").hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def _origin(value: str) -> tuple[str, str | None, int | None] | None:
    """(scheme, host, port with the scheme's default filled in) of an origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or parts.hostname is None:
        return None
    return parts.scheme, parts.hostname.rstrip("."), port or _DEFAULT_PORTS[parts.scheme]


class ServedHosts(BaseModel):
    """Where the control plane is served: the address it is bound to and the other names
    clients reach it by; the origins besides its own whose pages may change things."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bind: str = Field(default="127.0.0.1", description="The address the server listens on.")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="More names clients reach the server by (a DNS name, a proxy's); "
        "requests naming any other host are refused (DNS rebinding).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) of other sites whose pages may send "
        "changes; the server's own origin always may.",
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _plain_hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if host_name(host) is None or "/" in host:
                raise ValueError(f"{host!r} is not a host name or address (e.g. forgeml.example)")
        return hosts

    @field_validator("allowed_origins")
    @classmethod
    def _plain_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if _origin(origin) is None:
                raise ValueError(f"{origin!r} is not an origin (e.g. https://forgeml.example)")
        return origins

    def names(self) -> frozenset[str]:
        """The host names requests may carry: the bound address (a loopback one brings every
        loopback name; every interface, 0.0.0.0 or ::, brings them but is no name itself)
        and `allowed_hosts`."""
        names = {host_name(host) for host in self.allowed_hosts}
        bound = host_name(self.bind)
        try:
            address = ipaddress.ip_address(bound or "")
            loopback, anywhere = address.is_loopback, address.is_unspecified
        except ValueError:
            loopback, anywhere = bound == "localhost", False
        if loopback or anywhere:
            names |= LOOPBACK_NAMES
        if not anywhere:
            names.add(bound)
        return frozenset(name for name in names if name)

    def refusal(self, method: str, scheme: str, headers: Headers) -> tuple[int, str] | None:
        """Why a request is refused (status, sentence), or None when it is not."""
        host = headers.get("host", "")
        if host_name(host) not in self.names():
            return 400, (
                f"This server is not {host!r}: it answers to {', '.join(sorted(self.names()))} "
                "(serve with --allowed-host NAME to add a name it is reached by)."
            )
        origin = headers.get("origin")
        if method not in _CHANGES or origin is None:
            return None
        own = _origin(f"{scheme}://{host}")
        allowed = {own, *(_origin(other) for other in self.allowed_origins)}
        if _origin(origin) not in allowed:
            return 403, (
                f"A change must come from this server's own pages, not from {origin!r} "
                "(serve with --allowed-origin ORIGIN to trust another site)."
            )
        return None


class HostGuard:
    """ASGI middleware: refuses requests for other hosts and changes from other origins
    (see the module's docstring), and marks every answer `nosniff`.

    `trusted_proxies`: peers whose `X-Forwarded-Proto` names the scheme a client used.
    """

    def __init__(self, app: ASGIApp, hosts: ServedHosts, trusted_proxies: list[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.trusted_proxies = trusted_proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        peer = scope["client"][0] if scope.get("client") else None
        scheme = client_scheme(peer, scope["scheme"], headers, self.trusted_proxies)
        refused = self.hosts.refusal(scope["method"], scheme, headers)
        if refused is not None:
            status, sentence = refused
            answer = JSONResponse({"error": sentence}, status_code=status, headers=NOSNIFF)
            await answer(scope, receive, send)
            return

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(NOSNIFF)
            await send(message)

        await self.app(scope, receive, send_nosniff)


def served_hosts(bind: str, allowed_hosts: list[str]) -> ServedHosts:
    """The hosts of a server bound to `bind` and also reached by `allowed_hosts` (what
    `forgeml serve` and `forgeml gateway` take from `--host` and `--allowed-host`).

    Raises:
        UsageError: an allowed host that is no host name or address.
    """
    try:
        return ServedHosts(bind=bind, allowed_hosts=allowed_hosts)
    except ValidationError as error:
        message = str(error.errors()[0]["msg"]).removeprefix("Value error, ")
        raise UsageError(f"Invalid --allowed-host: {message}.") from None


def guarded(app: ASGIApp, hosts: ServedHosts) -> HostGuard:
    """`app` behind a `HostGuard` for `hosts`, outermost, so that fast lanes are guarded
    too (what `forgeml serve` and `forgeml gateway` hand uvicorn)."""
    return HostGuard(app, hosts, trusted_proxies=[])
