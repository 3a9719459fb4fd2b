"""NVML (the `gpu` extra's `pynvml`), initialised once per process, for whoever meters GPUs:
the scheduler's per-attempt usage and GPU gauges, the server's per-deployment GPU gauges."""

from __future__ import annotations

import threading
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
