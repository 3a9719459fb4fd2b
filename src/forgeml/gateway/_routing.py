"""Deployment name -> replicas, read from the store, and the canary/primary traffic split.

The route table is a snapshot of `deployments` + `deployment_replicas` (replicas whose
status is `ready`), replaced whole on each refresh, so a request reads one consistent view
without locks. The split draws from an injectable `random.Random`, so tests can seed it.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from sqlalchemy import select

from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace

# replica roles as the deployment control plane records them
PRIMARY, CANARY, SHADOW = "primary", "canary", "shadow"


@dataclass
class Route:
    """Where one deployment's traffic goes."""

    name: str
    primary: list[str]
    canary: list[str]
    shadow: list[str]
    # percent of requests sent to the canary replicas (0-100)
    canary_weight: float
    # autoscaled: with no replica ready, a request waits for a cold start
    cold_starts: bool = False
    # the deployment's project: a registry prompt its requests name must be of it too
    project: str = "default"
    _turn: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    def candidates(self, rng: random.Random) -> tuple[str, list[str]]:
        """The role this request draws and replica URLs to try, in order.

        The chosen pool comes first, rotated round-robin; the other pool's replicas follow
        as the fallback a retry may use when every replica of the chosen one is down.
        """
        use_canary = bool(self.canary) and rng.random() * 100.0 < self.canary_weight
        if use_canary or not self.primary:
            role, first, second = CANARY, self.canary, self.primary
        else:
            role, first, second = PRIMARY, self.primary, self.canary
        turn = next(self._turn)
        rotated = first[turn % len(first) :] + first[: turn % len(first)] if first else []
        return role, rotated + second

    @property
    def serving(self) -> bool:
        """Whether any primary or canary replica is ready."""
        return bool(self.primary or self.canary)


def load_routes(workspace: Workspace) -> dict[str, Route]:
    """The current route of every live deployment (blocking: reads the store)."""
    with workspace.store.session() as session:
        deployments = session.scalars(
            select(DeploymentRecord).where(DeploymentRecord.status != "deleted")
        ).all()
        replicas = session.scalars(
            select(DeploymentReplicaRecord).where(DeploymentReplicaRecord.status == "ready")
        ).all()
        by_deployment: dict[str, list[DeploymentReplicaRecord]] = {}
        for replica in replicas:
            by_deployment.setdefault(replica.deployment_id, []).append(replica)
        return {
            record.name: _route(record, by_deployment.get(record.id, [])) for record in deployments
        }


def _route(record: DeploymentRecord, replicas: list[DeploymentReplicaRecord]) -> Route:
    urls: dict[str, list[str]] = {PRIMARY: [], CANARY: [], SHADOW: []}
    for replica in sorted(replicas, key=lambda r: (r.port, r.id)):
        urls.setdefault(replica.role, []).append(f"http://{replica.host}:{replica.port}")
    canary = (record.spec or {}).get("canary") or {}
    return Route(
        name=record.name,
        primary=urls[PRIMARY],
        canary=urls[CANARY],
        shadow=urls[SHADOW],
        canary_weight=float(canary.get("weight", 0)),
        cold_starts=bool((record.spec or {}).get("autoscale")),
        project=record.project,
    )
