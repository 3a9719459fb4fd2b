"""A run's per-group fairness report: the `fairness.json` it keeps, as flat tables.

Two kinds of run keep one. A training run that names `data.slices` (binary target) keeps
fairlearn's MetricFrame per split and sensitive column (`forgeml.train.fairness`):
`{split: {column: {"groups": {group: measures}, "dp_diff": ...}}}`. A mitigation run
(`forgeml models mitigate`) keeps the same tables before and after its group thresholds:
`{"before": {split: {"accuracy": x, column: {...}}}, "after": {...}, ...}`. Both read as one
list of tables, one per (stage, split, column), each with its groups' rows and its
demographic-parity and equalised-odds summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forgeml.core.errors import NotFoundError
from forgeml.train.fairness import FAIRNESS_ARTIFACT, GROUP_MEASURES, MEASURES

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

STAGES = ("before", "after")  # a mitigation run's report


def run_fairness(workspace: Workspace, ref: str) -> dict[str, Any]:
    """The fairness tables of run `ref` (id, id prefix or name).

    Raises:
        NotFoundError: no such run, or it keeps no fairness report.
        UsageError: an id prefix matches several runs.
    """
    from forgeml.tracking import get_run, read_json_artifact

    record = get_run(workspace, ref)
    kept = read_json_artifact(workspace, record.id, FAIRNESS_ARTIFACT)
    if not isinstance(kept, dict) or not (tables := fairness_tables(kept)):
        raise NotFoundError(
            f"Run {record.id} keeps no fairness report: its config names no sensitive "
            "columns (data.slices) or its target is not binary."
        )
    return {"run_id": record.id, "name": record.name, "tables": tables}


def fairness_tables(kept: dict[str, Any]) -> list[dict[str, Any]]:
    """`fairness.json`'s tables, one per (stage, split, column); stage is None for a
    training run's report and "before" / "after" for a mitigation run's."""
    if any(isinstance(kept.get(stage), dict) for stage in STAGES):
        return [
            table
            for stage in STAGES
            for split, columns in (kept.get(stage) or {}).items()
            for table in _split_tables(columns, split, stage)
        ]
    return [
        table for split, columns in kept.items() for table in _split_tables(columns, split, None)
    ]


def _split_tables(columns: Any, split: str, stage: str | None) -> list[dict[str, Any]]:
    if not isinstance(columns, dict):
        return []
    return [
        {
            "stage": stage,
            "split": split,
            "column": column,
            "groups": [
                {"group": group, **{m: measures.get(m) for m in GROUP_MEASURES}}
                for group, measures in sorted(table["groups"].items())
            ],
            **{measure: table.get(measure) for measure in MEASURES},
        }
        for column, table in sorted(columns.items())
        if isinstance(table, dict) and isinstance(table.get("groups"), dict)
    ]
