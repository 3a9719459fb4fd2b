from __future__ import annotations

import logging

import onnxruntime
import pytest
import torch

from forgeml.core import devices
from forgeml.core.devices import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    TENSORRT_PROVIDER,
    Placement,
    onnx_placement,
    onnx_providers,
    started_placement,
    torch_device,
    torch_placement,
)


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # each test is a process that has said nothing yet, into the log
    monkeypatch.setattr(devices, "_said", set())
    monkeypatch.setattr(devices, "_sink", [devices.log.warning])


@pytest.mark.parametrize(
    ("requested", "cuda", "device", "says"),
    [
        ("auto", True, "cuda", False),
        ("cuda", True, "cuda", False),
        ("cpu", True, "cpu", False),
        ("auto", False, "cpu", False),
        ("cuda", False, "cpu", True),
        ("cpu", False, "cpu", False),
    ],
)
def test_torch_takes_the_gpu_when_asked_and_there_and_says_when_it_cannot(
    requested: devices.DeviceName, cuda: bool, device: str, says: bool
) -> None:
    placed = torch_placement(requested, cuda)

    assert placed.device == device
    assert (placed.fallback is not None) is says


@pytest.mark.parametrize(
    ("requested", "available", "expected"),
    [
        (
            "cuda",
            [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER],
            (TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER),
        ),
        ("auto", [CUDA_PROVIDER, CPU_PROVIDER], (CUDA_PROVIDER, CPU_PROVIDER)),
        ("cpu", [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER], (CPU_PROVIDER,)),
        ("auto", ["AzureExecutionProvider", CPU_PROVIDER], (CPU_PROVIDER,)),
    ],
)
def test_onnx_runtime_prefers_tensorrt_then_cuda_then_the_cpu_from_what_the_build_lists(
    requested: devices.DeviceName, available: list[str], expected: tuple[str, ...]
) -> None:
    placed = onnx_placement(requested, available)

    assert placed.providers == expected
    assert placed.device == ("cuda" if CUDA_PROVIDER in expected else "cpu")
    assert placed.fallback is None


def test_a_build_without_a_cuda_provider_falls_back_in_one_sentence_naming_its_providers() -> None:
    placed = onnx_placement("cuda", ["AzureExecutionProvider", CPU_PROVIDER])

    assert placed == Placement("cpu", (CPU_PROVIDER,), placed.fallback)
    assert placed.fallback == (
        "--device cuda: this onnxruntime build has no CUDAExecutionProvider (it lists "
        "AzureExecutionProvider, CPUExecutionProvider); running on the CPU."
    )


def test_a_gpu_provider_that_did_not_start_leaves_the_session_on_the_cpu_and_says_so() -> None:
    asked = onnx_placement("cuda", [CUDA_PROVIDER, CPU_PROVIDER])

    started = started_placement("cuda", asked, [CPU_PROVIDER])
    quiet = started_placement("auto", onnx_placement("auto", [CUDA_PROVIDER]), [CPU_PROVIDER])

    assert (started.device, started.providers) == ("cpu", (CPU_PROVIDER,))
    assert started.fallback is not None and "could not start" in started.fallback
    assert quiet.fallback is None
    assert started_placement("cuda", asked, [CUDA_PROVIDER, CPU_PROVIDER]) == asked


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a CPU machine")
def test_on_this_cpu_machine_cuda_falls_back_with_one_log_line_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="forgeml.device"):
        first = torch_device("cuda", torch.cuda.is_available())
        again = torch_device("cuda", torch.cuda.is_available())
        quiet = torch_device("auto", torch.cuda.is_available())

    assert (first, again, quiet) == ("cpu", "cpu", "cpu")
    assert [record.getMessage() for record in caplog.records] == [
        "--device cuda: torch sees no CUDA GPU here; running on the CPU."
    ]


@pytest.mark.skipif(
    CUDA_PROVIDER in onnxruntime.get_available_providers(), reason="a CPU build's fallback"
)
def test_this_machines_onnxruntime_build_falls_back_to_its_cpu_provider(
    capsys: pytest.CaptureFixture[str],
) -> None:
    devices.say_on_stderr()

    placed = onnx_providers("cuda")

    assert placed.providers == (CPU_PROVIDER,)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("--device cuda: this onnxruntime build has no CUDAExecutionProvider")
