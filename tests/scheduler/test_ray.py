from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from forgeml.scheduler.executors.base import AttemptHandle, AttemptStatus, LaunchRequest
from forgeml.scheduler.executors.ray import RayExecutor, RayUnavailableError
from forgeml.scheduler.model import Resources
from tests._wait import Gate, wait_until
from tests.train.conftest import SRC

pytest.importorskip("ray")

# a real Ray head takes several seconds to start and each worker actor one or two more
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RAY_CLI = Path(sys.executable).parent / "ray"

ALL_REDUCE = """
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(
    f"rank {dist.get_rank()} of {dist.get_world_size()} sum {value.item():g}"
    f" master {os.environ['MASTER_ADDR']} local_rank {os.environ['LOCAL_RANK']}",
    flush=True,
)
dist.destroy_process_group()
"""

# rank 0 behaves like the trainer (checkpoint on SIGTERM, exit 143); rank 1 just dies of it
SLEEPER = """
import os, signal, sys, time

def checkpoint(signum, frame):
    print("checkpoint written", flush=True)
    sys.exit(143)

if os.environ["RANK"] == "0":
    signal.signal(signal.SIGTERM, checkpoint)
print("started", flush=True)
time.sleep(600)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _head_port() -> int:
    """A free port for the GCS that is none of Ray's default ports for other components."""
    reserved = {6379, 8076, 8265, 10001, 52365, 52366, *range(10002, 20000)}
    while (port := _free_port()) in reserved:
        pass
    return port


def _wait_for_head(head: subprocess.Popen[bytes], log: Path) -> None:
    def started() -> bool:
        text = log.read_text(errors="replace") if log.exists() else ""
        if head.poll() is not None and "Ray runtime started" not in text:
            pytest.fail(f"`ray start --head` exited with {head.returncode}:\n{text[-3000:]}")
        return "Ray runtime started" in text

    wait_until(started, 180, "the Ray head starting", interval=0.5)


def _stop_head(head: subprocess.Popen[bytes]) -> None:
    """Stop only the processes of this head (`ray stop` would stop every Ray on the machine)."""
    try:
        tree = psutil.Process(head.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    head.terminate()  # `ray start --block` stops its raylet, GCS and workers on SIGTERM
    try:
        head.wait(60)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait()
    _, alive = psutil.wait_procs(tree, timeout=30)
    for process in alive:
        process.kill()
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A real single-node Ray head on 127.0.0.1 (2 CPUs) with token authentication on,
    stopped with everything it started.

    Token authentication is what `ray start` turns on by itself once any local `ray.init()`
    has written `~/.ray/auth_token` (CVE-2023-48022, ShadowRay: a Ray cluster without it runs
    any job anyone submits). This process knows only where the token is, as a user's shell
    would, not `RAY_AUTH_MODE`: the executor must authenticate by itself.
    """
    if not RAY_CLI.exists():
        pytest.skip(f"no `ray` command next to {sys.executable}")
    temp = Path(tempfile.mkdtemp(prefix="fml-ray-"))  # short: Ray puts unix sockets in it
    token = temp / "auth_token"
    token.write_text(secrets.token_hex(32))
    port = _head_port()
    log = temp / "head.log"
    command = [
        str(RAY_CLI), "start", "--head", "--block",
        "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2", "--num-gpus=0",
        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
    ]  # fmt: skip
    auth = {"RAY_AUTH_TOKEN_PATH": str(token)}
    env = os.environ | auth | {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    with open(log, "wb") as out:
        head = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_AUTH_MODE", raising=False)
        patch.delenv("RAY_AUTH_TOKEN", raising=False)
        patch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
        try:
            _wait_for_head(head, log)
            yield f"127.0.0.1:{port}"
        finally:
            import ray

            ray.shutdown()
            _stop_head(head)
            subprocess.run(["rm", "-rf", str(temp)], check=False)


@pytest.fixture
def executor(ray_address: str) -> RayExecutor:
    return RayExecutor(ray_address)


def _request(
    tmp_path: Path,
    script: str,
    *,
    workers: int = 2,
    cpus: float = 0.5,
    memory_gb: float = 2.0,
    **options: object,
) -> LaunchRequest:
    path = tmp_path / f"job_{uuid.uuid4().hex[:6]}.py"
    path.write_text(textwrap.dedent(script))
    return LaunchRequest(
        job_id=uuid.uuid4().hex,
        attempt=1,
        command=[sys.executable, str(path)],
        env={"FORGEML_JOB_ID": "test", "PYTHONUNBUFFERED": "1"},
        workers=workers,
        resources=Resources(cpus=cpus, gpus=0, memory_gb=memory_gb),
        nodes=("node",) * workers,
        log_path=tmp_path / "logs" / f"{path.stem}.log",
        **options,  # type: ignore[arg-type]
    )


def _wait(executor: RayExecutor, handle: AttemptHandle) -> AttemptStatus:
    seen: list[AttemptStatus] = []

    def ended() -> bool:
        seen.append(executor.poll(handle))
        return not seen[-1].running

    try:
        wait_until(ended, 120, f"attempt {handle.external_id} ending", interval=0.2)
    except AssertionError:
        executor.terminate(handle, 0.0)
        raise
    return seen[-1]


def _wait_for_output(
    executor: RayExecutor, handle: AttemptHandle, log: Path, count: int, text: str
) -> None:
    def printed() -> bool:
        assert executor.poll(handle).running
        return log.read_text().count(text) >= count

    wait_until(printed, 120, f"'{text}' {count} times in {log}", interval=0.2)


def _refused(handle: AttemptHandle) -> bool:
    """Whether Ray has tried to place the attempt's placement group and found no room."""
    import ray

    group = ray.util.get_placement_group(handle.external_id.rpartition(":")[0])
    table = ray.util.placement_group_table(group)
    return table["stats"]["scheduling_state"] in ("NO_RESOURCES", "INFEASIBLE")


def test_two_worker_gang_job_all_reduces_over_gloo(executor: RayExecutor, tmp_path: Path) -> None:
    request = _request(tmp_path, ALL_REDUCE)
    handle = executor.launch(request)

    status = _wait(executor, handle)

    import ray

    log = request.log_path.read_text()
    assert (status.exit_code, status.reason) == (0, None), log
    # Ray replaces a loopback --node-ip-address with the machine's routable address
    (node,) = ray.nodes()
    master = node["NodeManagerAddress"]
    assert f"[rank 0] rank 0 of 2 sum 3 master {master} local_rank 0" in log
    assert f"[rank 1] rank 1 of 2 sum 3 master {master} local_rank 1" in log
    assert status.usage.cpu_seconds > 0
    assert status.usage.peak_memory_gb > 0
    assert executor.poll(handle) == status  # ended attempts keep their status here


def test_ended_attempt_gives_its_placement_group_and_actors_back(
    executor: RayExecutor, tmp_path: Path
) -> None:
    import ray

    handle = executor.launch(_request(tmp_path, "print('hello')", workers=1))

    status = _wait(executor, handle)

    assert status.exit_code == 0
    name = handle.external_id.rpartition(":")[0]
    with pytest.raises(ValueError):
        ray.get_actor(f"{name}-rank0", namespace="forgeml")
    assert not RayExecutor(executor.address).adopt(handle)
    assert [node.capacity.cpus for node in executor.nodes()] == [2.0]


def test_failing_worker_fails_the_gang_with_its_rank(executor: RayExecutor, tmp_path: Path) -> None:
    script = """
    import os, sys, time
    if os.environ["RANK"] == "1":
        print("giving up", flush=True)
        sys.exit(3)
    time.sleep(600)
    """
    request = _request(tmp_path, script)
    handle = executor.launch(request)

    status = _wait(executor, handle)

    assert status.exit_code == 3
    assert status.reason == "worker rank 1 exited with code 3"
    assert "[rank 1] giving up" in request.log_path.read_text()


def test_terminate_sigterms_each_worker_then_the_attempt_ends(
    executor: RayExecutor, tmp_path: Path
) -> None:
    request = _request(tmp_path, SLEEPER)
    handle = executor.launch(request)
    _wait_for_output(executor, handle, request.log_path, 2, "started")

    # a grace longer than `_wait` waits: SIGTERM ended both, the executor saw it at once
    executor.terminate(handle, grace_seconds=600.0)
    status = _wait(executor, handle)

    assert (status.exit_code, status.reason) == (143, None)  # rank 0's checkpoint exit
    assert "[rank 0] checkpoint written" in request.log_path.read_text()


def test_terminate_kills_a_worker_that_ignores_sigterm_after_the_grace(
    executor: RayExecutor, tmp_path: Path
) -> None:
    script = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("started", flush=True)
    time.sleep(600)
    """
    request = _request(tmp_path, script, workers=1)
    handle = executor.launch(request)
    _wait_for_output(executor, handle, request.log_path, 1, "started")

    executor.terminate(handle, grace_seconds=1.0)
    status = _wait(executor, handle)

    assert status.exit_code == -signal.SIGKILL


def test_gang_that_does_not_fit_starts_no_worker(executor: RayExecutor, tmp_path: Path) -> None:
    # 2 x 1.5 CPUs on a 2-CPU cluster: one worker alone would fit, the gang does not
    request = _request(tmp_path, "print('ran')", cpus=1.5)
    handle = executor.launch(request)

    # no worker can start before its bundle is placed, and Ray has refused to place them
    wait_until(lambda: _refused(handle), 60, "Ray refusing the placement group")
    assert executor.poll(handle).running
    executor.terminate(handle, grace_seconds=5.0)
    status = executor.poll(handle)

    assert (status.running, status.exit_code) == (False, -signal.SIGTERM)
    assert request.log_path.read_text() == ""


def test_restarted_control_plane_adopts_the_attempt_and_reads_on(
    executor: RayExecutor, tmp_path: Path, gate: Gate
) -> None:
    script = f"""
    print("before", flush=True)
    {gate.wait_code}
    print("after", flush=True)
    """
    request = _request(tmp_path, script)
    handle = executor.launch(request)
    _wait_for_output(executor, handle, request.log_path, 2, "before")

    restarted = RayExecutor(executor.address)  # knows nothing but the handle
    assert restarted.adopt(handle)
    gate.release(2)  # both workers print on only once the attempt is adopted
    status = _wait(restarted, handle)

    log = request.log_path.read_text()
    assert status.exit_code == 0
    assert log.count("] after") == 2


def test_unknown_attempt_is_not_adopted(executor: RayExecutor) -> None:
    handle = AttemptHandle("ray", f"forgeml-{uuid.uuid4().hex}-1-abcdef:2")

    assert not executor.adopt(handle)
    assert not executor.poll(handle).running


def test_launch_once_runs_one_process_without_rank_variables(
    executor: RayExecutor, tmp_path: Path
) -> None:
    script = "import os; print('RANK' in os.environ, os.environ['FORGEML_JOB_ID'])"
    request = _request(tmp_path, script, launch_once=True)
    handle = executor.launch(request)

    status = _wait(executor, handle)

    assert status.exit_code == 0
    assert request.log_path.read_text() == "False test\n"


def test_worker_over_its_memory_is_killed_and_reported(
    executor: RayExecutor, tmp_path: Path
) -> None:
    script = """
    import time
    hog = bytearray(400_000_000)
    hog[::4096] = b"x" * len(hog[::4096])  # touch every page so it is resident
    time.sleep(600)
    """
    handle = executor.launch(_request(tmp_path, script, workers=1, memory_gb=0.2))

    status = _wait(executor, handle)

    assert status.exit_code == -signal.SIGKILL
    assert status.reason == "worker rank 0 exceeded its memory limit of 0.2 GB"


def test_unreachable_cluster_is_reported_in_one_sentence(tmp_path: Path) -> None:
    executor = RayExecutor(f"127.0.0.1:{_free_port()}")

    with pytest.raises(RayUnavailableError, match=r"Cannot reach the Ray cluster at 127\.0\.0\.1"):
        executor.launch(_request(tmp_path, "print('never')"))


# a client process of its own: this one is connected, with the token, for the session
OTHER_CLIENT = """
import sys
from forgeml.scheduler.executors.ray import RayExecutor, RayUnavailableError

try:
    RayExecutor(sys.argv[1]).nodes()
except RayUnavailableError as error:
    print(error)
    sys.exit(3)
print("connected")
"""


@pytest.mark.parametrize("token", ["none", "another"])
def test_cve_2023_48022_a_client_without_the_cluster_s_token_is_refused(
    ray_address: str, tmp_path: Path, token: str
) -> None:
    home = tmp_path / "home"  # its own ~/.ray/auth_token, if any
    (home / ".ray").mkdir(parents=True)
    if token == "another":
        (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH_")}
    env |= {"HOME": str(home), "PYTHONPATH": str(SRC), "RAY_USAGE_STATS_ENABLED": "0"}
    env["RAY_NUM_REDIS_GET_RETRIES"] = "2"  # a refusal is one; Ray asks 20 times, 1 s apart
    done = subprocess.run(
        [sys.executable, "-c", OTHER_CLIENT, ray_address],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"The Ray cluster at {ray_address} refused" in done.stdout, done.stdout


RUN_ONE_JOB = """
import sys
from pathlib import Path
from forgeml.scheduler.executors.base import LaunchRequest
from forgeml.scheduler.executors.ray import RayExecutor
from forgeml.scheduler.model import Resources
from tests._wait import wait_until

address, token_file, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
executor = RayExecutor(address, token_file=Path(token_file) if token_file else None)
handle = executor.launch(
    LaunchRequest(
        job_id="tokened", attempt=1, env={"FORGEML_JOB_ID": "tokened"},
        command=[sys.executable, "-c", "print('ran on the cluster')"],
        workers=1, resources=Resources(cpus=0.5, gpus=0, memory_gb=0.2), nodes=("node",),
        log_path=log,
    )
)
wait_until(lambda: not executor.poll(handle).running, timeout=180, what="the job's end")
print(executor.poll(handle).exit_code)
"""


@pytest.mark.parametrize("where", ["home", "token_file"])
def test_a_client_holding_the_cluster_s_token_runs_a_job(
    ray_address: str, tmp_path: Path, where: str
) -> None:
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text()  # the head's (ray_address)
    home = tmp_path / "home"  # the test's own ~/.ray/auth_token, or none
    (home / ".ray").mkdir(parents=True)
    token_file = ""
    if where == "home":
        (home / ".ray" / "auth_token").write_text(token)
    else:
        token_file = str(tmp_path / "cluster.token")
        Path(token_file).write_text(token)
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH_")}
    env |= {"HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(SRC.parent)])  # forgeml, tests._wait
    log = tmp_path / "job.log"
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONE_JOB, ray_address, token_file, str(log)],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr
    assert log.read_text() == "ran on the cluster\n"
    assert token not in done.stdout + done.stderr + log.read_text()


def test_a_missing_token_file_is_one_sentence(tmp_path: Path) -> None:
    executor = RayExecutor("127.0.0.1:1", token_file=tmp_path / "absent")
    with pytest.raises(RayUnavailableError, match=r"The Ray token file .*absent does not exist"):
        executor.nodes()
