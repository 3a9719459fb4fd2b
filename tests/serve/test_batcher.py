from __future__ import annotations

import pytest

from forgeml.core.nvml import nvml_module
from forgeml.serve.batcher import CPU_MAX_BATCH, max_batch_for, serving_batch_size

GIB = 2**30


@pytest.mark.parametrize(
    ("device", "memory", "expected"),
    [
        ("cpu", None, 32),
        ("cpu", 80 * GIB, 32),  # a GPU's memory does not size a CPU's batches
        ("cuda", None, 32),  # a GPU of unknown memory batches as the CPU does
        ("cuda", 8 * GIB, 64),
        ("cuda", 16 * GIB, 128),
        ("cuda", 24 * GIB, 128),
        ("cuda", 40 * GIB, 256),
        ("cuda", 141 * GIB, 256),  # an H200
    ],
)
def test_the_batch_limit_follows_the_device_and_its_memory(
    device: str, memory: int | None, expected: int
) -> None:
    assert max_batch_for(device, memory) == expected


@pytest.mark.parametrize("device", ["auto", "cuda", "cpu"])
def test_a_limit_that_was_set_is_kept_on_every_device(device: str) -> None:
    assert serving_batch_size(8, device) == 8


@pytest.mark.skipif(nvml_module() is not None, reason="this machine's NVML sees a GPU")
@pytest.mark.parametrize("device", ["auto", "cuda", "cpu"])
def test_without_a_gpu_the_server_batches_as_it_always_did(device: str) -> None:
    assert serving_batch_size(None, device) == CPU_MAX_BATCH == 32
