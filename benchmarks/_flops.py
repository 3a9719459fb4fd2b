"""The CPU's fp32 matrix-multiply peak, the yardstick of the benchmarks' FLOP/s figures."""

from __future__ import annotations

import statistics
import time


def matmul_peak_flops(size: int = 1024, repeats: int = 30) -> dict[str, float]:
    """FLOP/s of `torch.mm` on two fp32 `size` x `size` matrices: best and median call."""
    import torch

    left, right = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        torch.mm(left, right)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(left, right)
        seconds.append(time.perf_counter() - start)
    flops = 2.0 * size**3
    return {"best": flops / min(seconds), "median": flops / statistics.median(seconds)}
