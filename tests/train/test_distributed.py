from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.distributed import (
    cleanup,
    init_distributed,
    launch,
    torchrun_command,
    under_torchrun,
    wrap_model,
)
from forgeml.train.step import DistContext
from tests.train import ddp_worker

REPO = Path(__file__).resolve().parents[2]
WORKER = "tests.train.ddp_worker"
TIMEOUT_S = 120


@pytest.fixture
def job_env() -> dict[str, str]:
    # workers import forgeml and this test package whatever the current directory
    path = os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)


def _train_alone(out: Path, *args: str) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    torch.set_num_threads(1)
    ddp_worker.main([str(out), *args])
    return load_file(out / "weights.safetensors"), json.loads((out / "result.json").read_text())


@pytest.mark.slow
def test_two_cpu_processes_match_one_with_the_same_global_batch(
    tmp_path: Path, job_env: dict[str, str], alone: None
) -> None:
    # two micro-steps per optimiser step: DDP must skip the first all-reduce, not the last
    args = ["--steps", "6", "--batch-size", "32", "--grad-accum", "2"]
    worker_args = [str(tmp_path / "two"), *args, "--report-shutdown-threads"]
    code = launch(2, WORKER, worker_args, job_env, timeout=TIMEOUT_S)
    assert code == 0
    # no rank ran interpreter shutdown with gloo's threads alive (DDP keeps them past
    # destroy_process_group): that race killed about one run in ten with SIGABRT
    for report in (tmp_path / "two").glob("shutdown-threads-rank*.txt"):
        assert "gloo" not in report.read_text(), report.read_text()
    two = load_file(tmp_path / "two" / "weights.safetensors")
    two_result = json.loads((tmp_path / "two" / "result.json").read_text())
    one, one_result = _train_alone(tmp_path / "one", *args)
    assert two_result["world_size"] == 2
    assert one_result["world_size"] == 1
    assert two.keys() == one.keys()
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, atol=1e-5, rtol=1e-5, msg=name)
    assert two_result["train_loss"] == pytest.approx(one_result["train_loss"], abs=1e-5)
    assert two_result["final_metrics"] == pytest.approx(one_result["final_metrics"], abs=1e-5)
    # the run learned something, so matching weights are not trivially the initial ones
    losses = one_result["train_loss"]
    assert isinstance(losses, list)
    assert losses[-1] < losses[0]


def test_a_failing_job_returns_a_nonzero_exit_code(tmp_path: Path, job_env: dict[str, str]) -> None:
    # a light worker (no torch import) that exits 2 on a missing file; torchrun then exits 1
    assert launch(1, "json.tool", [str(tmp_path / "missing.json")], job_env, timeout=60) == 1


def test_a_job_past_its_timeout_is_stopped(tmp_path: Path, job_env: dict[str, str]) -> None:
    args = [str(tmp_path), "--steps", "1000000"]
    assert launch(1, WORKER, args, job_env, timeout=1.0) == -9


def test_torchrun_command_runs_the_module_standalone() -> None:
    command = torchrun_command(4, "forgeml.train.worker", ["run.yaml", "--resume"])
    assert command == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "4",
        "-m",
        "forgeml.train.worker",
        "run.yaml",
        "--resume",
    ]


@pytest.mark.parametrize("nproc", [0, -2])
def test_torchrun_command_needs_a_worker(nproc: int) -> None:
    with pytest.raises(ConfigError, match=rf"workers must be at least 1 \(got {nproc}\)\."):
        torchrun_command(nproc, "m", [])


def test_alone_is_rank_zero_of_one(alone: None) -> None:
    ctx = init_distributed()
    assert not under_torchrun()
    assert (ctx.rank, ctx.world_size, ctx.is_main) == (0, 1, True)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert ctx.device.type == expected
    cleanup()


def test_alone_the_model_is_not_wrapped(alone: None) -> None:
    model = nn.Linear(3, 2)
    assert wrap_model(model, DistContext(), "ddp") is model


def test_fsdp_on_cpu_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^fsdp needs GPUs; use strategy ddp on CPU\.$"):
        wrap_model(nn.Linear(3, 2), DistContext(device=torch.device("cpu")), "fsdp")


def test_unknown_strategy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"Unknown distributed strategy 'zero3': choose ddp"):
        wrap_model(nn.Linear(3, 2), DistContext(), "zero3")  # type: ignore[arg-type]
