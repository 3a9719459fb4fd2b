"""Labelling tasks: create one over a dataset version, list them, show one's progress.

A task's item order is fixed when it is created (`sampling.label_order`): uncertainty
sampling reads a named model version's probabilities for every row once, so serving the
next item is a lookup, not an inference.

A task belongs to the project it was created in (`Workspace.project`), over a dataset
version and ranked by a model version of that project; its name stays unique across
projects. A list shows the workspace's project's tasks; an item is found by name (the API
authorizes it in its own project); what serves, labels, imports into, reorders or exports
one must act in its project (`get_own_task`), and reads its rows only while its dataset is
that project's.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError as SqlIntegrityError
from sqlalchemy.orm import Session

from forgeml.core.errors import AlreadyExistsError, NotFoundError
from forgeml.core.ids import new_id, validate_name
from forgeml.core.store import DatasetVersion, LabelAnnotationRecord, LabelTaskRecord
from forgeml.core.workspace import Workspace
from forgeml.label.sampling import Strategy, label_order
from forgeml.label.schema import LabelSchema


class TaskSpec(BaseModel):
    """A labelling task as `forgeml label create` and `POST /api/v1/labels` take it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(max_length=128, description="Task name.")
    dataset: str = Field(max_length=160, description="The dataset version labelled (NAME@vN).")
    label_schema: LabelSchema = Field(alias="schema", description="What annotators give.")
    instructions: str = Field("", max_length=20_000, description="What annotators read.")
    assignees: list[str] = Field(
        default_factory=list, description="Who may label; empty lets anyone holding the right."
    )
    overlap: int = Field(
        1, ge=1, le=20, description="Annotators per item (2 or more measures agreement)."
    )
    lease_seconds: int = Field(
        900, ge=1, le=7 * 86_400, description="How long a served item stays an annotator's."
    )
    strategy: Strategy = Field(
        "random",
        description="Item order: random, or uncertainty sampling from --model's predictions "
        "(least-confidence, margin, entropy).",
    )
    model: str | None = Field(None, max_length=160, description="Model version (NAME@vN).")
    seed: int = Field(0, description="Seed of the random order and of ties.")

    @model_validator(mode="after")
    def _model_for_uncertainty(self) -> TaskSpec:
        if self.strategy != "random" and self.model is None:
            raise ValueError(f"the {self.strategy} strategy needs a model version (--model)")
        if self.overlap > max(len(self.assignees), 1) and self.assignees:
            raise ValueError(
                f"overlap {self.overlap} needs at least that many assignees ({len(self.assignees)})"
            )
        return self


def create_task(workspace: Workspace, spec: TaskSpec) -> LabelTaskRecord:
    """Record `spec` as a new task, its items ordered, audited as the workspace's actor.

    Raises:
        NotFoundError: no such dataset version or model version.
        MissingColumnError: the schema's column is not in the data.
        AlreadyExistsError: a task of that name exists (in whichever project).
        OtherProjectError: the dataset or the model belongs to another project.
        ConfigError: the model answers no probabilities.
    """
    from forgeml.data import catalog
    from forgeml.data._frame import require_columns

    validate_name(spec.name, "label task name")
    with workspace.store.session() as session:
        _refuse_taken(session, workspace, spec.name)
        version = catalog.resolve_to_read(workspace, session, spec.dataset)
    frame = catalog.read_frame(workspace, version)
    if spec.label_schema.column is not None:
        require_columns(frame, [spec.label_schema.column], "The label schema")
    probabilities = None
    if spec.strategy != "random" and spec.model is not None:
        from forgeml.label.predictions import model_probabilities

        probabilities = model_probabilities(workspace, spec.model, frame)
    order = label_order(
        frame.height, spec.strategy, np.random.default_rng(spec.seed), probabilities
    )
    task = LabelTaskRecord(
        id=new_id(),
        name=spec.name,
        project=workspace.project,
        dataset_version_id=version.id,
        dataset_ref=version.ref,
        label_schema=spec.label_schema.model_dump(),
        instructions=spec.instructions,
        assignees=sorted(set(spec.assignees)),
        overlap=spec.overlap,
        lease_seconds=spec.lease_seconds,
        strategy=spec.strategy,
        model_ref=spec.model,
        item_order=order,
        created_by=workspace.actor,
    )
    try:
        with workspace.store.session() as session:
            _refuse_taken(session, workspace, spec.name)
            session.add(task)
            session.flush()
            workspace.audit(
                session,
                "label.task.create",
                spec.name,
                {"dataset": version.ref, "strategy": spec.strategy, "model": spec.model},
            )
    except SqlIntegrityError:  # created by another caller between the check and the insert
        raise AlreadyExistsError(f"Label task '{spec.name}' already exists.") from None
    return task


def _order(
    workspace: Workspace, frame: Any, strategy: Strategy, model: str | None, seed: int
) -> list[int]:
    probabilities = None
    if strategy != "random" and model is not None:
        from forgeml.label.predictions import model_probabilities

        probabilities = model_probabilities(workspace, model, frame)
    return label_order(frame.height, strategy, np.random.default_rng(seed), probabilities)


class Reorder(BaseModel):
    """A new item order for a task: after a model retrained on the labels so far (the next
    round of active learning), or random."""

    model_config = ConfigDict(extra="forbid")

    strategy: Strategy = Field(description=TaskSpec.model_fields["strategy"].description)
    model: str | None = Field(None, max_length=160, description="Model version (NAME@vN).")
    seed: int = Field(0, description="Seed of the random order and of ties.")

    @model_validator(mode="after")
    def _model_for_uncertainty(self) -> Reorder:
        if self.strategy != "random" and self.model is None:
            raise ValueError(f"the {self.strategy} strategy needs a model version (--model)")
        return self


def reorder_task(workspace: Workspace, name: str, change: Reorder) -> LabelTaskRecord:
    """Rank task `name`'s items again; labels and leases stay, `next` follows the new order.

    Raises:
        NotFoundError: no such task or model version.
        OtherProjectError: the task, its dataset or the model belongs to another project.
        ConfigError: the model answers no probabilities.
    """
    from forgeml.data import catalog

    with workspace.store.session() as session:
        version = task_version(workspace, session, get_own_task(workspace, session, name))
    frame = catalog.read_frame(workspace, version)
    order = _order(workspace, frame, change.strategy, change.model, change.seed)
    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        task.item_order, task.strategy, task.model_ref = order, change.strategy, change.model
        workspace.audit(
            session,
            "label.task.reorder",
            name,
            {"strategy": change.strategy, "model": change.model},
        )
        session.flush()
        session.expunge(task)
    return task


def _refuse_taken(session: Session, workspace: Workspace, name: str) -> None:
    found = session.scalar(select(LabelTaskRecord.project).where(LabelTaskRecord.name == name))
    if found is None:
        return
    if found != workspace.project:
        # names stay unique across projects: say whose it is, not just that it is taken
        raise AlreadyExistsError(
            f"A label task called {name!r} exists already, in the project {found!r}; "
            "pick another name."
        )
    raise AlreadyExistsError(f"Label task '{name}' already exists.")


def get_task(session: Session, name: str) -> LabelTaskRecord:
    """The task called `name`.

    Raises:
        NotFoundError: no such task.
    """
    validate_name(name, "label task name")
    task = session.scalar(select(LabelTaskRecord).where(LabelTaskRecord.name == name))
    if task is None:
        raise NotFoundError(f"Label task '{name}' does not exist (see `forgeml label list`).")
    return task


def get_own_task(workspace: Workspace, session: Session, name: str) -> LabelTaskRecord:
    """The task called `name`, for a use that acts on it (serve an item, label, import,
    reorder, export): it must belong to the workspace's project.

    Raises:
        NotFoundError: no such task.
        OtherProjectError: the task belongs to another project.
    """
    task = get_task(session, name)
    workspace.check_own("Label task", task.name, task.project)
    return task


def task_version(workspace: Workspace, session: Session, task: LabelTaskRecord) -> DatasetVersion:
    """The dataset version `task` labels, once its rows are the workspace's to read.

    Raises:
        NotFoundError: the version is gone.
        OtherProjectError: its dataset belongs to another project (moved since).
    """
    from forgeml.data import catalog

    version = session.get(DatasetVersion, task.dataset_version_id)
    if version is None:
        raise NotFoundError(f"The dataset version of label task '{task.name}' is gone.")
    catalog.check_readable(workspace, version)
    return version


def annotations_of(session: Session, task: LabelTaskRecord) -> list[LabelAnnotationRecord]:
    """Every label given in `task`, by item then annotator."""
    return list(
        session.scalars(
            select(LabelAnnotationRecord)
            .where(LabelAnnotationRecord.task_id == task.id)
            .order_by(LabelAnnotationRecord.item, LabelAnnotationRecord.annotator)
        )
    )


def task_summary(task: LabelTaskRecord) -> dict[str, Any]:
    """The JSON form of a task that `label list` and the API answer."""
    return {
        "name": task.name,
        "project": task.project,
        "dataset": task.dataset_ref,
        "schema": task.label_schema,
        "assignees": task.assignees,
        "overlap": task.overlap,
        "lease_seconds": task.lease_seconds,
        "strategy": task.strategy,
        "model": task.model_ref,
        "items": len(task.item_order),
        "created_by": task.created_by,
        "created_at": task.created_at,
    }


def list_tasks(workspace: Workspace) -> list[dict[str, Any]]:
    """Every task of the workspace's project, by name."""
    with workspace.store.session() as session:
        tasks = session.scalars(
            select(LabelTaskRecord)
            .where(LabelTaskRecord.project == workspace.project)
            .order_by(LabelTaskRecord.name)
        ).all()
        return [task_summary(task) for task in tasks]


def describe_task(workspace: Workspace, name: str) -> dict[str, Any]:
    """What `label show` answers: the task, its instructions and its progress."""
    with workspace.store.session() as session:
        task = get_task(session, name)
        annotations = annotations_of(session, task)
    per_item = Counter(a.item for a in annotations if not a.adjudicated)
    done = sum(1 for count in per_item.values() if count >= task.overlap)
    return task_summary(task) | {
        "instructions": task.instructions,
        "progress": {
            "labels": len(annotations),
            "items_labelled": len(per_item),
            "items_done": done,
            "adjudicated": sum(1 for a in annotations if a.adjudicated),
            "by_annotator": dict(sorted(Counter(a.annotator for a in annotations).items())),
        },
    }


def lease_length(task: LabelTaskRecord) -> timedelta:
    return timedelta(seconds=task.lease_seconds)
