"""NVML (the `gpu` extra's `pynvml`), initialised once per process, for whoever meters GPUs:
the scheduler's per-attempt usage and GPU gauges, the server's per-deployment GPU gauges.

`GpuMeter` turns timed samples of a GPU (utilisation, memory used, power draw) into what a
job's cost record keeps: the mean utilisation over the time sampled, the peak memory and
the energy (joules: power integrated over time by the trapezoid rule). It is a pure
accumulator, driven by `read_gpu_sample` on a machine with NVML and by injected samples in
tests. No sample means no figure (None: absent, never 0).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

_nvml_lock = threading.Lock()
_nvml_state: dict[str, Any] = {}


def nvml_module() -> Any:
    """The initialised `pynvml` module, or None without the library, a driver or a GPU."""
    with _nvml_lock:
        if "module" not in _nvml_state:
            try:
                import pynvml

                pynvml.nvmlInit()
                _nvml_state["module"] = pynvml
            except Exception:  # not installed, no driver, no device: no GPU metering
                _nvml_state["module"] = None
        return _nvml_state["module"]


def gpu_memory_bytes(index: int = 0) -> int | None:
    """Total memory of GPU `index` as NVML reports it; None without NVML or that GPU."""
    nvml = nvml_module()
    if nvml is None:
        return None
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(index)).total)
    except nvml.NVMLError:
        return None


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU."""

    at: float  # monotonic seconds
    utilization: float  # 0-1: share of the last sample period a kernel ran (NVML)
    memory_bytes: int  # memory used on the device
    power_watts: float | None  # None: the board does not report its draw


@dataclass(frozen=True)
class GpuUsage:
    """What a job used of the GPUs it held, as its cost record keeps it (None: no figure)."""

    utilization: float | None = None  # time-weighted mean over the samples, 0-1 per GPU
    peak_memory_bytes: int | None = None  # the most memory any sampled GPU had in use
    energy_joules: float | None = None  # summed over the GPUs, since the first sample


class GpuMeter:
    """Accumulates `GpuSample`s of several GPUs into one `GpuUsage` (memory-constant)."""

    def __init__(self, start: GpuUsage | None = None) -> None:
        """Continue from `start` (what was recorded before a control-plane restart)."""
        start = start or GpuUsage()
        self._energy = start.energy_joules
        self._peak = start.peak_memory_bytes
        self._start_utilization = start.utilization
        self._busy_seconds = 0.0  # utilisation integrated over time, summed over GPUs
        self._seconds = 0.0  # time sampled, summed over GPUs
        self._single: list[float] = []  # GPUs sampled once: their readings as they are
        self._last: dict[int, GpuSample] = {}

    def add(self, gpu: int, sample: GpuSample) -> None:
        """Count one reading of GPU `gpu` (readings of one GPU in time order)."""
        self._peak = max(self._peak or 0, sample.memory_bytes)
        previous = self._last.get(gpu)
        self._last[gpu] = sample
        if previous is None:
            self._single.append(sample.utilization)
            return
        elapsed = sample.at - previous.at
        if elapsed <= 0:
            return
        self._busy_seconds += (previous.utilization + sample.utilization) / 2 * elapsed
        self._seconds += elapsed
        if previous.power_watts is not None and sample.power_watts is not None:
            joules = (previous.power_watts + sample.power_watts) / 2 * elapsed
            self._energy = (self._energy or 0.0) + joules

    def usage(self) -> GpuUsage:
        """The figures so far; None for each that no reading gave."""
        if self._seconds > 0:
            utilization: float | None = self._busy_seconds / self._seconds
        elif self._single:
            utilization = sum(self._single) / len(self._single)
        else:
            utilization = self._start_utilization
        return GpuUsage(utilization, self._peak, self._energy)


def summarize_gpu_samples(samples: dict[int, list[GpuSample]]) -> GpuUsage:
    """The `GpuUsage` of each GPU's readings (a pure function: what `GpuMeter` adds up)."""
    meter = GpuMeter()
    for gpu, readings in samples.items():
        for sample in readings:
            meter.add(gpu, sample)
    return meter.usage()


def combine_gpu_usage(usages: list[GpuUsage]) -> GpuUsage:
    """Several workers' GPU figures as one job's: mean utilisation, peak, summed energy."""
    shares = [u.utilization for u in usages if u.utilization is not None]
    peaks = [u.peak_memory_bytes for u in usages if u.peak_memory_bytes is not None]
    energies = [u.energy_joules for u in usages if u.energy_joules is not None]
    return GpuUsage(
        sum(shares) / len(shares) if shares else None,
        max(peaks) if peaks else None,
        sum(energies) if energies else None,
    )


def read_gpu_sample(nvml: Any, handle: Any, at: float) -> GpuSample | None:
    """One reading of the GPU behind `handle`; None when NVML cannot read it."""
    try:
        utilization = nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100
        memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
    except nvml.NVMLError:
        return None
    try:
        power: float | None = nvml.nvmlDeviceGetPowerUsage(handle) / 1000  # milliwatts
    except nvml.NVMLError:  # NOT_SUPPORTED on some boards
        power = None
    return GpuSample(at, float(utilization), memory, power)
