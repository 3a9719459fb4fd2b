"""The API gateway: keys, rate limits and quotas, routing, canary/shadow split, usage."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from forgeml.gateway._breaker import CircuitBreaker
from forgeml.gateway._keys import (
    KeyStateError,
    VerifiedKey,
    create_key,
    key_summary,
    list_keys,
    revoke_key,
    verify_key,
)
from forgeml.gateway._limits import TokenBucket
from forgeml.gateway._options import GatewayOptions
from forgeml.gateway._usage import usage_report

if TYPE_CHECKING:
    from fastapi import FastAPI

    from forgeml.core.workspace import Workspace


def create_app(
    workspace: Workspace, options: GatewayOptions | None = None, rng: random.Random | None = None
) -> FastAPI:
    """The gateway app (see `forgeml.gateway._app.create_app`); imports FastAPI on first use."""
    from forgeml.gateway._app import create_app as create

    return create(workspace, options, rng)


__all__ = [
    "CircuitBreaker",
    "GatewayOptions",
    "KeyStateError",
    "TokenBucket",
    "VerifiedKey",
    "create_app",
    "create_key",
    "key_summary",
    "list_keys",
    "revoke_key",
    "usage_report",
    "verify_key",
]
