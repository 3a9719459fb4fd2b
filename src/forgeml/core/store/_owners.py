"""The project a named resource belongs to (names are unique across projects, so a name
finds one): what every check of a use across projects reads before `Workspace.check_own`."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.core.store._models import Dataset
from forgeml.core.store._runs import ModelVersionRecord
from forgeml.core.store._serving import DeploymentRecord


def dataset_project(session: Session, name: str) -> str | None:
    """The project of dataset `name`, None when no dataset has that name."""
    return session.scalar(select(Dataset.project).where(Dataset.name == name))


def model_project(session: Session, name: str) -> str | None:
    """The project of model `name` (`NAME` or `NAME@...`), None when none is registered."""
    name = name.partition("@")[0]
    return session.scalar(
        select(ModelVersionRecord.project).where(ModelVersionRecord.name == name).limit(1)
    )


def deployment_project(session: Session, name: str) -> str | None:
    """The project of deployment `name`, None when no deployment has that name."""
    return session.scalar(select(DeploymentRecord.project).where(DeploymentRecord.name == name))
