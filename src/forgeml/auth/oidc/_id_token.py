"""Verifying an ID token as OpenID Connect Core 1.0 §3.1.3.7 asks."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from forgeml.auth.oidc._config import OidcConfig
from forgeml.auth.oidc._errors import IdTokenError, IssuerError
from forgeml.auth.oidc._provider import ProviderMetadata

# asymmetric only: an HS* token is signed with the client secret, which forgeml also holds
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_SIGNING_ALGS = frozenset((*_RSA, "ES256", "ES384", "ES512", "EdDSA", "Ed25519"))


def verify_id_token(
    config: OidcConfig,
    metadata: ProviderMetadata,
    jwks: Any,
    id_token: Any,
    *,
    nonce: str,
    access_token: str | None,
    now: float,
) -> dict[str, Any]:
    """The claims of `id_token` once OpenID Connect Core 1.0 §3.1.3.7's checks pass.

    Raises:
        IdTokenError: no token, a refused algorithm (`none`, HS*), a signature the JWKS does
            not verify, or a wrong issuer, audience, `azp`, nonce, `at_hash` or time.
        IssuerError: the provider announces no accepted algorithm, or its JWKS is invalid.
    """
    from authlib.oidc.core import CodeIDToken
    from joserfc import jwt
    from joserfc.errors import ClaimError, ExpiredTokenError, JoseError, MissingClaimError
    from joserfc.jwk import KeySet

    if not isinstance(id_token, str) or not id_token:
        raise IdTokenError("The token endpoint returned no ID token.")
    algorithms = [a for a in metadata.id_token_signing_alg_values_supported if a in _SIGNING_ALGS]
    if not algorithms:
        raise IssuerError(
            "The identity provider signs ID tokens with no algorithm forgeml accepts."
        )
    algorithm = _header_algorithm(id_token)
    if algorithm not in algorithms:
        raise IdTokenError(
            f"The ID token is signed with {algorithm!r}; forgeml accepts "
            f"{', '.join(algorithms)} from this provider, never 'none' or a shared secret."
        )
    try:
        keys = KeySet.import_key_set(jwks)
    except (JoseError, ValueError, TypeError, KeyError):
        raise IssuerError(
            f"The identity provider's JWKS at {metadata.jwks_uri} is invalid."
        ) from None
    try:
        token = jwt.decode(id_token, keys, algorithms=algorithms)
    except JoseError:
        raise IdTokenError(
            "The ID token's signature does not verify against the provider's published keys."
        ) from None
    claims = CodeIDToken(
        token.claims,
        token.header,
        {"iss": {"essential": True, "value": config.issuer}},
        {"nonce": nonce, "client_id": config.client_id, "access_token": access_token},
    )
    try:
        _check_audience(claims, config.client_id)  # before `azp`'s check, which assumes ours
        claims.validate(now=int(now), leeway=config.clock_skew_s)
    except ExpiredTokenError:
        raise IdTokenError(
            f"The ID token expired at {claims.get('exp')} (now {int(now)})."
        ) from None
    except MissingClaimError as error:
        raise IdTokenError(f"The ID token lacks the {error.claim!r} claim.") from None
    except ClaimError as error:
        raise IdTokenError(_claim_problem(error.claim, claims, config)) from None
    return dict(claims)


def _check_audience(claims: Mapping[str, Any], client_id: str) -> None:
    from joserfc.errors import InvalidClaimError, MissingClaimError

    audience = claims.get("aud")
    if audience is None:
        raise MissingClaimError("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    if not isinstance(audiences, list) or client_id not in audiences:
        raise InvalidClaimError("aud")


def _claim_problem(claim: str, claims: Mapping[str, Any], config: OidcConfig) -> str:
    if claim == "aud":
        return (
            f"The ID token was issued to {claims.get('aud')!r}, not to forgeml's client "
            f"{config.client_id!r} (a token for another audience)."
        )
    if claim == "iss":
        return f"The ID token was issued by {claims.get('iss')!r}, not by {config.issuer!r}."
    if claim == "nonce":
        return "The ID token's nonce is not this sign-in's (a replayed or injected token)."
    if claim in ("iat", "nbf"):
        return f"The ID token's {claim} lies in the future; check the clocks."
    return f"The ID token's {claim!r} claim is invalid."


def _header_algorithm(id_token: str) -> str:
    segment = id_token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        raise IdTokenError("The ID token is not a JWT (its header does not decode).") from None
    algorithm = header.get("alg") if isinstance(header, dict) else None
    if not isinstance(algorithm, str):
        raise IdTokenError("The ID token's header names no algorithm.")
    return algorithm
