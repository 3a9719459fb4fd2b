"""The `http_get` tool: GET a page from an allow-list of hosts, with an SSRF guard.

A model that can fetch any URL can reach the cloud metadata service (169.254.169.254),
the machine's own admin ports or the private network, so every hop is checked: the scheme
is http or https, the host is on the allow-list, and every address the host resolves to
is public (`ipaddress`'s `is_global`) unless `allow_private` is set. The connection then
goes to the checked address itself (Host header and TLS SNI carry the name), so a second
DNS answer cannot swap in another (DNS rebinding). Redirects are followed one hop at a
time, each checked again; the body is read up to `max_bytes`, and the whole GET (every hop
and the body) takes at most `timeout_s`, or the run's time left if that is less.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents.tools import Tool, ToolRefusedError, make_tool, tool_time_left

__all__ = ["HttpGetOptions", "check_url", "http_get_tool"]

Resolver = Callable[[str, int], list[str]]
_REDIRECTS = (301, 302, 303, 307, 308)


class HttpGetOptions(BaseModel):
    """Where `http_get` may go and how much it may read."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(
        min_length=1,
        description='Hosts it may fetch from: "example.com", "*.example.com" or an address.',
    )
    allow_private: bool = Field(
        default=False,
        description="Let it reach private, loopback and link-local addresses (off by default).",
    )
    max_bytes: int = Field(default=1_000_000, gt=0, description="Bytes of a body it reads.")
    timeout_s: float = Field(default=10.0, gt=0, description="Seconds one request may take.")
    max_redirects: int = Field(default=5, ge=0, description="Redirects it follows.")


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        raise ToolRefusedError(f"The host {host} does not resolve.") from None
    return [str(info[4][0]) for info in infos]


def _host_allowed(host: str, allow: list[str]) -> bool:
    for pattern in (entry.lower().rstrip(".") for entry in allow):
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
        if host == pattern:
            return True
    return False


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is loopback too
    return ip.is_global


def check_url(url: str, options: HttpGetOptions, resolver: Resolver = resolve) -> str:
    """The address to connect to for `url`, once every check has passed.

    Raises:
        ToolRefusedError: not http(s), credentials in the URL, a host off the allow-list,
            or a private, loopback or link-local address without `allow_private`.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolRefusedError(f"http_get fetches http and https URLs only, not {url!r}.")
    host = (parts.hostname or "").rstrip(".")
    if not host or parts.username is not None:
        raise ToolRefusedError(f"The URL {url!r} has no host, or carries credentials.")
    if not _host_allowed(host, options.allow):
        raise ToolRefusedError(f"The host {host} is not on http_get's allow-list.")
    addresses = resolver(host, parts.port or (443 if parts.scheme == "https" else 80))
    if not addresses:
        raise ToolRefusedError(f"The host {host} does not resolve.")
    if not options.allow_private:
        for address in addresses:
            if not _public(address):
                raise ToolRefusedError(
                    f"The host {host} resolves to the non-public address {address}; "
                    "http_get reaches public addresses only."
                )
    return addresses[0]


def fetch(url: str, options: HttpGetOptions, resolver: Resolver = resolve) -> dict[str, Any]:
    """GET `url` under `options`, each redirect hop checked as the first.

    Raises:
        ToolRefusedError: a hop fails `check_url`, too many redirects, the request fails,
            or it outlasts `timeout_s` (or the run's time left, when less).
    """
    import httpx

    left = tool_time_left()
    limit_s = options.timeout_s if left is None else max(min(options.timeout_s, left), 0.001)
    deadline = time.monotonic() + limit_s
    with httpx.Client(timeout=limit_s, follow_redirects=False) as client:
        for _ in range(options.max_redirects + 1):
            address = check_url(url, options, resolver)
            try:
                reply = _get_pinned(client, url, address, options.max_bytes, deadline)
            except httpx.TimeoutException:
                raise _too_slow(url, limit_s) from None
            except httpx.HTTPError as error:
                raise ToolRefusedError(f"GET {url} failed: {type(error).__name__}.") from None
            if reply["status"] in _REDIRECTS and reply.get("location"):
                url = urljoin(url, reply["location"])
                continue
            reply.pop("location", None)
            return reply
    raise ToolRefusedError(f"GET followed {options.max_redirects} redirects; stopped.")


def _too_slow(url: str, limit_s: float) -> ToolRefusedError:
    return ToolRefusedError(f"GET {url} did not finish within its {limit_s:.3g} s.")


def _get_pinned(
    client: Any, url: str, address: str, max_bytes: int, deadline: float
) -> dict[str, Any]:
    import httpx

    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in address else address
    netloc = literal + (f":{parts.port}" if parts.port else "")
    pinned = urlunsplit(parts._replace(netloc=netloc))
    host_header = parts.hostname + (f":{parts.port}" if parts.port else "")  # type: ignore[operator]
    extensions: dict[str, Any] = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    # each read waits at most until the whole request's deadline
    extensions["timeout"] = _timeouts(deadline)
    request = client.build_request(
        "GET", pinned, headers={"Host": host_header}, extensions=extensions
    )
    response = client.send(request, stream=True)
    try:
        body, truncated = bytearray(), False
        for chunk in response.iter_bytes():
            body.extend(chunk)
            if len(body) > max_bytes:
                truncated = True
                del body[max_bytes:]
                break
            if time.monotonic() > deadline:  # a body trickled in slower than the limit
                raise httpx.ReadTimeout("The body outlasted the request's time limit.")
        text = bytes(body).decode(response.encoding or "utf-8", errors="replace")
    finally:
        response.close()
    return {
        "url": url,
        "status": response.status_code,
        "content_type": response.headers.get("content-type", ""),
        "text": text,
        "truncated": truncated,
        "location": response.headers.get("location"),
    }


def _timeouts(deadline: float) -> dict[str, float]:
    left = max(deadline - time.monotonic(), 0.001)
    return {"connect": left, "read": left, "write": left, "pool": left}


def http_get_tool(
    options: HttpGetOptions, requires_approval: bool = False, resolver: Resolver = resolve
) -> Tool:
    """The `http_get` tool bound to `options`."""

    def http_get(url: str) -> dict[str, Any]:
        """Fetch a web page (GET) from an allowed host; returns its status and text.

        Args:
            url: The http or https URL to fetch.
        """
        return fetch(url, options, resolver)

    return make_tool(http_get, requires_approval=requires_approval)
