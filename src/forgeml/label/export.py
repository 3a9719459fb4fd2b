"""Export a labelling task to a new dataset version (the `label` transform of the data
layer), one label per item.

Each item's label is settled by `resolve`: `adjudicated` takes an adjudicator's label where
there is one and the majority elsewhere; `majority` ignores adjudications. A majority is
strictly more than half of the item's labels. Items with no label, or whose labels tie
with no adjudication, are left out and counted in the answer, so nobody mistakes a
partial export for a complete one.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any, Literal

from forgeml.core.errors import InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.label.tasks import annotations_of, get_own_task

Resolve = Literal["adjudicated", "majority"]
RESOLVE_CHOICES: tuple[Resolve, ...] = ("adjudicated", "majority")


def settle(
    annotations: list[tuple[int, str, Any, bool]], resolve: Resolve
) -> tuple[dict[int, Any], set[str], int]:
    """One label per item from (item, annotator, label, adjudicated) tuples.

    Returns:
        The label of each settled item, the annotators whose labels were used, and how
        many labelled items stayed unsettled (ties).
    """
    by_item: dict[int, list[tuple[str, Any, bool]]] = defaultdict(list)
    for item, annotator, value, adjudicated in annotations:
        by_item[item].append((annotator, value, adjudicated))
    settled: dict[int, Any] = {}
    used: set[str] = set()
    ties = 0
    for item, given in sorted(by_item.items()):
        final = [g for g in given if g[2]] if resolve == "adjudicated" else []
        if final:
            settled[item] = final[-1][1]
            used.add(final[-1][0])
            continue
        votes = [g for g in given if not g[2]]
        if not votes:
            continue
        keys = Counter(json.dumps(v, sort_keys=True) for _, v, _ in votes)
        top, count = keys.most_common(1)[0]
        if count * 2 <= len(votes):
            ties += 1
            continue
        settled[item] = json.loads(top)
        used.update(who for who, v, _ in votes if json.dumps(v, sort_keys=True) == top)
    return settled, used, ties


def export_task(
    workspace: Workspace,
    name: str,
    *,
    dataset: str | None = None,
    column: str = "label",
    resolve: Resolve = "adjudicated",
) -> dict[str, Any]:
    """Record task `name`'s settled labels as a new version derived from its dataset
    version (default dataset: `<parent dataset>-labelled`), in the task's project.

    Raises:
        NotFoundError: no such task.
        OtherProjectError: the task or its dataset belongs to another project.
        AlreadyExistsError: the dataset exported to belongs to another project.
        InvalidDataError: no item has a settled label.
    """
    from forgeml.data import catalog
    from forgeml.data.labelled import LabelledParams
    from forgeml.data.pipeline import derive

    with workspace.store.session() as session:
        task = get_own_task(workspace, session, name)
        given = [
            (a.item, a.annotator, a.value, a.adjudicated) for a in annotations_of(session, task)
        ]
        parent, items = task.dataset_ref, len(task.item_order)
    settled, used, ties = settle(given, resolve)
    if not settled:
        raise InvalidDataError(
            f"Label task '{name}' has no settled label to export "
            f"({len({g[0] for g in given})} items labelled, {ties} tied)."
        )
    params = LabelledParams(
        column=column, labels=settled, task=name, annotators=sorted(used), resolve=resolve
    )
    target = dataset or parent.partition("@")[0] + "-labelled"
    derived = derive(workspace, "label", parent, params, name=target)
    return catalog.version_summary(derived.main.version) | {
        "created": derived.main.created,
        "task": name,
        "annotators": sorted(used),
        "labelled": len(settled),
        "tied": ties,
        "unlabelled": items - len({g[0] for g in given}),
    }
