from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from sqlalchemy import select

from forgeml.core import audit, nvml
from forgeml.core.errors import ConfigError, UsageError
from forgeml.core.ids import new_id
from forgeml.core.store import AuditEvent, JobAttemptRecord, JobRecord, QueueRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler._usage import ProcessTreeSampler
from forgeml.scheduler.cost import (
    BUDGET_EXCEEDED,
    PriceTable,
    budget_status,
    check_budgets,
    cost_report,
    load_price_table,
    parse_since,
    price,
)
from forgeml.scheduler.executors.base import AttemptUsage
from tests._wait import FakeClock, wait_until

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\n"
# the last line of a held process: it lives until the test closes its stdin (and so does
# every descendant that inherited that stdin and ends the same way)
HOLD = "import sys\nsys.stdin.read()\n"

# ---- the process-tree sampler


# /proc reports CPU in 10 ms clock ticks, each of the four counters (utime, stime,
# cutime, cstime) truncated; wait4's rusage is in microseconds
TICKS = 4 * 0.01 + 0.01


def _spawn(code: str) -> int:
    return os.posix_spawn(sys.executable, [sys.executable, "-c", code], os.environ)


def _spawn_held(code: str, *args: str) -> tuple[int, Callable[[], None]]:
    """Spawn `code` (ending in HOLD) with a pipe as its stdin; the pid and the release."""
    read_end, write_end = os.pipe()
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", code, *args],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0)],
        )
    finally:
        os.close(read_end)
    return pid, lambda: os.close(write_end)


def _exited(pid: int) -> bool:
    # WNOWAIT leaves the zombie in place, so a last sample still reads its final CPU times
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _sample_until(done: Callable[[], bool], sampler: ProcessTreeSampler) -> AttemptUsage:
    """Sample between checks of `done` until it holds; then the last sample."""

    def sampled_and_done() -> bool:
        sampler.sample()
        return done()

    wait_until(sampled_and_done, timeout=30, what="the process tree's end")
    return sampler.sample()


def _sample_until_exit(pid: int, sampler: ProcessTreeSampler) -> AttemptUsage:
    return _sample_until(lambda: _exited(pid), sampler)


def _reaped_cpu(pid: int) -> float:
    """CPU-seconds the kernel added to `pid` for the children it reaped."""
    times = psutil.Process(pid).cpu_times()
    return float(times.children_user + times.children_system)


def _reap(pid: int) -> float:
    """Reap `pid`; the kernel's CPU-seconds of it and every descendant it reaped."""
    _, _, rusage = os.wait4(pid, 0)
    return rusage.ru_utime + rusage.ru_stime


def test_sampler_cpu_seconds_match_the_kernels_accounting() -> None:
    pid = _spawn(BURN.format(seconds=0.5))
    sampler = ProcessTreeSampler(pid, gpus=())
    usage = _sample_until_exit(pid, sampler)
    kernel_cpu = _reap(pid)
    assert usage.cpu_seconds == pytest.approx(kernel_cpu, abs=TICKS)
    assert usage.cpu_seconds >= 0.5
    assert usage.wall_seconds >= 0.5  # one thread burnt 0.5 CPU-seconds
    assert usage.gpu_seconds == 0.0


def test_sampler_counts_a_child_that_exits_early() -> None:
    code = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {BURN.format(seconds=0.4)!r}], check=True)\n" + HOLD
    )
    pid, release = _spawn_held(code)
    sampler = ProcessTreeSampler(pid, gpus=())
    # samples while the child works, then while the root lives on without it
    _sample_until(lambda: _reaped_cpu(pid) >= 0.3, sampler)
    release()
    usage = _sample_until_exit(pid, sampler)
    kernel_cpu = _reap(pid)  # the root reaped its child: the child's CPU is in here
    assert usage.cpu_seconds == pytest.approx(kernel_cpu, abs=TICKS)
    assert usage.cpu_seconds >= 0.4


def _grandchild_cpu(pid: int) -> float:
    try:
        grandchildren = [g for c in psutil.Process(pid).children() for g in c.children()]
        return sum(grandchildren[0].cpu_times()[:2]) if grandchildren else 0.0
    except psutil.NoSuchProcess:
        return 0.0


def test_sampler_counts_a_chain_that_exits_between_two_samples_once() -> None:
    inner = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {BURN.format(seconds=0.3)!r}])\n"
    )
    code = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {inner!r}], check=True)\n" + HOLD
    )
    pid, release = _spawn_held(code)
    sampler = ProcessTreeSampler(pid, gpus=())
    wait_until(lambda: _grandchild_cpu(pid) >= 0.15, timeout=20, what="the grandchild's work")
    sampler.sample()  # sees the root, its child and its grandchild well into its work
    # both exit and are reaped meanwhile, then the root
    wait_until(lambda: _reaped_cpu(pid) >= 0.25, timeout=20, what="the chain's end")
    release()
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    usage = sampler.sample()
    assert usage.cpu_seconds == pytest.approx(_reap(pid), abs=TICKS)
    assert usage.cpu_seconds >= 0.3


def test_sampler_counts_an_orphaned_grandchild(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import os, subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BURN.format(seconds=0.4)!r}])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "sys.stdin.read()\n"
        "os._exit(0)  # without waiting: init adopts the child\n"
    )
    pid, release = _spawn_held(code)
    sampler = ProcessTreeSampler(pid, gpus=())
    _sample_until(lambda: pid_file.exists() and pid_file.read_text() != "", sampler)
    release()  # the root exits while its child still works
    _sample_until_exit(pid, sampler)
    root_cpu = _reap(pid)
    child = int(pid_file.read_text())
    usage = _sample_until(lambda: not _running(child), sampler)
    # the child's last 20 ms between samples may be missed once it is reaped outside the tree
    assert usage.cpu_seconds >= root_cpu + 0.4 - 0.05


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sampler_integrates_memory_over_its_clock() -> None:
    pid, release = _spawn_held("x = b'x' * 200_000_000\n" + HOLD)
    clock = FakeClock()
    sampler = ProcessTreeSampler(pid, gpus=(), clock=clock)
    try:
        _sample_until(lambda: sampler.sample().peak_memory_gb >= 0.2, sampler)
        held = sampler.sample()
        clock.advance(2.0)
        usage = sampler.sample()
    finally:
        release()
        _reap(pid)
    added = usage.memory_gb_seconds - held.memory_gb_seconds
    assert added == pytest.approx(2.0 * usage.peak_memory_gb, rel=0.01)
    assert 0.2 <= usage.peak_memory_gb < 0.35


def test_sampler_sums_the_memory_of_a_small_tree(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    child_code = f"open({str(ready)!r}, 'w').close()\n" + HOLD
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child_code!r}])\n"
    pid, release = _spawn_held(code + HOLD)
    try:
        sampler = ProcessTreeSampler(pid, gpus=())
        wait_until(ready.exists, what="the child's start")  # both now wait on their stdin
        root = psutil.Process(pid)
        (child,) = root.children()
        usage = sampler.sample()
        both = sum(process.memory_info().rss for process in (root, child)) / 1e9
    finally:
        release()
        _reap(pid)
    assert usage.peak_memory_gb == pytest.approx(both, rel=0.05)


def test_sampler_refuses_a_missing_process() -> None:
    pid = _spawn("pass")
    _reap(pid)
    with pytest.raises(ProcessLookupError, match=str(pid)):
        ProcessTreeSampler(pid)


def test_sampler_continues_from_a_baseline() -> None:
    pid, release = _spawn_held(HOLD)
    baseline = AttemptUsage(
        cpu_seconds=100.0, gpu_seconds=5.0, memory_gb_seconds=7.0, peak_memory_gb=3.0
    )
    clock = FakeClock()
    sampler = ProcessTreeSampler(pid, gpus=(), baseline=baseline, clock=clock)
    clock.advance(1.0)
    usage = sampler.sample()
    release()
    _reap(pid)
    assert usage.cpu_seconds == 100.0
    assert usage.gpu_seconds == 5.0
    assert usage.memory_gb_seconds > 7.0
    assert usage.peak_memory_gb == 3.0


def _fake_nvml(holder: int, readings: list[tuple[int, int, int]] | None = None) -> SimpleNamespace:
    """The NVML calls the sampler makes, on a machine where `holder` has a context on GPU 0;
    GPU 0's (utilisation %, memory used, milliwatts) readings come from `readings` in turn."""
    queue = list(readings or [(0, 0, 0)])

    def power(handle: int) -> int:  # the last call of a reading: the next one follows
        return queue[0][2] if len(queue) == 1 else queue.pop(0)[2]

    return SimpleNamespace(
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=queue[0][0]),
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=queue[0][1]),
        nvmlDeviceGetPowerUsage=power,
        NVMLError=RuntimeError,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: (
            [SimpleNamespace(pid=holder)] if handle == 0 else []
        ),
        # some other program's context, on every GPU
        nvmlDeviceGetGraphicsRunningProcesses=lambda handle: [SimpleNamespace(pid=1)],
    )


def test_sampler_counts_a_gpu_busy_while_a_tree_process_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pid, release = _spawn_held(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {HOLD!r}])\n"
    )
    clock = FakeClock()
    try:
        wait_until(lambda: psutil.Process(pid).children(), what="the child's start")
        (child,) = psutil.Process(pid).children()
        monkeypatch.setitem(nvml._nvml_state, "module", _fake_nvml(holder=child.pid))
        sampler = ProcessTreeSampler(pid, clock=clock)
        first = sampler.sample()
        clock.advance(2.0)
        held = sampler.sample()
        release()
        wait_until(lambda: _exited(pid), what="the tree's exit")
        clock.advance(2.0)
        usage = sampler.sample()
    finally:
        _reap(pid)
    # GPU 0 busy for both seconds while the child lived, GPU 1 never; the trapezoid rule
    # gives the interval in which the child left half of it
    assert held.gpu_seconds - first.gpu_seconds == pytest.approx(2.0)
    assert usage.gpu_seconds - held.gpu_seconds == pytest.approx(1.0)


def test_sampler_records_the_held_gpus_utilisation_peak_memory_and_energy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pid, release = _spawn_held(HOLD)
    clock = FakeClock()
    # GPU 0 at 40% drawing 100 W, then 80% at 300 W with more memory in use
    readings = [(40, 2 * 2**30, 100_000), (80, 6 * 2**30, 300_000)]
    try:
        monkeypatch.setitem(nvml._nvml_state, "module", _fake_nvml(pid, readings))
        sampler = ProcessTreeSampler(pid, clock=clock)
        clock.advance(10.0)
        usage = sampler.sample()
    finally:
        release()
        _reap(pid)
    # the trapezoid over the 10 s between the two readings; GPU 1, not held, is never read
    assert usage.gpu_utilization == pytest.approx(0.6)
    assert usage.gpu_peak_memory_bytes == 6 * 2**30
    assert usage.gpu_energy_joules == pytest.approx(2000.0)


def _gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0


# holds a CUDA context on the first GPU through the driver API alone (no torch needed),
# says so in the file named by argv[1], and lives until its stdin closes
HOLD_GPU = """
import ctypes, pathlib, sys
cuda = ctypes.CDLL("libcuda.so.1")
device, context = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device) == 0
pathlib.Path(sys.argv[1]).write_text("held")
sys.stdin.read()
"""


@pytest.mark.skipif(_gpu_count() == 0, reason="no GPU visible to NVML")
def test_sampler_counts_gpu_seconds_while_a_context_is_held(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    pid, release = _spawn_held(HOLD_GPU, str(ready))
    clock = FakeClock()
    try:
        sampler = ProcessTreeSampler(pid, clock=clock)
        wait_until(ready.exists, timeout=60, what="the CUDA context")
        first = sampler.sample()
        clock.advance(3.0)
        usage = sampler.sample()
    finally:
        release()
        _, status, _ = os.wait4(pid, 0)
    assert status == 0
    assert usage.gpu_seconds - first.gpu_seconds == pytest.approx(3.0)


# ---- prices


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (AttemptUsage(), 0.0),
        (AttemptUsage(cpu_seconds=3600), 0.04),
        (AttemptUsage(gpu_seconds=1800), 1.5),
        (AttemptUsage(memory_gb_seconds=7200), 0.01),
        (
            AttemptUsage(
                cpu_seconds=7200, gpu_seconds=3600, memory_gb_seconds=36000, wall_seconds=9
            ),
            0.08 + 3.0 + 0.05,
        ),
    ],
)
def test_price_of_usage_at_the_default_prices(usage: AttemptUsage, expected: float) -> None:
    assert price(usage, PriceTable()) == pytest.approx(expected)


def test_price_uses_the_tables_prices() -> None:
    table = PriceTable(cpu_hour=1.0, gpu_hour=10.0, memory_gb_hour=0.5, currency="EUR")
    usage = AttemptUsage(cpu_seconds=1800, gpu_seconds=360, memory_gb_seconds=3600)
    assert price(usage, table) == pytest.approx(0.5 + 1.0 + 0.5)


def test_price_table_defaults_without_a_file(workspace: Workspace) -> None:
    assert load_price_table(workspace.settings) == PriceTable()


def test_price_table_is_read_from_forgeml_home(workspace: Workspace) -> None:
    workspace.settings.home.mkdir(parents=True, exist_ok=True)
    (workspace.settings.home / "prices.yaml").write_text("cpu_hour: 0.1\ncurrency: EUR\n")
    table = load_price_table(workspace.settings)
    assert (table.cpu_hour, table.gpu_hour, table.currency) == (0.1, 3.0, "EUR")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu_hour: -1\n", "key 'cpu_hour'"),
        ("cpu_hours: 1\n", "unknown key 'cpu_hours'"),
        ("cpu_hour: [1\n", "invalid YAML"),
    ],
)
def test_price_table_errors_name_the_file_and_key(
    workspace: Workspace, text: str, message: str
) -> None:
    workspace.settings.home.mkdir(parents=True, exist_ok=True)
    (workspace.settings.home / "prices.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"prices\.yaml") as raised:
        load_price_table(workspace.settings)
    assert message in str(raised.value)


# ---- reports (rows written through the store's models)


def add_queue(workspace: Workspace, name: str, budget: float | None = None) -> None:
    with workspace.store.session() as session:
        record = session.get(QueueRecord, name)
        if record is None:
            session.add(
                QueueRecord(
                    name=name,
                    weight=1,
                    capability=None,
                    reclaimable=True,
                    budget=budget,
                    created_by="tester",
                )
            )
        else:
            record.budget = budget


def add_job(
    workspace: Workspace,
    name: str,
    *,
    queue: str = "default",
    owner: str = "ann",
    model: str | None = None,
) -> str:
    job_id = new_id()
    with workspace.store.session() as session:
        if session.get(QueueRecord, queue) is None:
            session.add(
                QueueRecord(
                    name=queue, weight=1, capability=None, reclaimable=True, created_by="tester"
                )
            )
            session.flush()
        session.add(
            JobRecord(
                id=job_id,
                name=name,
                project=workspace.project,
                kind="command",
                spec={},
                queue=queue,
                priority=100,
                owner=owner,
                state="SUCCEEDED",
                executor="local",
                model_name=model,
            )
        )
    return job_id


def add_attempt(
    workspace: Workspace, job_id: str, cost: float, started_at: datetime | None = None
) -> None:
    """An ended attempt whose use is a multiple of its cost (cpu 10x, gpu 1x, memory 2x)."""
    with workspace.store.session() as session:
        number = 1 + len(
            session.scalars(
                select(JobAttemptRecord.id).where(JobAttemptRecord.job_id == job_id)
            ).all()
        )
        started = started_at or datetime.now(UTC)
        session.add(
            JobAttemptRecord(
                id=new_id(),
                job_id=job_id,
                number=number,
                state="SUCCEEDED",
                executor="local",
                nodes=["local"],
                started_at=started,
                ended_at=started + timedelta(seconds=5),
                heartbeat_at=started,
                exit_code=0,
                cpu_seconds=cost * 10,
                gpu_seconds=cost,
                memory_gb_seconds=cost * 2,
                peak_memory_gb=1.0,
                wall_seconds=cost * 100,
                cost=cost,
            )
        )


@pytest.fixture
def ledger(any_workspace: Workspace) -> dict[str, str]:
    """Four jobs over two queues, two owners and one model; job name -> id."""
    jobs = {
        "j1": add_job(any_workspace, "j1", queue="default", owner="ann", model="adult"),
        "j2": add_job(any_workspace, "j2", queue="research", owner="bob", model="adult"),
        "j3": add_job(any_workspace, "j3", queue="research", owner="ann"),
        "j4": add_job(any_workspace, "j4", queue="research", owner="cy"),  # never ran
    }
    add_attempt(any_workspace, jobs["j1"], 1.0, datetime.now(UTC) - timedelta(days=10))
    add_attempt(any_workspace, jobs["j1"], 2.0)
    add_attempt(any_workspace, jobs["j2"], 4.0)
    add_attempt(any_workspace, jobs["j3"], 0.5)
    return jobs


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        ("job", [("j2", 1, 4.0), ("j1", 2, 3.0), ("j3", 1, 0.5)]),
        ("queue", [("research", 2, 4.5), ("default", 2, 3.0)]),
        ("owner", [("bob", 1, 4.0), ("ann", 3, 3.5)]),
        ("model", [("adult", 3, 7.0), (None, 1, 0.5)]),
    ],
)
def test_cost_report_groups_attempts(
    any_workspace: Workspace,
    ledger: dict[str, str],
    by: str,
    expected: list[tuple[str | None, int, float]],
) -> None:
    rows = cost_report(any_workspace.store, "default", by=by)
    names = {job_id: name for name, job_id in ledger.items()}
    got = [(names[r.key] if by == "job" else r.key, r.attempts, r.cost) for r in rows]
    assert got == [(key, attempts, pytest.approx(cost)) for key, attempts, cost in expected]
    for row in rows:
        assert row.cpu_seconds == pytest.approx(row.cost * 10)
        assert row.gpu_seconds == pytest.approx(row.cost)
        assert row.memory_gb_seconds == pytest.approx(row.cost * 2)
        assert row.wall_seconds == pytest.approx(row.cost * 100)
        assert row.name == (names[row.key] if by == "job" else None)


def test_cost_report_since_counts_only_later_attempts(
    any_workspace: Workspace, ledger: dict[str, str]
) -> None:
    rows = cost_report(any_workspace.store, "default", by="job", since=parse_since("7d"))
    by_job = {row.key: (row.attempts, row.cost) for row in rows}
    assert by_job[ledger["j1"]] == (1, pytest.approx(2.0))
    assert sum(row.cost for row in rows) == pytest.approx(6.5)
    assert (
        cost_report(any_workspace.store, "default", since=datetime.now(UTC) + timedelta(hours=1))
        == []
    )


def test_cost_report_refuses_an_unknown_grouping(workspace: Workspace) -> None:
    with pytest.raises(UsageError, match="--by must be one of job, queue, owner, model"):
        cost_report(workspace.store, "default", by="team")


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("7d", timedelta(days=7)),
        ("24h", timedelta(hours=24)),
        ("30m", timedelta(minutes=30)),
        ("2w", timedelta(weeks=2)),
        ("1.5h", timedelta(minutes=90)),
    ],
)
def test_parse_since_durations(text: str, ago: timedelta) -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert parse_since(text, now=now) == now - ago


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC)),
        ("2026-01-31T10:00:00+02:00", datetime(2026, 1, 31, 8, tzinfo=UTC)),
        ("2026-01-31T10:00:00Z", datetime(2026, 1, 31, 10, tzinfo=UTC)),
    ],
)
def test_parse_since_iso_dates_are_utc(text: str, expected: datetime) -> None:
    assert parse_since(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "7", "-7d", "7y", ""])
def test_parse_since_refuses_other_text(text: str) -> None:
    with pytest.raises(UsageError, match="--since"):
        parse_since(text)


def test_cost_report_sums_the_jobs_of_its_project_only(any_workspace: Workspace) -> None:
    team_a, team_b = any_workspace.in_project("team-a"), any_workspace.in_project("team-b")
    add_attempt(any_workspace, add_job(team_a, "ja", queue="research", model="adult-a"), 2.0)
    add_attempt(any_workspace, add_job(team_b, "jb", queue="research", model="adult-b"), 5.0)
    for project, expected in (("team-a", ["adult-a"]), ("team-b", ["adult-b"]), ("default", [])):
        rows = cost_report(any_workspace.store, project, by="model")
        assert [row.key for row in rows] == expected
    (queue,) = cost_report(any_workspace.store, "team-a", by="queue")
    assert (queue.key, queue.cost) == ("research", 2.0)
    # a queue's budget counts every project's jobs
    add_queue(any_workspace, "research", budget=6.0)
    (status,) = budget_status(any_workspace.store)
    assert (status.spend, status.exceeded) == (7.0, True)


# ---- budgets


def _budget_alerts(workspace: Workspace) -> list[AuditEvent]:
    with workspace.store.session() as session:
        return list(session.scalars(select(AuditEvent).where(AuditEvent.action == BUDGET_EXCEEDED)))


def test_budget_status_of_queues_with_a_budget(workspace: Workspace) -> None:
    add_queue(workspace, "capped", budget=1.0)
    add_queue(workspace, "idle", budget=2.0)
    add_attempt(workspace, add_job(workspace, "a", queue="capped"), 1.5)
    add_attempt(workspace, add_job(workspace, "b", queue="free"), 9.0)
    statuses = budget_status(workspace.store)
    assert [(s.queue, s.budget, s.spend, s.exceeded) for s in statuses] == [
        ("capped", 1.0, 1.5, True),
        ("idle", 2.0, 0.0, False),
    ]


def test_budget_alert_is_written_once_per_budget(
    any_workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    add_queue(any_workspace, "team", budget=1.0)
    job = add_job(any_workspace, "train", queue="team")
    add_attempt(any_workspace, job, 0.6)
    assert check_budgets(any_workspace) == []

    add_attempt(any_workspace, job, 0.6)
    with caplog.at_level(logging.WARNING, logger="forgeml.scheduler.cost"):
        alerted = check_budgets(any_workspace)
        assert check_budgets(any_workspace) == []
        add_attempt(any_workspace, job, 0.6)
        assert check_budgets(any_workspace) == []
    assert [(s.queue, s.spend) for s in alerted] == [("team", pytest.approx(1.2))]
    assert [r.getMessage() for r in caplog.records] == [
        "Queue 'team' is over its budget: spent 1.20 of 1.00."
    ]
    alerts = _budget_alerts(any_workspace)
    assert [(a.object_ref, a.payload["budget"]) for a in alerts] == [("queue:team", 1.0)]

    add_queue(any_workspace, "team", budget=10.0)  # raised: under it, no alert
    assert check_budgets(any_workspace) == []
    add_queue(any_workspace, "team", budget=1.5)  # changed again and over it: alert
    assert [s.budget for s in check_budgets(any_workspace)] == [1.5]
    assert len(_budget_alerts(any_workspace)) == 2
    with any_workspace.store.session() as session:
        assert audit.verify(session).events == 2
