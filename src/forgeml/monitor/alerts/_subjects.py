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

from sqlalchemy.orm import Session

from forgeml.auth import DEFAULT_PROJECT
from forgeml.core.store import dataset_project, deployment_project, model_project

Lookup = Callable[[Session, str], str | None]

# label -> the lookups its value is tried with, in order; the labels in this order
SUBJECT_LABELS: dict[str, tuple[Lookup, ...]] = {
    "deployment": (deployment_project,),
    # servers label their series with the served name
    "model": (deployment_project, model_project),
    "dataset": (dataset_project,),
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
