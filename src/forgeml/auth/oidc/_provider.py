"""Talking to the identity provider: discovery, and every request checked against SSRF.

Every URL the server fetches (discovery, JWKS, token) must lie on the issuer's origin or on
one `extra_origins` names, and every address its host resolves to must be public unless
`allow_private_network` is set (`forgeml.core.netguard`'s rules: decimal, octal and
IPv4-in-IPv6 spellings read as the address they are); the connection goes to the address
checked, so a second DNS answer cannot swap in another, and redirects are not followed.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from forgeml.auth.oidc._config import OidcConfig
from forgeml.auth.oidc._errors import IssuerError
from forgeml.core.configfile import describe_validation_error
from forgeml.core.errors import UnsafeUrlError
from forgeml.core.netguard import Resolver, UrlPolicy, check_url, resolve

# a discovery document or a JWKS is a few kB; a provider sending more is broken or hostile
MAX_DOCUMENT_BYTES = 1_000_000


class ProviderMetadata(BaseModel):
    """The fields of a discovery document forgeml uses (OpenID Connect Discovery 1.0 §3)."""

    model_config = ConfigDict(extra="ignore")

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    id_token_signing_alg_values_supported: list[str] = ["RS256"]
    code_challenge_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").rstrip(".").lower(), port


def check_provider_url(url: str, config: OidcConfig, resolver: Resolver = resolve) -> str:
    """The address to connect to for `url`, once it passes the SSRF rules of the module doc.

    Raises:
        IssuerError: not on an allowed origin, http without `allow_private_network`,
            credentials in the URL, or a non-public address without `allow_private_network`.
    """
    parts = urlsplit(url)
    try:
        scheme, host, port = _origin(url)
        allowed = {_origin(config.issuer), *(_origin(origin) for origin in config.extra_origins)}
    except ValueError:  # a port out of range
        raise IssuerError(f"The URL {url!r} has an invalid port.") from None
    if parts.username is not None or (scheme, host, port) not in allowed:
        raise IssuerError(
            f"forgeml fetches only from the issuer's origin (or extra_origins), not {url!r}."
        )
    if scheme != "https" and not config.allow_private_network:
        raise IssuerError(f"The identity provider must be reached over https, not {url!r}.")
    policy = UrlPolicy(who="forgeml's OIDC client", allow_private=config.allow_private_network)
    try:
        return check_url(url, policy, resolver)
    except UnsafeUrlError as error:
        hint = "" if config.allow_private_network else " (allow_private_network lifts this)"
        raise IssuerError(f"{str(error).rstrip('.')}{hint}.") from None


def provider_client(config: OidcConfig, resolver: Resolver) -> Any:
    """authlib's OAuth2 client, every request of it checked and pinned by `_PinnedTransport`."""
    import httpx2
    from authlib.integrations.httpx_client import OAuth2Client

    class _PinnedTransport(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            address = check_provider_url(str(request.url), config, resolver)
            # the Host header keeps the name; TLS checks the certificate against it (SNI)
            request.extensions = {**request.extensions, "sni_hostname": request.url.host}
            request.url = request.url.copy_with(host=address)
            return super().handle_request(request)

    secret = config.client_secret()
    return OAuth2Client(
        client_id=config.client_id,
        client_secret=secret,
        token_endpoint_auth_method="client_secret_basic" if secret else "none",
        scope=" ".join(config.scopes),
        redirect_uri=config.redirect_uri,
        code_challenge_method="S256",
        transport=_PinnedTransport(trust_env=False),
        trust_env=False,  # a proxy from the environment would bypass the pinning
        follow_redirects=False,
        timeout=config.timeout_s,
    )


def get_json(client: Any, url: str, what: str) -> Any:
    """GET `url` through `client` and parse it: 200 and JSON, at most `MAX_DOCUMENT_BYTES`."""
    import httpx2

    body = bytearray()
    try:
        with client.stream("GET", url, withhold_token=True) as response:
            if response.status_code != 200:
                raise IssuerError(
                    f"The identity provider's {what} ({url}) answered "
                    f"{response.status_code}, not 200."
                )
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise IssuerError(
                        f"The identity provider's {what} ({url}) is over "
                        f"{MAX_DOCUMENT_BYTES} bytes."
                    )
    except httpx2.HTTPError as error:
        raise IssuerError(f"The identity provider's {what} ({url}) failed: {error}.") from None
    try:
        return json.loads(body)
    except ValueError:
        raise IssuerError(f"The identity provider's {what} ({url}) is not JSON.") from None


def discover(config: OidcConfig, client: Any) -> ProviderMetadata:
    """The provider's discovery document, checked to name `config.issuer` and offer S256."""
    url = config.issuer.rstrip("/") + "/.well-known/openid-configuration"
    data = get_json(client, url, "discovery document")
    try:
        metadata = ProviderMetadata.model_validate(data)
    except ValidationError as error:
        raise IssuerError(describe_validation_error(error, url)) from None
    if metadata.issuer != config.issuer:
        # OpenID Connect Discovery 1.0 §4.3: it must be the issuer the URL was built from
        raise IssuerError(f"{url} names the issuer {metadata.issuer!r}, not {config.issuer!r}.")
    methods = metadata.code_challenge_methods_supported
    if methods is not None and "S256" not in methods:
        raise IssuerError(f"The identity provider at {config.issuer} does not offer PKCE S256.")
    return metadata
