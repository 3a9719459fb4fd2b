"""The `http_get` tool: GET a page from an allow-list of hosts, with an SSRF guard.

A model that can fetch any URL can reach the cloud metadata service (169.254.169.254),
the machine's own admin ports or the private network, so every hop passes
`forgeml.core.netguard`'s rules: the scheme is http or https, the host is on the
allow-list, and every address the host resolves to is public unless `allow_private` is
set. The connection then goes to the checked address itself (Host header and TLS SNI
carry the name), so a second DNS answer cannot swap in another (DNS rebinding). Redirects
are followed one hop at a time, each checked again; the body is read up to `max_bytes`,
and the whole GET (every hop and the body) takes at most `timeout_s`, or the run's time
left if that is less.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urljoin

from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents.tools import Tool, ToolRefusedError, make_tool, tool_time_left
from forgeml.core import netguard
from forgeml.core.errors import UnsafeUrlError

__all__ = ["HttpGetOptions", "check_url", "http_get_tool"]

Resolver = netguard.Resolver
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
        return netguard.resolve(host, port)
    except UnsafeUrlError as error:
        raise ToolRefusedError(str(error)) from None


def _policy(options: HttpGetOptions) -> netguard.UrlPolicy:
    return netguard.UrlPolicy(
        who="http_get", allow_hosts=tuple(options.allow), allow_private=options.allow_private
    )


def check_url(url: str, options: HttpGetOptions, resolver: Resolver = resolve) -> str:
    """The address to connect to for `url`, once `forgeml.core.netguard`'s checks pass.

    Raises:
        ToolRefusedError: not http(s), credentials in the URL, a host off the allow-list,
            or a private, loopback or link-local address without `allow_private`.
    """
    try:
        return netguard.check_url(url, _policy(options), resolver)
    except UnsafeUrlError as error:
        raise ToolRefusedError(str(error)) from None


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
    with httpx.Client(timeout=limit_s, follow_redirects=False, trust_env=False) as client:
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

    pinned, headers, extensions = netguard.pin(url, address)
    # each read waits at most until the whole request's deadline
    extensions["timeout"] = _timeouts(deadline)
    request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
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
