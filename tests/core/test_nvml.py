from __future__ import annotations

import subprocess
import sys

import pytest

from forgeml.core.nvml import (
    GpuMeter,
    GpuSample,
    GpuUsage,
    combine_gpu_usage,
    gpu_memory_bytes,
    nvml_module,
    summarize_gpu_samples,
)
from forgeml.scheduler._usage import ProcessTreeSampler
from tests._wait import FakeClock

MIB = 2**20


def test_samples_make_the_time_weighted_mean_the_peak_and_the_energy() -> None:
    # 10 s at 50% and 200 W, then 30 s climbing to 90% and 300 W
    samples = {
        0: [
            GpuSample(0.0, 0.5, 1000 * MIB, 200.0),
            GpuSample(10.0, 0.5, 3000 * MIB, 200.0),
            GpuSample(40.0, 0.9, 2000 * MIB, 300.0),
        ]
    }

    usage = summarize_gpu_samples(samples)

    assert usage.utilization == pytest.approx((0.5 * 10 + 0.7 * 30) / 40)
    assert usage.peak_memory_bytes == 3000 * MIB
    assert usage.energy_joules == pytest.approx(200 * 10 + 250 * 30)


def test_two_gpus_add_their_energy_and_average_their_utilisation_over_their_time() -> None:
    samples = {
        0: [GpuSample(0.0, 1.0, 10 * MIB, 100.0), GpuSample(2.0, 1.0, 20 * MIB, 100.0)],
        1: [GpuSample(0.0, 0.0, 50 * MIB, 50.0), GpuSample(2.0, 0.0, 40 * MIB, 50.0)],
    }

    usage = summarize_gpu_samples(samples)

    assert usage == GpuUsage(0.5, 50 * MIB, pytest.approx(300.0))


def test_no_samples_are_absent_figures_not_zeros() -> None:
    assert summarize_gpu_samples({}) == GpuUsage(None, None, None)


def test_one_sample_has_its_reading_and_no_energy_yet() -> None:
    usage = summarize_gpu_samples({0: [GpuSample(5.0, 0.25, 7 * MIB, 90.0)]})

    assert usage == GpuUsage(0.25, 7 * MIB, None)


def test_a_board_that_reports_no_power_has_no_energy() -> None:
    usage = summarize_gpu_samples(
        {0: [GpuSample(0.0, 0.5, MIB, None), GpuSample(1.0, 0.5, MIB, None)]}
    )

    assert (usage.utilization, usage.energy_joules) == (0.5, None)


def test_a_meter_continues_the_recorded_energy_and_peak_after_a_restart() -> None:
    meter = GpuMeter(GpuUsage(0.8, 5 * MIB, 1000.0))
    assert meter.usage() == GpuUsage(0.8, 5 * MIB, 1000.0)

    meter.add(0, GpuSample(100.0, 0.2, 2 * MIB, 100.0))
    meter.add(0, GpuSample(101.0, 0.2, 2 * MIB, 100.0))

    assert meter.usage() == GpuUsage(pytest.approx(0.2), 5 * MIB, pytest.approx(1100.0))


def test_workers_figures_combine_into_one_jobs() -> None:
    combined = combine_gpu_usage(
        [GpuUsage(0.2, 4 * MIB, 10.0), GpuUsage(0.6, 9 * MIB, 5.0), GpuUsage()]
    )

    assert combined == GpuUsage(pytest.approx(0.4), 9 * MIB, 15.0)
    assert combine_gpu_usage([GpuUsage(), GpuUsage()]) == GpuUsage()


@pytest.mark.skipif(nvml_module() is not None, reason="this machine's NVML loads")
def test_without_nvml_a_job_records_no_gpu_figures_and_no_gpu_memory_is_known() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        clock = FakeClock()
        sampler = ProcessTreeSampler(child.pid, clock=clock)
        clock.advance(1.0)
        usage = sampler.sample()
    finally:
        child.communicate(b"")

    assert (usage.gpu_utilization, usage.gpu_peak_memory_bytes, usage.gpu_energy_joules) == (
        None,
        None,
        None,
    )
    assert usage.gpu_seconds == 0.0
    assert gpu_memory_bytes(0) is None
