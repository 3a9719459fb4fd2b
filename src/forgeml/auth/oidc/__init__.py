"""OIDC sign-in for people: the authorization code flow with PKCE, through authlib's client.

`start_login(config)` discovers the provider, draws a state, a nonce and a PKCE S256
verifier (RFC 7636) and returns the provider's authorization URL with the `LoginState` the
caller keeps until the callback. `finish_login(config, state, query)` checks the callback
against that state (and the RFC 9207 `iss` parameter, against mix-up), exchanges the code at
the token endpoint with the verifier, and verifies the ID token (`verify_id_token`): its
signature against the provider's JWKS with an asymmetric algorithm the provider announces
(never `none`, never a shared-secret HS*), then issuer, audience (and `azp`), nonce and
expiry, against an injected clock. The `Identity` it returns carries the provider's groups
and, through `group_roles`, a role per project. Each refusal is an `OidcError` (401); a
provider that cannot be reached or answers wrongly is an `IssuerError` (502). Every request
to the provider passes `check_provider_url`, the SSRF guard (`_provider`).
"""

from forgeml.auth.oidc._config import ROLES, OidcConfig, Role, load_oidc_config, roles_for_groups
from forgeml.auth.oidc._errors import (
    IdTokenError,
    IssuerError,
    OidcCodeError,
    OidcError,
    OidcStateError,
)
from forgeml.auth.oidc._id_token import verify_id_token
from forgeml.auth.oidc._login import Clock, Identity, LoginState, finish_login, start_login
from forgeml.auth.oidc._provider import (
    ProviderMetadata,
    Resolver,
    check_provider_url,
    discover,
    resolve,
)

__all__ = [
    "ROLES",
    "Clock",
    "IdTokenError",
    "Identity",
    "IssuerError",
    "LoginState",
    "OidcCodeError",
    "OidcConfig",
    "OidcError",
    "OidcStateError",
    "ProviderMetadata",
    "Resolver",
    "Role",
    "check_provider_url",
    "discover",
    "finish_login",
    "load_oidc_config",
    "resolve",
    "roles_for_groups",
    "start_login",
    "verify_id_token",
]
