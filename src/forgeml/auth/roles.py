"""Roles and their permissions: the one table authorization reads.

A permission is `resource:action`. A role is a frozen set of them; a user holds one role per
project. `ACCOUNT_PERMISSIONS` are every signed-in account's own (its profile, its tokens), in
whatever project a request names. A permission in no set here is held by nobody: anything
unknown is denied. Every permission a control-plane route declares is listed (a test
compares them).
"""

from __future__ import annotations

from collections.abc import Iterable

from forgeml.core.errors import UsageError

READ = frozenset(
    {
        "datasets:read",
        "jobs:read",
        "queues:read",
        "runs:read",
        "models:read",
        "deployments:read",
        "prompts:read",
        "rag:read",
        "agents:read",
        "alerts:read",
        "pipelines:read",
        "cost:read",
        "projects:read",
        "labels:read",
    }
)
# what a developer adds: changing data, runs and models (labelling items too), not releasing
# them
WRITE = frozenset(
    {
        "datasets:write",
        "jobs:submit",
        "jobs:cancel",
        "runs:write",
        "models:write",
        "prompts:write",
        "rag:write",
        "agents:run",
        "alerts:ack",
        "pipelines:write",
        "pipelines:run",
        "labels:submit",
    }
)
# what a maintainer adds: releasing (promote, deploy, shift traffic), approving agent calls,
# queue settings, receiving Alertmanager's webhook, reading keys, users and the audit log,
# running labelling tasks (create, adjudicate, import, export)
RELEASE = frozenset(
    {
        "models:promote",
        "deployments:write",
        "deployments:traffic",
        "prompts:promote",
        "agents:approve",
        "queues:manage",
        "keys:read",
        "alerts:receive",
        "audit:read",
        "users:read",
        "labels:manage",
    }
)
# what an admin adds: people, projects' members, gateway keys and others' tokens
MANAGE = frozenset({"keys:manage", "users:manage", "projects:manage", "tokens:manage"})
# what only an owner holds: so an admin cannot make anyone (themselves included) an owner
OWN = frozenset({"projects:delete"})

ACCOUNT_PERMISSIONS = frozenset({"account:read", "account:write"})

ROLES: dict[str, frozenset[str]] = {
    "viewer": READ,
    "developer": READ | WRITE,
    "maintainer": READ | WRITE | RELEASE,
    "admin": READ | WRITE | RELEASE | MANAGE,
    "owner": READ | WRITE | RELEASE | MANAGE | OWN,
}
PERMISSIONS = frozenset().union(*ROLES.values()) | ACCOUNT_PERMISSIONS


def role_permissions(role: str | None) -> frozenset[str]:
    """The permissions of `role` (none for no role, or one this version does not know)."""
    return ROLES.get(role or "", frozenset())


def check_role(role: str) -> str:
    """`role` if it is one of `ROLES`, else a `UsageError` naming them."""
    if role not in ROLES:
        raise UsageError(f"Unknown role {role!r}: use one of {', '.join(ROLES)}.")
    return role


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """`scopes` sorted and de-duplicated, each a known permission, else a `UsageError`."""
    chosen = sorted(set(scopes))
    unknown = [scope for scope in chosen if scope not in PERMISSIONS]
    if unknown:
        raise UsageError(
            f"Unknown permission {unknown[0]!r} in the scope: use resource:action "
            f"permissions such as datasets:read or jobs:submit."
        )
    if not chosen:
        raise UsageError("A token's scope names at least one permission (or omit it).")
    return chosen
