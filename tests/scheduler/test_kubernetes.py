from __future__ import annotations

import copy
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from forgeml.core.errors import UsageError
from forgeml.scheduler.executors import _volcano_status
from forgeml.scheduler.executors._volcano import volcano_job_name
from forgeml.scheduler.executors.base import AttemptHandle, LaunchRequest
from forgeml.scheduler.executors.kubernetes import (
    KubernetesExecutor,
    KubernetesUnavailableError,
    attempt_status,
    export_job,
    priority_class_manifests,
    submit_manifest,
    volcano_job_manifest,
    volcano_queue_manifest,
)
from forgeml.scheduler.model import (
    PRIORITY_CLASSES,
    JobSpec,
    QueueSpec,
    ResourceRequest,
    Resources,
)

JOB_ID = "0123456789abcdef0123456789abcdef"
IMAGE = "registry.example.com/forgeml:0.1"
# Volcano's admission webhook (pkg/webhooks/admission/jobs/validate) accepts these
VALID_EVENTS = {"*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted"}
VALID_ACTIONS = {"AbortJob", "RestartJob", "RestartTask", "TerminateJob", "CompleteJob"}
DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


def _closed(schema: Any) -> Any:
    """The schema with unknown fields rejected where it lists the fields (the API server
    would silently prune them, so a typo would vanish instead of failing)."""
    if isinstance(schema, dict):
        schema = {key: _closed(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


def _validator(shared: Path, filename: str) -> jsonschema.Draft4Validator:
    path = shared / "schemas" / "volcano" / filename
    if not path.is_file():
        pytest.skip(f"Volcano CRD schema {path} is missing")
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    return jsonschema.Draft4Validator(_closed(version["schema"]["openAPIV3Schema"]))


@pytest.fixture(scope="module")
def job_schema(shared: Path) -> jsonschema.Draft4Validator:
    return _validator(shared, "batch.volcano.sh_jobs.yaml")


@pytest.fixture(scope="module")
def queue_schema(shared: Path) -> jsonschema.Draft4Validator:
    return _validator(shared, "scheduling.volcano.sh_queues.yaml")


def _spec(workers: int = 1, gpus: int = 0, **changes: Any) -> JobSpec:
    fields: dict[str, Any] = {
        "name": "Train SST-2",
        "kind": "command",
        "command": ["python", "train.py", "--epochs", "3"],
        "resources": ResourceRequest(cpus=2, gpus=gpus, memory_gb=8),
        "workers": workers,
        "queue": "research",
        "priority": "high",
        "max_retries": 2,
        "owner": "alice@example.com",
        "env": {"MLFLOW_TRACKING_URI": "http://mlflow:5000"},
    }
    return JobSpec(**{**fields, **changes})


def _expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion of command and env (third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and text.find(")", i) != -1:
            end = text.find(")", i)
            out.append(env.get(text[i + 2 : end], text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _pods(manifest: dict[str, Any]) -> list[tuple[str, list[str], dict[str, str]]]:
    """(pod name, command, env) of every pod, as the kubelet starts it."""
    pods = []
    for task in manifest["spec"]["tasks"]:
        (container,) = task["template"]["spec"]["containers"]
        env = {item["name"]: _expand(item["value"], {}) for item in container["env"]}
        command = [_expand(part, env) for part in container["command"]]
        for index in range(task["replicas"]):
            pods.append((f"{manifest['metadata']['name']}-{task['name']}-{index}", command, env))
    return pods


CASES = [(1, 0), (2, 0), (4, 0), (1, 1), (2, 1), (4, 2)]


@pytest.mark.parametrize(("workers", "gpus"), CASES)
def test_job_manifest_is_valid_against_volcano_crd(
    job_schema: jsonschema.Draft4Validator, workers: int, gpus: int
) -> None:
    manifest = volcano_job_manifest(JOB_ID, _spec(workers, gpus), image=IMAGE, namespace="ml")
    job_schema.validate(manifest)

    spec = manifest["spec"]
    assert manifest["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert manifest["kind"] == "Job"
    assert manifest["metadata"]["namespace"] == "ml"
    assert spec["minAvailable"] == workers == sum(task["replicas"] for task in spec["tasks"])
    assert spec["schedulerName"] == "volcano"
    assert spec["queue"] == "research"
    assert spec["priorityClassName"] == "forgeml-high"
    assert spec["maxRetry"] == 3  # the first run and 2 restarts
    assert {"svc", "env"} <= set(spec["plugins"])
    labels = manifest["metadata"]["labels"]
    assert labels["forgeml.io/job-id"] == JOB_ID
    assert labels["forgeml.io/owner"] == "alice-example.com"
    # what Volcano's admission webhook checks beyond the schema
    names = [task["name"] for task in spec["tasks"]]
    assert len(set(names)) == len(names)
    for name, *_ in _pods(manifest):
        assert len(name) <= 63
        assert jsonschema.Draft4Validator({"pattern": DNS_LABEL}).is_valid(name)
    policies = spec["policies"] + [p for task in spec["tasks"] for p in task.get("policies", [])]
    assert all(p["event"] in VALID_EVENTS and p["action"] in VALID_ACTIONS for p in policies)


@pytest.mark.parametrize(("workers", "gpus"), CASES)
def test_every_pod_requests_one_workers_resources(workers: int, gpus: int) -> None:
    manifest = volcano_job_manifest(JOB_ID, _spec(workers, gpus), image=IMAGE)
    expected = {"cpu": "2", "memory": "8Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    for task in manifest["spec"]["tasks"]:
        pod = task["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == IMAGE
        assert container["resources"] == {"requests": expected, "limits": expected}
        assert pod["restartPolicy"] == "Never"


@pytest.mark.parametrize("workers", [2, 4])
def test_worker_pods_run_the_command_under_torchrun_with_one_rendezvous(workers: int) -> None:
    run = pytest.importorskip("torch.distributed.run")
    from torch.distributed.elastic.rendezvous import RendezvousParameters

    spec = _spec(workers)
    manifest = volcano_job_manifest(JOB_ID, spec, image=IMAGE)
    name = manifest["metadata"]["name"]
    pods = _pods(manifest)
    assert [pod for pod, *_ in pods] == [f"{name}-master-0"] + [
        f"{name}-worker-{i}" for i in range(workers - 1)
    ]
    hosts = []
    for _pod, command, env in pods:
        assert command[0] == "torchrun"
        assert env["FORGEML_JOB_ID"] == JOB_ID
        assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
        config, program, args = run.config_from_args(run.get_args_parser().parse_args(command[1:]))
        assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (workers, workers, 1)
        assert config.rdzv_backend == "c10d"
        # the master pod's DNS name from the svc plugin: <pod>.<job>
        assert config.rdzv_endpoint == f"{name}-master-0.{name}:29400"
        assert config.run_id == JOB_ID
        assert config.max_restarts == 0
        assert (program, args) == (spec.command[0], spec.command[1:])
        parameters = RendezvousParameters(
            config.rdzv_backend,
            config.rdzv_endpoint,
            config.run_id,
            workers,
            workers,
            **config.rdzv_configs,
        )
        hosts.append(parameters.get_as_bool("is_host"))
    assert hosts == [True] + [False] * (workers - 1)  # only the master hosts the store
    master = manifest["spec"]["tasks"][0]
    assert master["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 29400
    assert master["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]


def test_one_worker_runs_the_command_itself() -> None:
    spec = _spec(1)
    manifest = volcano_job_manifest(JOB_ID, spec, image=IMAGE)
    ((_pod, command, _env),) = _pods(manifest)
    assert command == spec.command


def test_launch_once_is_one_pod_with_every_workers_resources(
    job_schema: jsonschema.Draft4Validator,
) -> None:
    spec = _spec(4, gpus=1, command=["forgeml", "train", "config.yaml"])
    manifest = volcano_job_manifest(JOB_ID, spec, image=IMAGE, launch_once=True)
    job_schema.validate(manifest)
    assert manifest["spec"]["minAvailable"] == 1
    ((_pod, command, _env),) = _pods(manifest)
    assert command == ["forgeml", "train", "config.yaml"]
    resources = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}


@pytest.mark.parametrize(
    ("request_", "quantities"),
    [
        (ResourceRequest(cpus=0.5, gpus=0, memory_gb=1.5), {"cpu": "500m", "memory": "1536Mi"}),
        (ResourceRequest(cpus=0, gpus=1, memory_gb=0), {"nvidia.com/gpu": "1"}),
        (ResourceRequest(cpus=16, gpus=8, memory_gb=512), {"cpu": "16", "memory": "512Gi"}),
    ],
)
def test_resource_quantities(request_: ResourceRequest, quantities: dict[str, str]) -> None:
    manifest = volcano_job_manifest(JOB_ID, _spec(resources=request_), image=IMAGE)
    requests = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    assert quantities.items() <= requests["requests"].items()


def test_timeout_and_kubernetes_variable_syntax_are_kept_literal(
    job_schema: jsonschema.Draft4Validator,
) -> None:
    spec = _spec(1, command=["sh", "-c", "echo $(HOME) $$ $PATH"], timeout_seconds=90.5)
    manifest = volcano_job_manifest(JOB_ID, spec, image=IMAGE)
    job_schema.validate(manifest)
    assert manifest["spec"]["tasks"][0]["template"]["spec"]["activeDeadlineSeconds"] == 91
    ((_pod, command, _env),) = _pods(manifest)
    assert command == spec.command


@pytest.mark.parametrize(
    "name", ["Train SST-2", "123 numbers first", "___", "x" * 200, "Ünïcode/job:v2"]
)
def test_job_names_are_dns_labels_short_enough_for_pod_names(name: str) -> None:
    job_name = volcano_job_name(name, JOB_ID, attempt=12)
    assert jsonschema.Draft4Validator({"pattern": DNS_LABEL}).is_valid(job_name)
    assert len(f"{job_name}-worker-999") <= 63
    assert job_name.endswith("-01234567-a12")


def _break_minavailable(job: dict[str, Any]) -> None:
    job["spec"]["minAvailable"] = "2"


def _break_typo(job: dict[str, Any]) -> None:
    job["spec"]["minAvaliable"] = job["spec"].pop("minAvailable")


def _break_event(job: dict[str, Any]) -> None:
    job["spec"]["policies"][0]["event"] = "PodExploded"


def _break_container(job: dict[str, Any]) -> None:
    del job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["name"]


def _break_quantity(job: dict[str, Any]) -> None:
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["memory"] = "8 GB"


@pytest.mark.parametrize(
    "breaks", [_break_minavailable, _break_typo, _break_event, _break_container, _break_quantity]
)
def test_broken_job_manifest_fails_validation(
    job_schema: jsonschema.Draft4Validator, breaks: Any
) -> None:
    manifest = volcano_job_manifest(JOB_ID, _spec(2), image=IMAGE)
    job_schema.validate(manifest)
    broken = copy.deepcopy(manifest)
    breaks(broken)
    with pytest.raises(jsonschema.ValidationError):
        job_schema.validate(broken)


def test_queue_manifest_is_valid_against_volcano_crd(
    queue_schema: jsonschema.Draft4Validator,
) -> None:
    queue = QueueSpec(
        name="Research_Team",
        weight=3,
        capability=ResourceRequest(cpus=64, gpus=0, memory_gb=256),
        reclaimable=False,
    )
    manifest = volcano_queue_manifest(queue)
    queue_schema.validate(manifest)
    assert manifest["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert manifest["metadata"]["name"] == "research-team"
    # a cap of 0 GPUs stays: leaving it out would mean no cap
    assert manifest["spec"] == {
        "weight": 3,
        "reclaimable": False,
        "capability": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "0"},
    }
    unbounded = volcano_queue_manifest(QueueSpec(name="default"))
    queue_schema.validate(unbounded)
    assert "capability" not in unbounded["spec"]
    broken = copy.deepcopy(manifest)
    broken["spec"]["weight"] = "heavy"
    with pytest.raises(jsonschema.ValidationError):
        queue_schema.validate(broken)


def test_priority_classes_match_forgeml_priorities() -> None:
    manifests = priority_class_manifests()
    assert {m["metadata"]["name"]: m["value"] for m in manifests} == {
        f"forgeml-{name}": value for name, value in PRIORITY_CLASSES.items()
    }
    assert all(m["apiVersion"] == "scheduling.k8s.io/v1" for m in manifests)
    assert not any(m["globalDefault"] for m in manifests)


def test_export_job_yaml_has_priority_class_queue_and_job(
    job_schema: jsonschema.Draft4Validator, queue_schema: jsonschema.Draft4Validator
) -> None:
    spec = _spec(2, gpus=1)
    text = export_job(spec, JOB_ID, image=IMAGE, queue=QueueSpec(name="research", weight=2))
    priority, queue, job = yaml.safe_load_all(text)
    assert priority["metadata"]["name"] == job["spec"]["priorityClassName"] == "forgeml-high"
    assert priority["value"] == PRIORITY_CLASSES["high"]
    queue_schema.validate(queue)
    job_schema.validate(job)
    assert queue["metadata"]["name"] == job["spec"]["queue"]
    assert job == volcano_job_manifest(JOB_ID, spec, image=IMAGE)


def _job_object(phase: str | None, **state: str) -> dict[str, Any]:
    manifest = volcano_job_manifest(JOB_ID, _spec(2, gpus=1), image=IMAGE)
    if phase is not None:
        manifest["status"] = {
            "state": {"phase": phase, "lastTransitionTime": "2026-01-01T00:10:00Z", **state},
            "conditions": [
                {"status": "Pending", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"status": "Running", "lastTransitionTime": "2026-01-01T00:01:00Z"},
            ],
        }
    return manifest


@pytest.mark.parametrize(
    ("phase", "running", "exit_code"),
    [
        (None, True, None),  # just created: no status yet
        ("Pending", True, None),  # waiting for the whole gang
        ("Running", True, None),
        ("Restarting", True, None),
        ("Completing", True, None),
        ("Aborting", True, None),
        ("Terminating", True, None),
        ("Completed", False, 0),
        ("Failed", False, 1),
        ("Aborted", False, -15),
        ("Terminated", False, -15),
    ],
)
def test_volcano_phase_maps_to_attempt_status(
    phase: str | None, running: bool, exit_code: int | None
) -> None:
    status = attempt_status(_job_object(phase), now=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    assert (status.running, status.exit_code) == (running, exit_code)
    assert (status.reason is None) == (exit_code in (None, 0))


def test_failed_phase_carries_volcanos_reason() -> None:
    status = attempt_status(_job_object("Failed", reason="PodFailed", message="retry limit"))
    assert status.reason == "the Volcano job failed (PodFailed: retry limit)"


def test_usage_is_the_allocation_over_running_time() -> None:
    running = attempt_status(_job_object("Running"), now=datetime(2026, 1, 1, 0, 3, tzinfo=UTC))
    assert running.usage.wall_seconds == 120.0
    assert running.usage.cpu_seconds == 2 * 2 * 120.0  # 2 workers x 2 CPUs
    assert running.usage.gpu_seconds == 2 * 120.0
    assert running.usage.memory_gb_seconds == 16 * 120.0
    done = attempt_status(_job_object("Completed"), now=datetime(2027, 1, 1, tzinfo=UTC))
    assert done.usage.wall_seconds == 540.0  # until the final phase, not until now
    waiting = _job_object("Pending")
    waiting["status"]["conditions"] = [waiting["status"]["conditions"][0]]  # never ran
    assert attempt_status(waiting).usage.wall_seconds == 0.0


def test_pod_failure_reports_oom_and_exit_codes() -> None:
    def pod(name: str, code: int, reason: str) -> dict[str, Any]:
        terminated = {"exitCode": code, "reason": reason}
        return {
            "metadata": {"name": name},
            "status": {"containerStatuses": [{"state": {"terminated": terminated}}]},
        }

    assert _volcano_status.pod_failure([pod("a", 0, "Completed")]) is None
    code, reason = _volcano_status.pod_failure(
        [pod("a", 0, "Completed"), pod("b", 137, "OOMKilled")]
    ) or (0, "")
    assert code == 137
    assert "exceeded its memory limit" in reason
    assert _volcano_status.pod_failure([pod("c", 3, "Error")]) == (
        3,
        "pod c exited with code 3 (Error)",
    )


class _RecordingCluster:
    """Stands in for the API server: keeps what was created, returns it with a status."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.deleted: list[tuple[str, float]] = []

    def create(self, manifest: dict[str, Any], namespace: str) -> str:
        self.jobs[f"{namespace}/{manifest['metadata']['name']}"] = copy.deepcopy(manifest)
        return f"Job/{manifest['metadata']['name']}"

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.jobs.get(f"{namespace}/{name}")

    def job_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return []

    def delete_job(self, namespace: str, name: str, grace_seconds: float) -> None:
        self.deleted.append((f"{namespace}/{name}", grace_seconds))
        self.jobs.pop(f"{namespace}/{name}", None)


def test_executor_launches_one_volcano_job_per_attempt(
    job_schema: jsonschema.Draft4Validator, tmp_path: Path
) -> None:
    cluster = _RecordingCluster()
    executor = KubernetesExecutor(
        image=IMAGE,
        namespace="ml",
        queue="research",
        priority="normal",
        cluster=cluster,  # type: ignore[arg-type]
    )
    request = LaunchRequest(
        job_id=JOB_ID,
        attempt=2,
        command=["/usr/bin/python", "train.py"],
        env={"FORGEML_JOB_ID": JOB_ID},
        workers=2,
        resources=Resources(1.0, 1, 4.0),
        nodes=("n1", "n2"),
        log_path=tmp_path / "2.log",
    )
    handle = executor.launch(request)
    assert handle == AttemptHandle("kubernetes", "ml/python-01234567-a2")
    manifest = cluster.jobs[handle.external_id]
    job_schema.validate(manifest)
    assert manifest["spec"]["minAvailable"] == 2
    assert manifest["spec"]["priorityClassName"] == "forgeml-normal"
    # the service retries: the first failed or evicted pod ends the Volcano job
    assert {p["action"] for p in manifest["spec"]["policies"]} == {"TerminateJob"}
    assert executor.poll(handle).running
    assert executor.adopt(handle)

    manifest["status"] = {"state": {"phase": "Completed"}}
    assert (executor.poll(handle).running, executor.poll(handle).exit_code) == (False, 0)
    assert not executor.adopt(handle)
    executor.terminate(handle, grace_seconds=30)
    assert cluster.deleted == [("ml/python-01234567-a2", 30)]
    vanished = executor.poll(handle)
    assert not vanished.running
    assert "no longer exists" in (vanished.reason or "")


def test_no_kubeconfig_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(KubernetesUnavailableError, match="No Kubernetes cluster is configured"):
        submit_manifest(volcano_job_manifest(JOB_ID, _spec(), image=IMAGE))


@pytest.fixture
def unreachable_kubeconfig(tmp_path: Path) -> str:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "config"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    kubeconfig.write_text(yaml.safe_dump(config))
    return str(kubeconfig)


def test_unreachable_api_server_is_one_clear_error(unreachable_kubeconfig: str) -> None:
    manifest = volcano_job_manifest(JOB_ID, _spec(), image=IMAGE)
    with pytest.raises(KubernetesUnavailableError, match=r"API server at .* is unreachable"):
        submit_manifest(manifest, kubeconfig=unreachable_kubeconfig)


def test_only_exported_kinds_are_submitted(unreachable_kubeconfig: str) -> None:
    with pytest.raises(UsageError, match="does not submit v1 Pod"):
        submit_manifest({"apiVersion": "v1", "kind": "Pod"}, kubeconfig=unreachable_kubeconfig)
