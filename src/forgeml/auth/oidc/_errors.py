"""The errors of an OIDC sign-in: refusals answer 401, a broken provider 502."""

from __future__ import annotations

from forgeml.core.errors import AuthenticationError, ForgemlError


class OidcError(AuthenticationError):
    """A sign-in through the identity provider was refused (401)."""


class OidcStateError(OidcError):
    """The callback does not belong to the sign-in this browser started, or came too late."""


class OidcCodeError(OidcError):
    """The provider refused the sign-in or the authorization code (a replayed code, say)."""


class IdTokenError(OidcError):
    """The ID token does not verify: signature, algorithm, issuer, audience, nonce or expiry."""


class IssuerError(ForgemlError):
    """The identity provider cannot be reached, answers wrongly, or names a refused URL."""

    http_status = 502
