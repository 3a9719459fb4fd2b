"""Labelling: tasks over dataset versions, served in active-learning order, agreement
between annotators, import of labels made elsewhere, export to a labelled version.

It sits above `forgeml.serve` in the layers, so uncertainty sampling reads a model
version's predictions the way a model server makes them.
"""

from forgeml.label.agreement import cohen_kappa, fleiss_kappa, task_agreement
from forgeml.label.export import RESOLVE_CHOICES, export_task, settle
from forgeml.label.imports import FORMATS, detect_format, import_labels, read_labels
from forgeml.label.queue import next_item, submit
from forgeml.label.sampling import STRATEGIES, label_order, uncertainty
from forgeml.label.schema import LabelSchema, check_label
from forgeml.label.tasks import (
    Reorder,
    TaskSpec,
    create_task,
    describe_task,
    list_tasks,
    reorder_task,
    task_summary,
)

__all__ = [
    "FORMATS",
    "RESOLVE_CHOICES",
    "STRATEGIES",
    "LabelSchema",
    "Reorder",
    "TaskSpec",
    "check_label",
    "cohen_kappa",
    "create_task",
    "describe_task",
    "detect_format",
    "export_task",
    "fleiss_kappa",
    "import_labels",
    "label_order",
    "list_tasks",
    "next_item",
    "read_labels",
    "reorder_task",
    "settle",
    "submit",
    "task_agreement",
    "task_summary",
    "uncertainty",
]
