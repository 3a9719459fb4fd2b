"""Volcano manifests for forgeml jobs: a `batch.volcano.sh/v1alpha1` Job, Queue, PriorityClass.

A job with N workers is N pods, each with the job's per-worker resources:

- task `master` (1 pod) and task `worker` (N-1 pods), `minAvailable: N`: Volcano's gang
  scheduler starts all N pods or none.
- Every pod runs the job's command under torchrun as one node of N
  (`--nnodes=N --nproc-per-node=1`). The c10d rendezvous store is hosted by the master pod
  at `<job>-master-0.<job>:29400`, the DNS name Volcano's `svc` plugin gives it (pod
  hostname = pod name, subdomain = job name, a headless service named after the job).
  torchrun then sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT for the
  process it starts: torchrun's environment contract (executors/base.py).
- A job with one worker, or one whose command starts its own workers (`launch_once`:
  forgeml's train/finetune/tune), is one pod that runs the command directly; a
  `launch_once` pod gets the resources of all its workers.

Sources: Volcano's Job CRD and user guides (vcjob, svc and env plugins, policies), its
admission webhook (pkg/webhooks/admission/jobs: names, policies, `maxRetry`), and
torchrun's documentation (https://pytorch.org/docs/stable/elastic/run.html).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from forgeml.core.errors import ConfigError
from forgeml.scheduler.executors.base import LaunchRequest
from forgeml.scheduler.model import PRIORITY_CLASSES, JobSpec, QueueSpec, Resources

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
SCHEDULER_NAME = "volcano"
MASTER_TASK = "master"
WORKER_TASK = "worker"
RENDEZVOUS_PORT = 29400  # torchrun's default c10d port
# A worker waits this long for the master's store (image pulls differ between nodes).
RENDEZVOUS_READ_TIMEOUT_S = 300
FINISHED_TTL_SECONDS = 24 * 3600  # long after the service has read the final phase
LABEL_PREFIX = "forgeml.io/"
ALLOCATION_ANNOTATION = LABEL_PREFIX + "allocation"

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class VolcanoWorkload:
    """What one Volcano Job runs; built from a `JobSpec` (export) or a `LaunchRequest`."""

    name: str  # the Volcano Job's name, a DNS-1123 label
    job_id: str
    command: tuple[str, ...]
    image: str
    workers: int = 1
    resources: Resources = field(default_factory=lambda: Resources(1.0, 0, 1.0))
    env: Mapping[str, str] = field(default_factory=dict)
    queue: str = "default"
    priority: str | None = None
    owner: str | None = None
    # Volcano restarts the whole gang up to this many times; None: the first failure ends
    # the job (the forgeml service owns retries when it launches through the executor).
    max_retries: int | None = 0
    timeout_seconds: float | None = None
    launch_once: bool = False
    grace_seconds: float = 60.0

    @property
    def pods(self) -> int:
        return 1 if self.launch_once else self.workers

    @property
    def pod_resources(self) -> Resources:
        return self.resources.times(self.workers) if self.launch_once else self.resources


# ---- names and quantities


def dns_label(text: str, max_length: int = 63) -> str:
    """`text` as a DNS-1035 label: lowercase letters, digits and '-', starting with a letter."""
    label = re.sub("-{2,}", "-", _NOT_DNS.sub("-", text.lower())).strip("-")
    if not label[:1].isalpha():
        label = f"x-{label}" if label else "x"
    return label[:max_length].rstrip("-")


def volcano_job_name(name: str, job_id: str, attempt: int | None = None) -> str:
    """The Volcano Job's name: `<name>-<id prefix>[-a<attempt>]`.

    Short enough that pod names (`<job>-worker-<i>`, also their hostnames) stay DNS labels.
    """
    suffix = _NOT_DNS.sub("", job_id.lower())[:8] + (f"-a{attempt}" if attempt is not None else "")
    return f"{dns_label(name, 28)}-{suffix}"


def volcano_queue_name(queue: str) -> str:
    """forgeml's queue name as a Volcano Queue name."""
    return dns_label(queue)


def priority_class_name(priority: str) -> str:
    """The Kubernetes PriorityClass for a forgeml priority class, e.g. `forgeml-high`."""
    if priority not in PRIORITY_CLASSES:
        raise ConfigError(
            f"Unknown priority class {priority!r}; expected one of {', '.join(PRIORITY_CLASSES)}."
        )
    return f"forgeml-{priority}"


def cpu_quantity(cpus: float) -> str:
    """CPUs as a Kubernetes quantity: `2`, `500m`."""
    millis = round(cpus * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def memory_quantity(memory_gb: float) -> str:
    """Memory in GB (read as GiB) as a Kubernetes quantity: `4Gi`, `1536Mi`."""
    mebibytes = round(memory_gb * 1024)
    return f"{mebibytes // 1024}Gi" if mebibytes % 1024 == 0 else f"{mebibytes}Mi"


def resource_list(resources: Resources, *, keep_zero: bool = False) -> dict[str, str]:
    """A Kubernetes ResourceList (cpu, memory, nvidia.com/gpu) for `resources`."""
    quantities = {
        "cpu": (resources.cpus, cpu_quantity(resources.cpus)),
        "memory": (resources.memory_gb, memory_quantity(resources.memory_gb)),
        "nvidia.com/gpu": (resources.gpus, str(resources.gpus)),
    }
    return {key: text for key, (amount, text) in quantities.items() if keep_zero or amount > 0}


def _label_value(text: str) -> str:
    return _NOT_LABEL_VALUE.sub("-", text)[:63].strip("-._")


def _escape(text: str) -> str:
    # Kubernetes expands $(VAR) in command and env values; `$$` is a literal `$`
    return text.replace("$", "$$")


# ---- the Job


def workload_from_spec(
    job_id: str,
    spec: JobSpec,
    *,
    image: str,
    launch_once: bool = False,
    attempt: int | None = None,
) -> VolcanoWorkload:
    """The workload of a submitted job, with Volcano restarting it up to `max_retries`."""
    return VolcanoWorkload(
        name=volcano_job_name(spec.name, job_id, attempt),
        job_id=job_id,
        command=tuple(spec.command),
        image=image,
        workers=spec.workers,
        resources=spec.resources.to_resources(),
        env=spec.env,
        queue=spec.queue,
        priority=spec.priority,
        owner=spec.owner,
        max_retries=spec.max_retries,
        timeout_seconds=spec.timeout_seconds,
        launch_once=launch_once,
    )


def workload_from_request(
    request: LaunchRequest, *, image: str, queue: str, priority: str | None, grace_seconds: float
) -> VolcanoWorkload:
    """The workload of one attempt launched by the service, which owns retries."""
    return VolcanoWorkload(
        name=volcano_job_name(PurePath(request.command[0]).name, request.job_id, request.attempt),
        job_id=request.job_id,
        command=tuple(request.command),
        image=image,
        workers=request.workers,
        resources=request.resources,
        env={**request.env, "FORGEML_JOB_ATTEMPT": str(request.attempt)},
        queue=queue,
        priority=priority,
        max_retries=None,
        timeout_seconds=request.timeout_seconds,
        launch_once=request.launch_once,
        grace_seconds=grace_seconds,
    )


def volcano_job_manifest(
    job_id: str,
    spec: JobSpec,
    *,
    image: str,
    namespace: str = "default",
    launch_once: bool = False,
    attempt: int | None = None,
) -> dict[str, Any]:
    """A Volcano Job that runs `spec` as a gang of `spec.workers` pods.

    Args:
        job_id: forgeml's job id (a label, the torchrun rendezvous id, part of the name).
        spec: The job as submitted.
        image: Container image with forgeml (and torch, for torchrun) installed.
        namespace: Namespace the Job is created in.
        launch_once: The command starts its own workers (forgeml train/finetune/tune):
            one pod with the resources of all workers runs it once.
        attempt: Appended to the name so that each attempt is a Job of its own.

    Returns:
        The manifest, ready for `yaml.safe_dump` or the Kubernetes API.

    Raises:
        ConfigError: The job's priority class is unknown.
    """
    workload = workload_from_spec(
        job_id, spec, image=image, launch_once=launch_once, attempt=attempt
    )
    return workload_manifest(workload, namespace)


def workload_manifest(workload: VolcanoWorkload, namespace: str = "default") -> dict[str, Any]:
    """The Volcano Job manifest of `workload` (see the module docstring for its layout)."""
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "queue": volcano_queue_name(workload.queue),
        "minAvailable": workload.pods,
        # Volcano fails the job when a restart would reach maxRetry (0 means its default 3)
        "maxRetry": (workload.max_retries or 0) + 1,
        "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
        "policies": _job_policies(workload),
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
        "tasks": _tasks(workload),
    }
    if workload.priority is not None:
        spec["priorityClassName"] = priority_class_name(workload.priority)
    allocation = workload.pod_resources.times(workload.pods)
    annotations = {
        ALLOCATION_ANNOTATION: json.dumps(
            {"cpus": allocation.cpus, "gpus": allocation.gpus, "memory_gb": allocation.memory_gb}
        )
    }
    if workload.owner:  # the label value is sanitised; the annotation keeps it as given
        annotations[LABEL_PREFIX + "owner"] = workload.owner
    metadata: dict[str, Any] = {
        "name": workload.name,
        "namespace": namespace,
        "labels": _labels(workload),
        "annotations": annotations,
    }
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}


def _labels(workload: VolcanoWorkload) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/managed-by": "forgeml",
        LABEL_PREFIX + "job-id": _label_value(workload.job_id),
    }
    if workload.owner:
        labels[LABEL_PREFIX + "owner"] = _label_value(workload.owner)
    return labels


def _job_policies(workload: VolcanoWorkload) -> list[dict[str, str]]:
    # An evicted (preempted) or failed pod breaks the gang: restart all of it, as Volcano's
    # examples do, or stop at once when the forgeml service retries by itself.
    action = "TerminateJob" if workload.max_retries is None else "RestartJob"
    return [{"event": "PodEvicted", "action": action}, {"event": "PodFailed", "action": action}]


def _tasks(workload: VolcanoWorkload) -> list[dict[str, Any]]:
    if workload.pods == 1:
        return [_task(workload, MASTER_TASK, 1, list(workload.command))]
    # the job is complete when the master (node of the rendezvous store) has succeeded
    master = _task(workload, MASTER_TASK, 1, torchrun_command(workload, is_host=True))
    master["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    workers = _task(
        workload, WORKER_TASK, workload.pods - 1, torchrun_command(workload, is_host=False)
    )
    return [master, workers]


def rendezvous_endpoint(job_name: str) -> str:
    """`host:port` of the master pod's c10d store (its `svc` plugin DNS name)."""
    return f"{job_name}-{MASTER_TASK}-0.{job_name}:{RENDEZVOUS_PORT}"


def torchrun_command(workload: VolcanoWorkload, *, is_host: bool) -> list[str]:
    """The command of one pod: the job's command as one torchrun node of `workers`."""
    return [
        "torchrun",
        f"--nnodes={workload.workers}",
        "--nproc-per-node=1",
        "--max-restarts=0",  # Volcano restarts the whole gang, not torchrun
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rendezvous_endpoint(workload.name)}",
        f"--rdzv-id={workload.job_id}",
        f"--rdzv-conf=is_host={str(is_host).lower()},read_timeout={RENDEZVOUS_READ_TIMEOUT_S}",
        "--no-python",  # the job's command is a program, not a Python script
        *workload.command,
    ]


def _task(
    workload: VolcanoWorkload, role: str, replicas: int, command: list[str]
) -> dict[str, Any]:
    resources = resource_list(workload.pod_resources)
    env = {**workload.env, "FORGEML_JOB_ID": workload.job_id}
    container: dict[str, Any] = {
        "name": "main",
        "image": workload.image,
        "command": [_escape(part) for part in command],
        "env": [{"name": key, "value": _escape(value)} for key, value in sorted(env.items())],
        "resources": {"requests": resources, "limits": dict(resources)},
        # torch's DataLoader workers and NCCL share memory through /dev/shm (64 MiB by default)
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if role == MASTER_TASK and workload.pods > 1:
        container["ports"] = [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # Volcano's policies restart, not the kubelet
        "terminationGracePeriodSeconds": math.ceil(workload.grace_seconds),
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    if workload.timeout_seconds is not None:
        pod_spec["activeDeadlineSeconds"] = max(1, math.ceil(workload.timeout_seconds))
    return {
        "name": role,
        "replicas": replicas,
        "minAvailable": replicas,
        "template": {"metadata": {"labels": _labels(workload)}, "spec": pod_spec},
    }


# ---- Queue and PriorityClass


def volcano_queue_manifest(queue: QueueSpec) -> dict[str, Any]:
    """A Volcano Queue with the forgeml queue's weight, capability and reclaimable flag."""
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable}
    if queue.capability is not None:
        # every dimension: a capability of 0 GPUs forbids GPUs, as in forgeml's policy
        spec["capability"] = resource_list(queue.capability.to_resources(), keep_zero=True)
    return {
        "apiVersion": QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": {
            "name": volcano_queue_name(queue.name),
            "labels": {"app.kubernetes.io/managed-by": "forgeml"},
            "annotations": {LABEL_PREFIX + "queue": queue.name},
        },
        "spec": spec,
    }


def priority_class_manifest(name: str, value: int) -> dict[str, Any]:
    """The Kubernetes PriorityClass of forgeml's priority class `name` (e.g. `high`)."""
    return {
        "apiVersion": PRIORITY_CLASS_API_VERSION,
        "kind": "PriorityClass",
        "metadata": {
            "name": priority_class_name(name),
            "labels": {"app.kubernetes.io/managed-by": "forgeml"},
        },
        "value": value,
        "globalDefault": False,
        "description": f"forgeml priority class {name!r}.",
    }


def priority_class_manifests() -> list[dict[str, Any]]:
    """One PriorityClass per entry of `PRIORITY_CLASSES`."""
    return [priority_class_manifest(name, value) for name, value in PRIORITY_CLASSES.items()]
