from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from forgeml.scheduler.executors import ray as ray_executor
from forgeml.scheduler.executors._volcano import workload_from_request, workload_manifest
from forgeml.scheduler.executors.base import DemandReporter, Gang, LaunchRequest
from forgeml.scheduler.executors.kubernetes import KubernetesExecutor
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.executors.ray import RayExecutor
from forgeml.scheduler.jobs import cancel, submit
from forgeml.scheduler.model import NodeState, Resources
from forgeml.scheduler.service import Scheduler
from tests._wait import Gate
from tests.scheduler.conftest import python_job, state_of, wait_for

ray = pytest.importorskip("ray")
GB = 1e9
BIG = [NodeState("big", Resources(64, 8, 512), Resources(64, 8, 512))]
SMALL = [NodeState("small", Resources(2, 0, 4), Resources(2, 0, 4))]


@pytest.fixture
def requested(monkeypatch: pytest.MonkeyPatch) -> list[list[dict[str, float]]]:
    """The bundles of every `ray.autoscaler.sdk.request_resources` call.

    The SDK function itself runs (it checks each bundle's keys and values); what it hands
    on to the cluster is intercepted, as is the executor's connection: there is no cluster.
    """
    calls: list[list[dict[str, float]]] = []

    def send(num_cpus: Any, bundles: Any, label_selectors: Any = None) -> None:
        assert num_cpus is None and label_selectors is None
        calls.append(list(bundles or []))

    from ray.autoscaler._private import commands

    monkeypatch.setattr(commands, "request_resources", send)
    monkeypatch.setattr(ray_executor, "_connect", lambda address, token_file=None: ray)
    return calls


def test_the_sdk_refuses_a_bundle_shape_ray_cannot_read(
    requested: list[list[dict[str, float]]],
) -> None:
    # the check the intercepted calls below pass: values must be numbers, not bools
    with pytest.raises(TypeError):
        ray.autoscaler.sdk.request_resources(bundles=[{"CPU": True}])
    assert requested == []


def test_ray_asks_its_autoscaler_for_one_bundle_per_shape(
    requested: list[list[dict[str, float]]],
) -> None:
    executor = RayExecutor("127.0.0.1:1")
    assert isinstance(executor, DemandReporter)
    executor.report_demand(
        [
            Gang("a", (Resources(4, 1, 16),) * 2),
            Gang("b", (Resources(0.5, 0, 0),)),
            Gang("c", (Resources(0, 0, 0),)),
        ]
    )
    executor.report_demand([])
    assert requested == [
        [
            {"CPU": 4.0, "GPU": 1.0, "memory": 16 * GB},
            {"CPU": 4.0, "GPU": 1.0, "memory": 16 * GB},
            {"CPU": 0.5},
            {"CPU": 0.001},  # Ray refuses an empty bundle, as in `launch`
        ],
        [],  # nothing waits: the request is withdrawn
    ]


def test_the_scheduler_reports_the_pending_gangs_shapes_once_and_withdraws_them(
    sched_workspace: Workspace, requested: list[list[dict[str, float]]]
) -> None:
    gang = python_job("pass", workers=2, resources={"cpus": 4, "gpus": 1, "memory_gb": 16})
    single = python_job("pass", resources={"cpus": 3, "memory_gb": 2})
    gang_id = submit(sched_workspace, gang, nodes=BIG, executor="ray").id
    single_id = submit(sched_workspace, single, nodes=BIG, executor="ray").id
    scheduler = Scheduler(sched_workspace, RayExecutor("127.0.0.1:1"), nodes=SMALL)
    scheduler.cycle()
    scheduler.cycle()  # the same demand: no second call
    assert state_of(sched_workspace, gang_id) == state_of(sched_workspace, single_id) == "PENDING"
    shapes = sorted(requested[0], key=lambda bundle: bundle["CPU"])
    assert requested[1:] == []
    assert shapes == [
        {"CPU": 3.0, "memory": 2 * GB},
        {"CPU": 4.0, "GPU": 1.0, "memory": 16 * GB},
        {"CPU": 4.0, "GPU": 1.0, "memory": 16 * GB},
    ]
    cancel(sched_workspace, gang_id)
    scheduler.cycle()
    assert requested[-1] == [{"CPU": 3.0, "memory": 2 * GB}]
    cancel(sched_workspace, single_id)
    scheduler.cycle()
    assert requested[-1] == []
    assert len(requested) == 3


class RecordingLocal(LocalExecutor):
    """The local executor, with the demand it is told recorded."""

    def __init__(self) -> None:
        super().__init__(cpus=[0, 1], gpus=0)
        self.reports: list[list[Gang]] = []

    def report_demand(self, gangs: list[Gang]) -> None:
        self.reports.append(gangs)


def test_the_demand_counts_running_gangs_beside_the_waiting_ones(
    sched_workspace: Workspace, tmp_path: Path
) -> None:
    # Ray counts running work against a request: the ask holds both, or it asks for nothing
    gate = Gate(tmp_path / "gate")
    executor = RecordingLocal()
    node = [NodeState("local", Resources(2, 0, 4), Resources(2, 0, 4))]
    scheduler = Scheduler(sched_workspace, executor, nodes=node)
    try:
        running = submit(
            sched_workspace,
            python_job(gate.wait_code, resources={"cpus": 2, "memory_gb": 1}),
            nodes=node,
        ).id
        wait_for(lambda: state_of(sched_workspace, running) == "RUNNING", step=scheduler.cycle)
        assert executor.reports == [[]]  # nothing waits
        waiting = submit(
            sched_workspace, python_job("pass", resources={"cpus": 1, "memory_gb": 1}), nodes=node
        ).id
        scheduler.cycle()
        assert executor.reports[-1] == [
            Gang(running, (Resources(2, 0, 1),)),
            Gang(waiting, (Resources(1, 0, 1),)),
        ]
    finally:
        gate.close()
    wait_for(lambda: state_of(sched_workspace, waiting) == "SUCCEEDED", step=scheduler.cycle)
    assert executor.reports[-1] == []


@pytest.mark.parametrize("launch_once", [False, True])
def test_kubernetes_pods_the_executor_submits_carry_their_requests(
    tmp_path: Path, launch_once: bool
) -> None:
    # no report on Kubernetes: the cluster autoscaler reads a pending pod's requests itself
    assert not isinstance(KubernetesExecutor.__new__(KubernetesExecutor), DemandReporter)
    request = LaunchRequest(
        job_id="0123456789abcdef", attempt=1, command=["python", "-c", "pass"], env={},
        workers=3, resources=Resources(1.5, 1, 6), nodes=("a", "b", "c"),
        log_path=tmp_path / "log", launch_once=launch_once,
    )  # fmt: skip
    workload = workload_from_request(
        request, image="img", queue="default", priority=None, grace_seconds=30
    )
    manifest = workload_manifest(workload, "ml")
    pods = [
        (task["replicas"], task["template"]["spec"]["containers"][0]["resources"]["requests"])
        for task in manifest["spec"]["tasks"]
    ]
    if launch_once:  # one pod starts all three workers: it asks for all three
        assert pods == [(1, {"cpu": "4500m", "memory": "18Gi", "nvidia.com/gpu": "3"})]
    else:
        assert sum(count for count, _ in pods) == 3
        assert {str(r) for _, r in pods} == {
            str({"cpu": "1500m", "memory": "6Gi", "nvidia.com/gpu": "1"})
        }
