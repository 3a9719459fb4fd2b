"""Serving items to annotators and taking their labels.

`next_item` walks the task's item order and leases the first item this annotator may
label: one that still needs labels (fewer than `overlap` annotators), that they have not
labelled, and that nobody else holds an unexpired lease on. One lease per item, so an item
is with one annotator at a time; with overlap, the next annotator gets it once the first
has submitted. Asking again before submitting answers the same item (a retried request
does not leak leases). Time comes from `clock`, so tests move it instead of sleeping.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import polars as pl
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError as SqlIntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from forgeml.core.errors import LabelStateError, NotFoundError
from forgeml.core.ids import new_id
from forgeml.core.store import LabelAnnotationRecord, LabelLeaseRecord, LabelTaskRecord
from forgeml.core.store._models import utcnow
from forgeml.core.workspace import Workspace
from forgeml.label.schema import LabelSchema, check_label
from forgeml.label.tasks import annotations_of, get_own_task, lease_length, task_version

Clock = Callable[[], datetime]
_RACES = 5  # another annotator took the item between our read and our insert: try again


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes for what was stored as UTC
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def check_assignee(task: LabelTaskRecord, annotator: str) -> None:
    """Refuse an annotator the task does not name (any annotator when it names nobody)."""
    if task.assignees and annotator not in task.assignees:
        raise LabelStateError(
            f"{annotator} is not an assignee of label task '{task.name}' "
            f"(its assignees: {', '.join(task.assignees)})."
        )


def next_item(
    workspace: Workspace, name: str, annotator: str, clock: Clock = utcnow
) -> dict[str, Any] | None:
    """Lease the next item of task `name` to `annotator`: the item and its row, or None
    when nothing is left for them.

    Raises:
        NotFoundError: no such task.
        OtherProjectError: the task or its dataset belongs to another project.
        LabelStateError: the annotator is not assigned to the task.
    """
    for _ in range(_RACES):
        try:
            with workspace.store.session() as session:
                task = get_own_task(workspace, session, name)
                task_version(workspace, session, task)  # its rows readable: lease nothing else
                check_assignee(task, annotator)
                item, expires = _lease(session, task, annotator, clock())
                if item is None:
                    return None
                version_id, schema, instructions = (
                    task.dataset_version_id,
                    task.label_schema,
                    task.instructions,
                )
            break
        except (SqlIntegrityError, StaleDataError):  # the lease row changed under us
            continue
    else:
        raise LabelStateError(f"Label task '{name}' is contended; ask for the next item again.")
    return {
        "task": name,
        "item": item,
        "expires_at": expires,
        "schema": schema,
        "instructions": instructions,
        "row": item_row(workspace, version_id, item),
    }


def _lease(
    session: Session, task: LabelTaskRecord, annotator: str, now: datetime
) -> tuple[int | None, datetime | None]:
    labelled: dict[int, set[str]] = defaultdict(set)
    for annotation in annotations_of(session, task):
        if not annotation.adjudicated:
            labelled[annotation.item].add(annotation.annotator)
    leases = {
        lease.item: lease
        for lease in session.scalars(
            select(LabelLeaseRecord).where(LabelLeaseRecord.task_id == task.id)
        )
    }
    expires = now + lease_length(task)
    for lease in leases.values():  # an item already served to them and not yet labelled
        mine = lease.annotator == annotator and annotator not in labelled[lease.item]
        if mine and _aware(lease.expires_at) > now:
            lease.expires_at = expires
            return lease.item, expires
    for item in task.item_order:
        if len(labelled[item]) >= task.overlap or annotator in labelled[item]:
            continue
        held = leases.get(item)
        if held is not None and _aware(held.expires_at) > now:
            continue
        if held is not None:
            session.delete(held)
            session.flush()
        session.add(
            LabelLeaseRecord(task_id=task.id, item=item, annotator=annotator, expires_at=expires)
        )
        session.flush()
        return item, expires
    return None, None


def item_row(workspace: Workspace, version_id: str, item: int) -> dict[str, Any]:
    """The user columns of row `item` of a dataset version (binary cells as base64).

    Raises:
        NotFoundError: the version is gone.
        OtherProjectError: its dataset belongs to another project than the workspace's.
    """
    from forgeml.core.store import DatasetVersion
    from forgeml.data import catalog
    from forgeml.data._frame import user_columns

    with workspace.store.session() as session:
        version = session.get(DatasetVersion, version_id)
        if version is None:
            raise NotFoundError(f"The dataset version of this label task ({version_id}) is gone.")
        catalog.check_readable(workspace, version)
        path = catalog.parquet_path(workspace, version)
    scan = pl.scan_parquet(path)
    row = scan.select(user_columns(scan)).slice(item, 1).collect().to_dicts()[0]
    return {
        key: base64.b64encode(value).decode() if isinstance(value, bytes) else value
        for key, value in row.items()
    }


def submit(
    workspace: Workspace,
    name: str,
    item: int,
    annotator: str,
    value: Any,
    *,
    adjudicate: bool = False,
    clock: Clock = utcnow,
) -> dict[str, Any]:
    """Record `annotator`'s label `value` for `item` and release their lease on it.

    An adjudicated label settles the item at export; it may replace an earlier one.

    Raises:
        NotFoundError: no such task.
        OtherProjectError: the task belongs to another project.
        InvalidLabelError: the item is not in the task, or the label is outside its schema.
        LabelStateError: not an assignee, the item is leased to someone else, or they
            labelled it already.
    """
    from forgeml.core.errors import InvalidLabelError

    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        if not adjudicate:
            check_assignee(task, annotator)
        if not 0 <= item < len(task.item_order):
            raise InvalidLabelError(
                f"Item {item} is not in label task '{name}' (items 0..{len(task.item_order) - 1})."
            )
        schema = LabelSchema.model_validate(task.label_schema)
        version_id = task.dataset_version_id
    row = item_row(workspace, version_id, item) if schema.kind == "spans" else None
    normal = check_label(schema, value, row)
    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        lease = session.get(LabelLeaseRecord, (task.id, item))
        others = lease is not None and lease.annotator != annotator and not adjudicate
        if lease is not None and others and _aware(lease.expires_at) > clock():
            raise LabelStateError(
                f"Item {item} of '{name}' is leased to {lease.annotator} until "
                f"{_aware(lease.expires_at).isoformat()}."
            )
        store_annotation(session, task, item, annotator, normal, adjudicate, "submit")
        if lease is not None and (lease.annotator == annotator or adjudicate):
            session.delete(lease)
        workspace.audit(
            session,
            "label.submit",
            f"{name}/{item}",
            {"annotator": annotator, "adjudicated": adjudicate},
        )
    return {
        "task": name,
        "item": item,
        "annotator": annotator,
        "label": normal,
        "adjudicated": adjudicate,
    }


def store_annotation(
    session: Session,
    task: LabelTaskRecord,
    item: int,
    annotator: str,
    value: Any,
    adjudicated: bool,
    source: str,
) -> None:
    """Add one label in the caller's transaction (an adjudicated one replaces theirs).

    Raises:
        LabelStateError: the annotator labelled the item already.
    """
    found = session.scalar(
        select(LabelAnnotationRecord).where(
            LabelAnnotationRecord.task_id == task.id,
            LabelAnnotationRecord.item == item,
            LabelAnnotationRecord.annotator == annotator,
        )
    )
    if found is not None and not adjudicated:
        raise LabelStateError(f"{annotator} has labelled item {item} of '{task.name}' already.")
    if found is not None:
        session.execute(delete(LabelAnnotationRecord).where(LabelAnnotationRecord.id == found.id))
        session.flush()
    session.add(
        LabelAnnotationRecord(
            id=new_id(),
            task_id=task.id,
            item=item,
            annotator=annotator,
            value=value,
            adjudicated=adjudicated,
            source=source,
        )
    )
    session.flush()
