"""The API gateway: keys, rate limits and quotas, routing, canary/shadow split, usage.

Names load on first use (as in `forgeml.serve`), so `forgeml --help` (which reads
`GatewayOptions`) never imports FastAPI or httpx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.gateway._app import create_app
    from forgeml.gateway._breaker import CircuitBreaker
    from forgeml.gateway._keys import (
        VerifiedKey,
        create_key,
        find_key,
        key_summary,
        list_keys,
        revoke_key,
        verify_key,
    )
    from forgeml.gateway._limits import TokenBucket
    from forgeml.gateway._options import GatewayOptions
    from forgeml.gateway._thread import gateway_in_thread
    from forgeml.gateway._usage import usage_report

_HOMES = {
    "CircuitBreaker": "forgeml.gateway._breaker",
    "GatewayOptions": "forgeml.gateway._options",
    "TokenBucket": "forgeml.gateway._limits",
    "VerifiedKey": "forgeml.gateway._keys",
    "create_app": "forgeml.gateway._app",
    "create_key": "forgeml.gateway._keys",
    "find_key": "forgeml.gateway._keys",
    "gateway_in_thread": "forgeml.gateway._thread",
    "key_summary": "forgeml.gateway._keys",
    "list_keys": "forgeml.gateway._keys",
    "revoke_key": "forgeml.gateway._keys",
    "usage_report": "forgeml.gateway._usage",
    "verify_key": "forgeml.gateway._keys",
}
__all__ = [
    "CircuitBreaker",
    "GatewayOptions",
    "TokenBucket",
    "VerifiedKey",
    "create_app",
    "create_key",
    "find_key",
    "gateway_in_thread",
    "key_summary",
    "list_keys",
    "revoke_key",
    "usage_report",
    "verify_key",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'forgeml.gateway' has no attribute '{name}'")
    return getattr(import_module(_HOMES[name]), name)
