"""Where served, compared and optimised models run: `--device auto | cuda | cpu`.

`cuda` runs PyTorch models on the first GPU and ONNX graphs through ONNX Runtime's
TensorRT provider (where the installed build lists it), then its CUDA provider, the CPU
provider last for the operators they leave out. Where this machine cannot (torch sees no
GPU, the onnxruntime build has no CUDA provider, or a provider fails to start), the model
runs on the CPU and ONE line says so, once per process and reason: on stderr from a
command (`say_on_stderr`), else a log line of the `forgeml.device` logger (a server, a
job). `auto` (the default) takes the GPU when there is one and the CPU quietly otherwise;
`cpu` never looks.

The choices are pure functions of what the machine offers (`torch_placement`,
`onnx_placement`), tested on any machine; `torch_device` and `onnx_providers` report a
fallback for what the machine offers.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DeviceName = Literal["auto", "cuda", "cpu"]
CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"
TENSORRT_PROVIDER = "TensorrtExecutionProvider"

log = logging.getLogger("forgeml.device")
_said: set[str] = set()
_said_lock = threading.Lock()
_sink: list[Callable[[str], None]] = [log.warning]  # where a fallback line goes


class DeviceOptions(BaseModel):
    """The one device field `forgeml serve`, `optimize` and `models compare` read."""

    model_config = ConfigDict(extra="forbid")

    device: DeviceName = Field(
        default="auto",
        description="Where models run: cuda (torch on the GPU; ONNX Runtime's TensorRT/CUDA "
        "providers), cpu, or auto (the GPU when there is one). cuda without a usable GPU "
        "runs on the CPU and says so in one line.",
    )


@dataclass(frozen=True)
class Placement:
    """Where one runtime runs, and the line to say when that is not what was asked."""

    device: str  # torch: "cuda" or "cpu"; ONNX Runtime: "cuda" when a GPU provider leads
    providers: tuple[str, ...] = ()  # ONNX Runtime's providers, in order of preference
    fallback: str | None = None  # set when cuda was asked for and the CPU runs instead


def torch_placement(requested: DeviceName, cuda_available: bool) -> Placement:
    """Where PyTorch runs a model, given whether torch sees a CUDA GPU."""
    if requested != "cpu" and cuda_available:
        return Placement("cuda")
    if requested == "cuda":
        return Placement("cpu", fallback="--device cuda: torch sees no CUDA GPU here; "
                         "running on the CPU.")  # fmt: skip
    return Placement("cpu")


def onnx_placement(requested: DeviceName, available: Sequence[str]) -> Placement:
    """ONNX Runtime's providers for a model, given the installed build's providers."""
    if requested == "cpu":
        return Placement("cpu", (CPU_PROVIDER,))
    gpu = tuple(p for p in (TENSORRT_PROVIDER, CUDA_PROVIDER) if p in available)
    if gpu:
        return Placement("cuda", (*gpu, CPU_PROVIDER))
    if requested == "cuda":
        listed = ", ".join(available) or "none"
        return Placement(
            "cpu",
            (CPU_PROVIDER,),
            fallback=f"--device cuda: this onnxruntime build has no {CUDA_PROVIDER} "
            f"(it lists {listed}); running on the CPU.",
        )
    return Placement("cpu", (CPU_PROVIDER,))


def started_placement(requested: DeviceName, asked: Placement, started: Sequence[str]) -> Placement:
    """The placement an ONNX Runtime session really got: a GPU provider that failed to start
    (missing CUDA or TensorRT libraries) leaves the session on the CPU provider alone."""
    if asked.device != "cuda" or any(p in started for p in (TENSORRT_PROVIDER, CUDA_PROVIDER)):
        return asked
    line = None
    if requested == "cuda":
        line = (f"--device cuda: ONNX Runtime could not start {CUDA_PROVIDER} (missing CUDA "
                "libraries?); running on the CPU.")  # fmt: skip
    return Placement("cpu", tuple(started), fallback=line)


def torch_device(requested: DeviceName, cuda_available: bool) -> str:
    """The torch device ("cuda" or "cpu") for a model; says so when falling back.

    The caller asks torch whether CUDA is there (`forgeml.core` never imports torch).
    """
    return report(torch_placement(requested, cuda_available)).device


def onnx_providers(requested: DeviceName) -> Placement:
    """ONNX Runtime's providers for this machine's build; says so when falling back."""
    import onnxruntime as ort

    return report(onnx_placement(requested, ort.get_available_providers()))


def say_on_stderr() -> None:
    """Send fallback lines to stderr as they are (a command that prints its own results)."""
    _sink[0] = _to_stderr


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")  # sys.stderr as it is at the time (captured in tests)


def report(placement: Placement) -> Placement:
    """Say a placement's fallback line, once per process and line."""
    line = placement.fallback
    if line is not None:
        with _said_lock:
            new = line not in _said
            _said.add(line)
        if new:
            _sink[0](line)
    return placement
