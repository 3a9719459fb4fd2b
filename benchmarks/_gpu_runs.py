"""The rows of benchmarks/gpu_check.py: peak, training through `fit`, NVML, serving.

Imported only for a real run (it imports torch and forgeml's trainer). Every row catches
its own failure and records it as one sentence, so one broken path does not cost the
others their figures on a machine lent for minutes.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import torch

from forgeml.core.errors import ForgemlError
from forgeml.train.config import TrainConfig
from forgeml.train.logger import NullLogger
from forgeml.train.loop import fit
from forgeml.train.models.text_classifier import build, encode_texts
from forgeml.train.step import DistContext
from forgeml.train.task import SplitData, TaskData

MAX_LENGTH = 64
BATCH = 32


def run_check(rows: int, plan: list[Any], sst2: Path | None, encoder: str | None) -> dict:
    """Run every step of `plan` that can run here; one dict of figures per step."""
    quick = rows < 4000
    if not torch.cuda.is_available():
        return {"error": "The GPU check needs a CUDA GPU and this machine has none."}
    if sst2 is None or encoder is None:
        return {"error": "Stage the data and encoder first: gpu_check.py --prepare."}
    started = time.perf_counter()
    task = load_task(sst2, encoder, rows)
    report: dict[str, Any] = {"machine": torch.cuda.get_device_name(0), "train_rows": rows}
    report["peak"] = _guarded(lambda: peak_bf16_tflops(quick))
    peak = report["peak"].get("tflops")
    trained: dict[str, Any] = {}
    absent = {step.name: _absent(step.needs) for step in plan}
    for name, device, precision, strategy in _TRAIN_ROWS:
        if absent.get(name):
            report[name] = {"skipped": f"{', '.join(absent[name])} not importable here"}
            continue
        report[name] = _guarded(
            partial(train_row, task, encoder, device, precision, strategy, peak, trained)
        )
    report["serve"] = _guarded(lambda: serve_rows(trained.get("model"), task, quick))
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


_TRAIN_ROWS = [
    ("train_cpu_fp32", "cpu", "fp32", None),
    ("train_cuda_fp32", "cuda", "fp32", None),
    ("train_cuda_bf16", "cuda", "bf16", None),
    ("train_fsdp", "cuda", "bf16", {"strategy": "fsdp"}),
    ("train_deepspeed_zero2", "cuda", "bf16", {"strategy": "deepspeed"}),
    (
        "train_deepspeed_zero3",
        "cuda",
        "bf16",
        {
            "strategy": "deepspeed",
            "deepspeed": {"zero_stage": 3, "offload_optimizer": "cpu", "offload_param": "cpu"},
        },
    ),
]


def _absent(modules: tuple[str, ...]) -> list[str]:
    import importlib.util

    return [name for name in modules if importlib.util.find_spec(name) is None]


def _guarded(row: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return row()
    except (ForgemlError, RuntimeError, ImportError, OSError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        return {"error": f"{type(error).__name__}: {first}"}


def load_task(folder: Path, encoder: str, rows: int) -> TaskData:
    """SST-2 train rows and the whole dev set, tokenized by MiniLM's own tokenizer."""

    def split(name: str, limit: int | None) -> SplitData:
        lines = (folder / name).read_text(encoding="utf-8").splitlines()[1:]
        pairs = [line.split("\t", 1) for line in lines[:limit] if "\t" in line]
        inputs = encode_texts([text for _, text in pairs], encoder, MAX_LENGTH)
        return SplitData(inputs, torch.tensor([int(label) for label, _ in pairs]))

    return TaskData(
        "classification", split("train.tsv", rows), split("dev.tsv", None), None, 2, ["0", "1"]
    )


def peak_bf16_tflops(quick: bool, size: int = 8192) -> dict[str, Any]:
    """Best TFLOP/s of a bf16 `size`^3 matrix product, timed with CUDA events."""
    left = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    right = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.mm(left, right)
    best = float("inf")
    for _ in range(10 if quick else 30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(left, right)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1000)
    return {"tflops": round(2 * size**3 / best / 1e12, 1), "size": size}


def train_row(
    task: TaskData,
    encoder: str,
    device: str,
    precision: str,
    extra: dict[str, Any] | None,
    peak: float | None,
    trained: dict[str, Any],
) -> dict[str, Any]:
    """One epoch of MiniLM through `fit`: samples/s, TFLOP/s, dev accuracy."""
    config = TrainConfig.model_validate(
        {
            "name": "gpu-check",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "text_classifier", "params": {"pretrained": encoder}},
            "optimizer": {"name": "adamw", "lr": 5e-5, "weight_decay": 0.01},
            "schedule": {"name": "linear", "warmup_steps": 20},
            "epochs": 1,
            "batch_size": BATCH,
            "precision": precision,
            "log_every_steps": 10_000,
            **(extra or {}),
        }
    )
    torch.manual_seed(0)
    model = build(task, pretrained=encoder, max_length=MAX_LENGTH)
    params = sum(parameter.numel() for parameter in model.parameters())
    # 6 x parameters x tokens: forward 2, backward 4 (Kaplan et al. 2020); padding excluded
    tokens = float(task.train.inputs["attention_mask"].sum()) / len(task.train)
    nvml = _NvmlSampler() if (device, precision, extra) == ("cuda", "bf16", None) else None
    with _strategy(model, config, device) as (wrapped, dist), tempfile.TemporaryDirectory() as run:
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with nvml or _nothing():
            result = fit(wrapped, task, config, run_dir=Path(run), logger=NullLogger(), dist=dist)
        seconds = time.perf_counter() - started
        saved = _checkpoint_files(Path(run))
    samples = [m["samples_per_s"] for _, m in result.history if "samples_per_s" in m]
    rate = statistics.median(samples[len(samples) // 10 :])  # past the warm-up steps
    row: dict[str, Any] = {
        "samples_per_s": round(rate, 1),
        "tflops": round(rate * 6 * params * tokens / 1e12, 2),
        "dev_accuracy": round(result.final_metrics.get("accuracy", float("nan")), 4),
        "seconds": round(seconds, 1),
        "checkpoint": saved,
    }
    if peak:
        row["share_of_peak"] = round(row["tflops"] / peak, 3)
    if nvml is not None:
        row["nvml"] = nvml.summary()
    if device == "cuda" and extra is None and precision == "bf16":
        trained["model"] = model
    return row


def _checkpoint_files(run_dir: Path) -> list[str]:
    """What the run's last checkpoint holds (forgeml's files; ZeRO's shards under zero/)."""
    from forgeml.train.checkpoint import load_latest

    latest = load_latest(run_dir)
    if latest is None:
        return []
    return sorted(str(path.relative_to(latest.path)) for path in latest.path.iterdir())


@contextmanager
def _strategy(
    model: torch.nn.Module, config: TrainConfig, device: str
) -> Iterator[tuple[torch.nn.Module, DistContext]]:
    ctx = DistContext(device=torch.device(device, 0) if device == "cuda" else torch.device(device))
    if config.strategy == "ddp":
        yield model.to(ctx.device), ctx
        return
    from forgeml.train.distributed import wrap_model

    # one rank of a real process group, so wrap_model shards instead of passing through
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    torch.distributed.init_process_group("nccl", rank=0, world_size=1, device_id=ctx.device)
    try:
        yield wrap_model(model, ctx, config.strategy), ctx
    finally:
        torch.distributed.destroy_process_group()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _NvmlSampler:
    """GPU 0 as forgeml reads it (core.nvml) beside nvidia-smi, sampled together."""

    def __init__(self, every_s: float = 0.5) -> None:
        self._every = every_s
        self._stop = threading.Event()
        self._forgeml: list[tuple[float, float, float]] = []
        self._smi: list[tuple[float, float, float]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _NvmlSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        from forgeml.core.nvml import nvml_module

        nvml = nvml_module()
        handle = nvml.nvmlDeviceGetHandleByIndex(0) if nvml is not None else None
        while not self._stop.wait(self._every):
            if handle is not None:
                self._forgeml.append(
                    (
                        float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                        nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
                        nvml.nvmlDeviceGetPowerUsage(handle) / 1000,
                    )
                )
            self._smi.append(_nvidia_smi())

    def summary(self) -> dict[str, Any]:
        def means(samples: list[tuple[float, float, float]]) -> dict[str, float] | None:
            if not samples:
                return None  # absent, not zero
            columns = list(zip(*samples, strict=True))
            keys = ("utilization_pct", "memory_mib", "power_w")
            return {k: round(statistics.fmean(c), 1) for k, c in zip(keys, columns, strict=True)}

        return {"forgeml": means(self._forgeml), "nvidia_smi": means(self._smi)}


def _nvidia_smi() -> tuple[float, float, float]:
    out = subprocess.run(
        ["nvidia-smi", "--id=0", "--query-gpu=utilization.gpu,memory.used,power.draw",
         "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True, timeout=10,
    ).stdout  # fmt: skip
    utilization, memory, power = (float(value) for value in out.strip().split(","))
    return utilization, memory, power


def serve_rows(model: torch.nn.Module | None, task: TaskData, quick: bool) -> dict[str, Any]:
    """p50 latency of forgeml's torch runtime and ONNX Runtime on `--device cuda` at batch 1
    and 32, through the code `forgeml serve --device cuda` runs; the batching gain."""
    from forgeml.core.devices import torch_device
    from forgeml.serve.runtime import TorchRuntime
    from forgeml.train.models import get_family

    if model is None:
        return {"error": "the bf16 training row failed, so there is no model to serve"}
    device = torch_device("cuda", torch.cuda.is_available())
    runtime = TorchRuntime(model.float().eval(), get_family("text_classifier"), device)
    repeats = 30 if quick else 100
    rows: dict[str, Any] = {"torch_device": runtime.device}
    for batch in (1, 32):
        feeds = _feeds(task, batch)
        rows[f"torch_cuda_b{batch}_p50_ms"] = _p50(
            lambda f=feeds: runtime.run(f, ["logits"]), repeats
        )
    rows.update(_guarded(lambda: _ort_rows(model, task, repeats)))
    rows["batching"] = _batching_gain(runtime, task, 32, 4 if quick else 16)
    return rows


def _feeds(task: TaskData, batch: int, start: int = 0) -> dict[str, Any]:
    sample = task.eval.inputs  # type: ignore[union-attr]
    return {
        name: sample[name][start : start + batch, :MAX_LENGTH].numpy()
        for name in ("input_ids", "attention_mask")
    }


def _p50(call: Callable[[], Any], repeats: int) -> float:
    for _ in range(5):
        call()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return round(statistics.median(seconds) * 1000, 3)


def _ort_rows(model: torch.nn.Module, task: TaskData, repeats: int) -> dict[str, Any]:
    """ONNX Runtime with the providers `--device cuda` picks (TensorRT, CUDA, then CPU)."""
    import onnxruntime as ort

    from forgeml.core.devices import onnx_placement, started_placement

    available = ort.get_available_providers()
    asked = onnx_placement("cuda", available)
    row: dict[str, Any] = {"ort_providers": available, "ort_asked": list(asked.providers)}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        sample = _feeds(task, 1)
        torch.onnx.export(
            model.cpu(), (), str(path),
            kwargs={name: torch.from_numpy(array) for name, array in sample.items()},
            input_names=["input_ids", "attention_mask"], output_names=["logits"],
            dynamic_axes={"input_ids": {0: "B", 1: "T"}, "attention_mask": {0: "B", 1: "T"}},
            opset_version=17, dynamo=False,
        )  # fmt: skip
        model.to("cuda")
        session = ort.InferenceSession(str(path), providers=list(asked.providers))
    started = started_placement("cuda", asked, session.get_providers())
    row["ort_started"] = list(session.get_providers())
    if started.fallback:
        row["ort_fallback"] = started.fallback
    for batch in (1, 32):
        feeds = _feeds(task, batch)
        row[f"ort_cuda_b{batch}_p50_ms"] = _p50(lambda f=feeds: session.run(None, f), repeats)
    return row


def _batching_gain(runtime: Any, task: TaskData, concurrency: int, rounds: int) -> dict:
    """Requests per second at `concurrency` through the dynamic batcher (its limit sized for
    this GPU by `max_batch_for`) vs one at a time."""
    from forgeml.core.nvml import gpu_memory_bytes
    from forgeml.serve.batcher import Batcher, max_batch_for

    rows = len(task.eval)  # type: ignore[arg-type]
    feeds = _feeds(task, rows)

    def run_batch(indices: list[int]) -> list[int]:
        runtime.run({name: array[indices] for name, array in feeds.items()}, ["logits"])
        return indices

    started = time.perf_counter()
    for index in range(concurrency * rounds):
        run_batch([index % rows])
    alone = concurrency * rounds / (time.perf_counter() - started)
    limit = max_batch_for("cuda", gpu_memory_bytes(0))
    batcher = Batcher(run_batch, max_batch_size=limit, max_wait_ms=2.0, name="gpu-check")

    async def client(index: int) -> None:
        for _ in range(rounds):
            await batcher.submit(index % rows)

    async def clients() -> None:
        await asyncio.gather(*(client(index) for index in range(concurrency)))

    started = time.perf_counter()
    asyncio.run(clients())
    batched = concurrency * rounds / (time.perf_counter() - started)
    batcher.close()
    return {"alone_rps": round(alone, 1), "batched_rps": round(batched, 1),
            "gain": round(batched / alone, 2), "max_batch": limit}  # fmt: skip
