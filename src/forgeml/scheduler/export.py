"""`forgeml jobs export`: a recorded job as the Volcano manifest that runs it on Kubernetes.

One function for both sides: the CLI beside the workspace, and the API route the CLI's
remote mode reads (`GET /api/v1/jobs/{ref}/export`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

EXPORT_FORMATS = ("volcano",)


def volcano_export(workspace: Workspace, job: str, image: str, namespace: str) -> str:
    """The YAML of job `job` (id, id prefix or name): its PriorityClass, Queue and
    `batch.volcano.sh/v1alpha1` Job (`executors.kubernetes.export_job`).

    Raises:
        NotFoundError: no such job.
    """
    from forgeml.scheduler.executors.kubernetes import export_job
    from forgeml.scheduler.jobs import get_job
    from forgeml.scheduler.model import JobSpec, QueueSpec
    from forgeml.scheduler.queues import get_queue
    from forgeml.scheduler.service import LAUNCH_ONCE_KINDS

    with workspace.store.session() as session:
        record = get_job(session, job, workspace.project)
        queue = get_queue(session, record.queue)
        queue_spec = QueueSpec(
            name=queue.name, weight=queue.weight, reclaimable=queue.reclaimable,
            capability=queue.capability, budget=queue.budget,
        )  # fmt: skip
        job_id, kind, spec = record.id, record.kind, JobSpec.model_validate(record.spec)
    return export_job(
        spec, job_id, image=image, namespace=namespace, queue=queue_spec,
        launch_once=kind in LAUNCH_ONCE_KINDS,
    )  # fmt: skip
