"""The project an alert belongs to: that of the partitioned subject its labels name.

An alert is filed, when it is first recorded (forgeml's own rule or Alertmanager's webhook),
in the project of the first subject its labels name that the store knows, in this order:

| label | subject |
|---|---|
| `deployment` | the deployment of that name |
| `model` | the served name: the deployment of that name, else the registered model |
| `dataset` | the dataset of that name |

Names are unique across projects, so a name finds one subject. An alert whose labels name
none (a queue's, a GPU's, a name the store does not know) stays in `default`. Labels such
as `job` and `instance` are Prometheus' scrape target, never a forgeml job: they name
nothing here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.auth import DEFAULT_PROJECT
from forgeml.core.store import Dataset, DeploymentRecord, ModelVersionRecord

Lookup = Callable[[Session, str], str | None]


def _deployment(session: Session, name: str) -> str | None:
    return session.scalar(select(DeploymentRecord.project).where(DeploymentRecord.name == name))


def _model(session: Session, name: str) -> str | None:
    name = name.partition("@")[0]
    return session.scalar(
        select(ModelVersionRecord.project).where(ModelVersionRecord.name == name).limit(1)
    )


def _dataset(session: Session, name: str) -> str | None:
    return session.scalar(select(Dataset.project).where(Dataset.name == name))


# label -> the lookups its value is tried with, in order; the labels in this order
SUBJECT_LABELS: dict[str, tuple[Lookup, ...]] = {
    "deployment": (_deployment,),
    "model": (_deployment, _model),  # servers label their series with the served name
    "dataset": (_dataset,),
}


def alert_project(session: Session, labels: Mapping[str, str]) -> str:
    """The project of the first subject `labels` name that the store knows, else
    `default`."""
    for label, lookups in SUBJECT_LABELS.items():
        value = labels.get(label)
        if not value:
            continue
        for lookup in lookups:
            found = lookup(session, value)
            if found is not None:
                return found
    return DEFAULT_PROJECT
