"""Kubernetes + Volcano: export a job as a Volcano Job, submit it, or run attempts there.

`export_job` writes the YAML that `forgeml jobs export JOB --format volcano` prints (the
job's PriorityClass, optionally its Queue, then the Job; see `_volcano` for the layout);
`submit_manifest` sends one such document with the `kubernetes` client, as `--submit` does.
`KubernetesExecutor` is the same Job behind the executor interface: `launch` creates it,
`poll` maps its Volcano phase to an `AttemptStatus`, `terminate` deletes it.

The `kubernetes` package is an optional dependency (`pip install 'forgeml[kubernetes]'`)
and is imported only when a cluster is used.
"""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from forgeml.core.errors import ForgemlError, UsageError
from forgeml.scheduler.executors._volcano import (
    JOB_API_VERSION,
    PRIORITY_CLASS_API_VERSION,
    QUEUE_API_VERSION,
    priority_class_manifest,
    priority_class_manifests,
    volcano_job_manifest,
    volcano_queue_manifest,
    workload_from_request,
    workload_manifest,
)
from forgeml.scheduler.executors._volcano_status import attempt_status, pod_failure
from forgeml.scheduler.executors.base import AttemptHandle, AttemptStatus, LaunchRequest
from forgeml.scheduler.model import PRIORITY_CLASSES, JobSpec, QueueSpec

__all__ = [
    "KubernetesExecutor",
    "KubernetesRequestError",
    "KubernetesUnavailableError",
    "attempt_status",
    "export_job",
    "priority_class_manifest",
    "priority_class_manifests",
    "submit_manifest",
    "volcano_job_manifest",
    "volcano_queue_manifest",
]

DEFAULT_IMAGE = "forgeml:latest"  # the default of `forgeml jobs export --image`
_REQUEST_TIMEOUT_S = 30
_VOLCANO_JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
_VOLCANO_QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")


class KubernetesUnavailableError(ForgemlError):
    """No Kubernetes cluster is configured or its API server cannot be reached."""

    http_status = 503


class KubernetesRequestError(ForgemlError):
    """The Kubernetes API (or Volcano's admission webhook) refused a request."""


def export_job(
    spec: JobSpec,
    job_id: str,
    *,
    image: str,
    namespace: str = "default",
    queue: QueueSpec | None = None,
    launch_once: bool = False,
) -> str:
    """The YAML for `kubectl apply -f`: the job's PriorityClass, its Queue when given, the Job.

    Args:
        spec: The job as submitted.
        job_id: forgeml's id of the job.
        image: Container image with forgeml (and torch) installed.
        namespace: Namespace of the Job.
        queue: The job's queue, to create it with the same weight, capability and
            reclaimable flag (Volcano rejects a Job whose queue does not exist).
        launch_once: The command starts its own workers (one pod with all their resources).

    Raises:
        UsageError: `queue` is not the job's queue.
        ConfigError: The job's priority class is unknown.
    """
    if queue is not None and queue.name != spec.queue:
        raise UsageError(f"Job {job_id} waits in queue {spec.queue!r}, not {queue.name!r}.")
    job = volcano_job_manifest(
        job_id, spec, image=image, namespace=namespace, launch_once=launch_once
    )
    documents = [priority_class_manifest(spec.priority, PRIORITY_CLASSES[spec.priority])]
    if queue is not None:
        documents.append(volcano_queue_manifest(queue))
    documents.append(job)
    return yaml.safe_dump_all(documents, sort_keys=False)


def submit_manifest(
    manifest: Mapping[str, Any], namespace: str = "default", kubeconfig: str | None = None
) -> str:
    """Create one exported document (Volcano Job or Queue, PriorityClass) on the cluster.

    An existing Queue is updated to the manifest's spec; an existing PriorityClass is
    left as it is (its value cannot change).

    Returns:
        `kind/name` of what was created or updated.

    Raises:
        KubernetesUnavailableError: No cluster is configured or reachable.
        KubernetesRequestError: The API refused it (e.g. the Job exists, unknown queue).
        UsageError: The document is not one forgeml exports.
    """
    cluster = _Cluster(kubeconfig)
    try:
        return cluster.create(manifest, namespace)
    finally:
        cluster.close()


class KubernetesExecutor:
    """Runs each attempt as a Volcano Job (gang of `workers` pods) on a Kubernetes cluster.

    The forgeml service owns retries: a failed or evicted pod ends the Volcano Job, and
    the service starts the next attempt as a new Job (`<name>-<id>-a<attempt>`).
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        namespace: str = "default",
        kubeconfig: str | None = None,
        queue: str = "default",
        priority: str | None = None,
        grace_seconds: float = 60.0,
        cluster: _Cluster | None = None,
    ) -> None:
        """Configure the executor; the cluster is contacted on the first launch or poll.

        Args:
            image: Container image of the pods (forgeml and torch installed).
            namespace: Namespace of the Volcano Jobs.
            kubeconfig: Kubeconfig file; None: $KUBECONFIG, ~/.kube/config, or in-cluster.
            queue: Volcano queue of every attempt.
            priority: forgeml priority class of every attempt (None: the cluster default).
            grace_seconds: Pods' grace period between SIGTERM and SIGKILL.
            cluster: The API calls to use instead of a real cluster (tests).
        """
        self.image = image
        self.namespace = namespace
        self.queue = queue
        self.priority = priority
        self.grace_seconds = grace_seconds
        self._kubeconfig = kubeconfig
        self._cluster = cluster

    @property
    def cluster(self) -> _Cluster:
        if self._cluster is None:
            self._cluster = _Cluster(self._kubeconfig)
        return self._cluster

    def launch(self, request: LaunchRequest) -> AttemptHandle:
        """Create the attempt's Volcano Job; Volcano starts its pods when all fit."""
        workload = workload_from_request(
            request,
            image=self.image,
            queue=self.queue,
            priority=self.priority,
            grace_seconds=self.grace_seconds,
        )
        manifest = workload_manifest(workload, self.namespace)
        self.cluster.create(manifest, self.namespace)
        return AttemptHandle(self.name, f"{self.namespace}/{workload.name}")

    def poll(self, handle: AttemptHandle) -> AttemptStatus:
        """The Job's phase as an `AttemptStatus`; a failed pod's exit code when there is one."""
        namespace, job_name = _split(handle)
        job = self.cluster.get_job(namespace, job_name)
        if job is None:
            return AttemptStatus(
                running=False,
                exit_code=-signal.SIGKILL,
                reason=f"the Volcano job {namespace}/{job_name} no longer exists",
            )
        status = attempt_status(job)
        if status.running or status.exit_code == 0:
            return status
        failure = pod_failure(self.cluster.job_pods(namespace, job_name))
        if failure is None:
            return status
        exit_code, reason = failure
        return AttemptStatus(running=False, exit_code=exit_code, reason=reason, usage=status.usage)

    def terminate(self, handle: AttemptHandle, grace_seconds: float) -> None:
        """Delete the Job; its pods get SIGTERM, then SIGKILL after `grace_seconds`."""
        namespace, job_name = _split(handle)
        self.cluster.delete_job(namespace, job_name, grace_seconds)

    def adopt(self, handle: AttemptHandle) -> bool:
        """True when the Job still exists and has not reached a final phase."""
        namespace, job_name = _split(handle)
        job = self.cluster.get_job(namespace, job_name)
        return job is not None and attempt_status(job).running


def _split(handle: AttemptHandle) -> tuple[str, str]:
    namespace, _, job_name = handle.external_id.rpartition("/")
    return namespace or "default", job_name


# ---- the few API calls, with errors as one sentence


class _Cluster:
    """The Kubernetes API calls forgeml makes (thin; not testable without a cluster)."""

    def __init__(self, kubeconfig: str | None) -> None:
        self._api = _api_client(kubeconfig)
        self._host = self._api.configuration.host

    def close(self) -> None:
        self._api.close()

    def create(self, manifest: Mapping[str, Any], namespace: str) -> str:
        from kubernetes import client

        kind, name = manifest.get("kind"), manifest.get("metadata", {}).get("name")
        kind_of = (manifest.get("apiVersion"), kind)
        custom = client.CustomObjectsApi(self._api)
        with self._errors(f"create {kind} {name}", exists_ok=kind_of[0] != JOB_API_VERSION):
            if kind_of == (JOB_API_VERSION, "Job"):
                custom.create_namespaced_custom_object(
                    *_VOLCANO_JOBS[:2],
                    namespace,
                    _VOLCANO_JOBS[2],
                    dict(manifest),
                    _request_timeout=_REQUEST_TIMEOUT_S,
                )
            elif kind_of == (QUEUE_API_VERSION, "Queue"):
                self._apply_queue(custom, manifest)
            elif kind_of == (PRIORITY_CLASS_API_VERSION, "PriorityClass"):
                client.SchedulingV1Api(self._api).create_priority_class(
                    dict(manifest), _request_timeout=_REQUEST_TIMEOUT_S
                )
            else:
                raise UsageError(f"forgeml does not submit {kind_of[0]} {kind} documents.")
        return f"{kind}/{name}"

    def _apply_queue(self, custom: Any, manifest: Mapping[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            custom.create_cluster_custom_object(
                *_VOLCANO_QUEUES, dict(manifest), _request_timeout=_REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status != 409:
                raise
            custom.patch_cluster_custom_object(
                *_VOLCANO_QUEUES,
                manifest["metadata"]["name"],
                {"spec": manifest["spec"]},
                _request_timeout=_REQUEST_TIMEOUT_S,
            )

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes import client

        custom = client.CustomObjectsApi(self._api)
        with self._errors(f"read Volcano job {namespace}/{name}", missing_ok=True):
            job: dict[str, Any] = custom.get_namespaced_custom_object(
                *_VOLCANO_JOBS[:2],
                namespace,
                _VOLCANO_JOBS[2],
                name,
                _request_timeout=_REQUEST_TIMEOUT_S,
            )
            return job
        return None  # it does not exist

    def job_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        from kubernetes import client

        core = client.CoreV1Api(self._api)
        with self._errors(f"list the pods of {namespace}/{name}"):
            pods = core.list_namespaced_pod(
                namespace,
                label_selector=f"volcano.sh/job-name={name}",
                _request_timeout=_REQUEST_TIMEOUT_S,
            )
        return [self._api.sanitize_for_serialization(pod) for pod in pods.items]

    def delete_job(self, namespace: str, name: str, grace_seconds: float) -> None:
        from kubernetes import client

        grace = math.ceil(grace_seconds)
        with self._errors(f"delete Volcano job {namespace}/{name}", missing_ok=True):
            client.CustomObjectsApi(self._api).delete_namespaced_custom_object(
                *_VOLCANO_JOBS[:2],
                namespace,
                _VOLCANO_JOBS[2],
                name,
                grace_period_seconds=grace,
                propagation_policy="Background",
                _request_timeout=_REQUEST_TIMEOUT_S,
            )
        # the pods keep their own grace period unless told a shorter one
        with self._errors(f"stop the pods of {namespace}/{name}", missing_ok=True):
            client.CoreV1Api(self._api).delete_collection_namespaced_pod(
                namespace,
                label_selector=f"volcano.sh/job-name={name}",
                grace_period_seconds=grace,
                _request_timeout=_REQUEST_TIMEOUT_S,
            )

    @contextmanager
    def _errors(
        self, action: str, *, missing_ok: bool = False, exists_ok: bool = False
    ) -> Iterator[None]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as error:
            if (missing_ok and error.status == 404) or (exists_ok and error.status == 409):
                return
            raise KubernetesRequestError(_refusal(action, error)) from error
        except HTTPError as error:
            raise KubernetesUnavailableError(
                f"The Kubernetes API server at {self._host} is unreachable ({error})."
            ) from error


def _refusal(action: str, error: Any) -> str:
    try:
        message = json.loads(error.body)["message"]
    except (TypeError, ValueError, KeyError):
        message = error.reason
    if error.status == 404 and action.startswith("create Job"):
        return (
            f"Could not {action}: the cluster has no {JOB_API_VERSION} jobs API "
            f"(is Volcano installed?): {message}."
        )
    return f"Kubernetes refused to {action} (HTTP {error.status}): {message}."


def _api_client(kubeconfig: str | None) -> Any:
    """An ApiClient for `kubeconfig`, $KUBECONFIG, ~/.kube/config, or the pod's service account."""
    try:
        from kubernetes import client, config
    except ImportError as error:
        raise KubernetesUnavailableError(
            "Kubernetes support is not installed: pip install 'forgeml[kubernetes]'."
        ) from error
    # read $KUBECONFIG now: the client reads it once, when it is imported
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    has_file = any(Path(part).expanduser().is_file() for part in path.split(os.pathsep))
    configuration = client.Configuration()
    try:
        if in_cluster and not has_file:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=path, client_configuration=configuration)
    except (config.ConfigException, OSError, ValueError) as error:
        where = "no file there" if not has_file else str(error).rstrip(".")
        raise KubernetesUnavailableError(
            f"No Kubernetes cluster is configured: kubeconfig {path} is unusable ({where}); "
            "set KUBECONFIG or --kubeconfig, or run inside a cluster."
        ) from error
    configuration.retries = 1  # an unreachable server is reported at once, not after backoff
    return client.ApiClient(configuration)
