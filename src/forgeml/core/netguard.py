"""The one SSRF guard: every URL a forgeml server fetches passes `check_url` first.

A server that fetches a URL a user gave it (a webhook, a tool call, an identity provider)
can be turned on the cloud metadata service (169.254.169.254), the machine's own admin
ports or the private network (TorchServe CVE-2023-43654, MLflow's webhook URL checks).
The rules, each hop of a request again:

- the scheme is one the caller allows (http and https by default), no credentials in it;
- the host is on the caller's allow-list, when it has one;
- a host written as an address is read the way the C resolver reads it, so
  `http://2130706433/`, `http://0x7f.1/` and `http://0177.0.0.1/` are 127.0.0.1, and an
  IPv6 address that carries an IPv4 one (`::ffff:127.0.0.1`, NAT64, 6to4) is judged by it;
- every address the host resolves to is public (`ipaddress`'s `is_global`), unless
  `allow_private` is set or it lies in one of `allow_networks`;
- the connection goes to the address checked (`guarded_transport` pins it; the Host header
  and TLS SNI carry the name), so a resolver that answers public, then private, cannot
  swap in the private one (DNS rebinding); the environment's proxies are not used.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from forgeml.core.errors import UnsafeUrlError

__all__ = [
    "Resolver",
    "UrlPolicy",
    "check_url",
    "guarded_client",
    "guarded_transport",
    "host_address",
    "is_public",
    "pin",
    "resolve",
]

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class UrlPolicy:
    """What one caller may fetch; `who` names it in refusals ("http_get", "The webhook hook")."""

    who: str = "forgeml"
    schemes: tuple[str, ...] = ("http", "https")
    allow_hosts: tuple[str, ...] | None = None
    allow_private: bool = False
    allow_networks: tuple[str, ...] = ()


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        raise UnsafeUrlError(f"The host {host} does not resolve.") from None
    return [str(info[4][0]) for info in infos]


def host_address(host: str) -> str | None:
    """The address `host` spells, read as the C resolver reads it, or None for a name.

    `inet_aton` accepts the decimal (2130706433), octal (0177.0.0.1), hexadecimal
    (0x7f.1) and short (127.1) forms that `ipaddress` refuses but a socket connects to.
    """
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(address: str) -> bool:
    """Whether `address`, and any IPv4 address it carries, is globally routable."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None and not inner.is_global:
            return False
    return ip.is_global


def _host_allowed(host: str, allow: tuple[str, ...]) -> bool:
    for pattern in (entry.lower().rstrip(".") for entry in allow):
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
        if host == pattern:
            return True
    return False


def _in_networks(address: str, networks: tuple[str, ...]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return any(ip in ipaddress.ip_network(network, strict=False) for network in networks)


def check_url(url: str, policy: UrlPolicy, resolver: Resolver = resolve) -> str:
    """The address to connect to for `url`, once every rule of the module doc has passed.

    Raises:
        UnsafeUrlError: a scheme the policy does not allow, credentials in the URL, a host
            off the allow-list, a host that does not resolve, or a non-public address.
    """
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UnsafeUrlError(f"The URL {url!r} does not parse.") from None
    if parts.scheme not in policy.schemes:
        schemes = " and ".join(policy.schemes)
        raise UnsafeUrlError(f"{policy.who} fetches {schemes} URLs only, not {url!r}.")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host or parts.username is not None:
        raise UnsafeUrlError(f"The URL {url!r} has no host, or carries credentials.")
    if policy.allow_hosts is not None and not _host_allowed(host, policy.allow_hosts):
        raise UnsafeUrlError(f"The host {host} is not on {policy.who}'s allow-list.")
    literal = host_address(host)
    addresses = [literal] if literal is not None else resolver(host, port)
    if not addresses:
        raise UnsafeUrlError(f"The host {host} does not resolve.")
    for address in addresses:
        if policy.allow_private or _in_networks(address, policy.allow_networks):
            continue
        if not is_public(address):
            raise UnsafeUrlError(
                f"The host {host} resolves to the non-public address {address}; "
                f"{policy.who} reaches public addresses only."
            )
    return addresses[0]


def pin(url: str, address: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """`url` with its host replaced by `address`, and the Host header and TLS extensions
    that keep the name: (pinned URL, headers, httpx request extensions)."""
    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in address else address
    suffix = f":{parts.port}" if parts.port else ""
    pinned = urlunsplit(parts._replace(netloc=literal + suffix))
    name = parts.hostname or ""
    extensions: dict[str, Any] = {"sni_hostname": name} if parts.scheme == "https" else {}
    return pinned, {"Host": name + suffix}, extensions


def _transport_class() -> type:
    import httpx

    class _Guarded(httpx.HTTPTransport):
        def __init__(self, policy: UrlPolicy, resolver: Resolver, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.policy, self.resolver = policy, resolver

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            address = check_url(str(request.url), self.policy, self.resolver)
            pinned_url, _, extensions = pin(str(request.url), address)
            # a copy: the client joins a redirect's Location to the URL it asked for
            pinned = httpx.Request(
                request.method,
                pinned_url,
                headers=request.headers,  # Host: the name, set when the request was built
                stream=request.stream,
                extensions={**request.extensions, **extensions},
            )
            return super().handle_request(pinned)

    return _Guarded


def guarded_transport(policy: UrlPolicy, resolver: Resolver = resolve, **kwargs: Any) -> Any:
    """An httpx transport that checks every request (each redirect hop too) and pins it."""
    return _transport_class()(policy, resolver, **kwargs)


def guarded_client(
    policy: UrlPolicy,
    resolver: Resolver = resolve,
    *,
    timeout: float = 10.0,
    max_redirects: int = 0,
) -> Any:
    """An `httpx.Client` whose every request passes `check_url` and goes to the address
    checked; it follows at most `max_redirects` redirects, each checked again, and ignores
    the environment's proxies (a proxy would connect by name, bypassing the pin)."""
    import httpx

    return httpx.Client(
        transport=guarded_transport(policy, resolver),
        timeout=timeout,
        follow_redirects=max_redirects > 0,
        max_redirects=max_redirects,
        trust_env=False,
    )
