"""The authorization code flow with PKCE: start a sign-in, finish it from the callback."""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from forgeml.auth.oidc._config import OidcConfig, Role, roles_for_groups
from forgeml.auth.oidc._errors import IdTokenError, IssuerError, OidcCodeError, OidcStateError
from forgeml.auth.oidc._id_token import verify_id_token
from forgeml.auth.oidc._provider import (
    ProviderMetadata,
    Resolver,
    discover,
    get_json,
    provider_client,
    resolve,
)

Clock = Callable[[], float]


class LoginState(BaseModel):
    """What the caller keeps between `start_login` and the callback (never shown to others)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: str
    nonce: str
    code_verifier: str
    created_at: float


@dataclass(frozen=True)
class Identity:
    """A person the provider vouched for; `subject` is unique within `issuer`."""

    issuer: str
    subject: str
    email: str | None
    name: str | None
    groups: tuple[str, ...]
    roles_by_project: Mapping[str, Role]


def start_login(
    config: OidcConfig, *, clock: Clock = time.time, resolver: Resolver = resolve
) -> tuple[str, LoginState]:
    """The provider's authorization URL to send the browser to, and the state to keep.

    Raises:
        IssuerError: the provider cannot be discovered.
        ConfigError: the client secret's variable is unset.
    """
    login = LoginState(
        state=secrets.token_urlsafe(32),
        nonce=secrets.token_urlsafe(32),
        code_verifier=secrets.token_urlsafe(64),  # 86 characters: RFC 7636 §4.1 asks 43-128
        created_at=clock(),
    )
    with provider_client(config, resolver) as client:
        metadata = discover(config, client)
        url, _ = client.create_authorization_url(
            metadata.authorization_endpoint,
            state=login.state,
            code_verifier=login.code_verifier,
            nonce=login.nonce,
        )
    return str(url), login


def finish_login(
    config: OidcConfig,
    login: LoginState,
    query: Mapping[str, str],
    *,
    clock: Clock = time.time,
    resolver: Resolver = resolve,
) -> Identity:
    """The person the provider's callback `query` vouches for, every check passed.

    Raises:
        OidcStateError: the state is not this sign-in's, the sign-in is too old, or the
            callback names another issuer.
        OidcCodeError: the provider answered an error, or refused the code (a replayed one).
        IdTokenError: the ID token does not verify.
        IssuerError: the provider cannot be reached or answers wrongly.
    """
    now = clock()
    if now - login.created_at > config.login_ttl_s:
        raise OidcStateError(f"The sign-in took over {config.login_ttl_s} s; start it again.")
    if not hmac.compare_digest(query.get("state", "").encode(), login.state.encode()):
        raise OidcStateError(
            "The callback's state does not match the sign-in this browser started "
            "(a forged or crossed callback); start the sign-in again."
        )
    with provider_client(config, resolver) as client:
        metadata = discover(config, client)
        code = _callback_code(config, metadata, query)
        token = _exchange(client, metadata, code, login)
        jwks = get_json(client, metadata.jwks_uri, "JWKS")
    claims = verify_id_token(
        config,
        metadata,
        jwks,
        token.get("id_token"),
        nonce=login.nonce,
        access_token=token.get("access_token"),
        now=now,
    )
    return _identity(config, claims)


def _callback_code(config: OidcConfig, metadata: ProviderMetadata, query: Mapping[str, str]) -> str:
    issuer = query.get("iss")
    if issuer is None and metadata.authorization_response_iss_parameter_supported:
        raise OidcStateError("The callback lacks the issuer (iss) its provider always sends.")
    if issuer is not None and issuer != config.issuer:
        # RFC 9207: a response from another provider (mix-up attack)
        raise OidcStateError(f"The callback comes from {issuer!r}, not {config.issuer!r}.")
    if "error" in query:
        detail = query.get("error_description")
        raise OidcCodeError(
            f"The identity provider refused the sign-in ({query['error']})"
            + (f": {detail}." if detail else ".")
        )
    code = query.get("code")
    if not code:
        raise OidcCodeError("The callback carries no authorization code.")
    return code


def _exchange(
    client: Any, metadata: ProviderMetadata, code: str, login: LoginState
) -> dict[str, Any]:
    import httpx2
    from authlib.integrations.base_client import OAuthError

    try:
        token: dict[str, Any] = client.fetch_token(
            metadata.token_endpoint,
            grant_type="authorization_code",
            code=code,
            code_verifier=login.code_verifier,
        )
    except OAuthError as error:
        detail = f": {error.description}" if error.description else ""
        raise OidcCodeError(
            f"The identity provider refused the authorization code ({error.error}){detail}."
        ) from None
    except (httpx2.HTTPError, ValueError) as error:
        raise IssuerError(
            f"The token endpoint {metadata.token_endpoint} failed: {error}."
        ) from None
    return token


def _identity(config: OidcConfig, claims: Mapping[str, Any]) -> Identity:
    value: Any = claims
    for part in config.groups_claim.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    groups = [value] if isinstance(value, str) else [] if value is None else value
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise IdTokenError(
            f"The ID token's {config.groups_claim!r} claim is not a list of strings."
        )
    email = claims.get("email")
    verified = claims.get("email_verified", True) is not False  # absent at some providers
    name = claims.get("name")
    return Identity(
        issuer=config.issuer,
        subject=str(claims["sub"]),
        email=email if isinstance(email, str) and verified else None,
        name=name if isinstance(name, str) else None,
        groups=tuple(groups),
        roles_by_project=roles_for_groups(config.group_roles, groups),
    )
