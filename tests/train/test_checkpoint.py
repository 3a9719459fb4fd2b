from __future__ import annotations

import contextlib
import json
import random
import resource
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from torch import nn

from forgeml.train.checkpoint import (
    CheckpointError,
    TrainState,
    config_digest,
    list_checkpoints,
    load_latest,
    save_checkpoint,
)
from forgeml.train.config import ScheduleConfig, TrainConfig
from forgeml.train.distributed import cleanup, exit_rank
from forgeml.train.logger import NullLogger
from forgeml.train.loop import fit
from forgeml.train.schedule import build_scheduler
from forgeml.train.step import DistContext
from forgeml.train.task import SplitData, TaskData


def is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 400


class TiedNet(nn.Module):
    """Embedding and output head share one matrix, as in GPT-style models."""

    def __init__(self, vocab: int = 10, width: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(tokens)))


Trio = tuple[TiedNet, torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]


def trained_trio(seed: int = 0, width: int = 6, steps: int = 3) -> Trio:
    torch.manual_seed(seed)
    model = TiedNet(width=width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = build_scheduler(optimizer, ScheduleConfig(name="cosine", warmup_steps=2), 50)
    for _ in range(steps):
        model(torch.randint(0, 10, (4, 5))).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return model, optimizer, scheduler


def save(run_dir: Path, trio: Trio, step: int, keep: int = 3) -> Path:
    model, optimizer, scheduler = trio
    state = TrainState(step=step, epoch=1, batch_in_epoch=4, best_metric=0.5, bad_evals=1)
    folder = save_checkpoint(
        run_dir, model=model, optimizer=optimizer, scheduler=scheduler, state=state, keep=keep
    )
    assert folder is not None
    return folder


def names(run_dir: Path) -> list[str]:
    return [path.name for path in list_checkpoints(run_dir)]


def test_round_trip_restores_weights_optimizer_scheduler_rng_and_position(
    tmp_path: Path,
) -> None:
    source = trained_trio(seed=0)
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    folder = save(tmp_path, source, step=7)
    expected_draws = (torch.rand(3), np.random.rand(3), random.random())

    target = trained_trio(seed=1, steps=1)
    checkpoint = load_latest(tmp_path)
    assert checkpoint is not None and checkpoint.path == folder
    assert checkpoint.state == TrainState(
        step=7, epoch=1, batch_in_epoch=4, best_metric=0.5, bad_evals=1
    )
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    checkpoint.restore(*target)

    for name, tensor in source[0].state_dict().items():
        assert torch.equal(tensor, target[0].state_dict()[name]), name
    assert target[0].head.weight is target[0].embed.weight  # still tied
    source_state, target_state = source[1].state_dict(), target[1].state_dict()
    for index, moments in source_state["state"].items():
        for key, value in moments.items():
            assert torch.equal(value, target_state["state"][index][key])
    assert target[2].last_epoch == source[2].last_epoch == 3
    assert target[2].get_last_lr() == source[2].get_last_lr()
    assert torch.equal(torch.rand(3), expected_draws[0])
    assert np.array_equal(np.random.rand(3), expected_draws[1])
    assert random.random() == expected_draws[2]


def test_files_are_safetensors_and_weights_only_torch_files(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    folder = save(tmp_path, trained_trio(), step=1)
    assert sorted(path.name for path in folder.iterdir()) == [
        "model.safetensors",
        "optimizer.pt",
        "rng.safetensors",
        "state.json",
    ]
    weights = load_file(folder / "model.safetensors")
    assert set(weights) == {"embed.weight", "norm.weight", "norm.bias"}  # tied head stored once
    saved = torch.load(folder / "optimizer.pt", weights_only=True)
    assert set(saved) == {"optimizer", "scheduler"}
    assert json.loads((folder / "state.json").read_text())["step"] == 1


def test_keep_prunes_all_but_the_newest_checkpoints(tmp_path: Path) -> None:
    trio = trained_trio()
    for step in range(1, 6):
        save(tmp_path, trio, step=step, keep=2)
    assert names(tmp_path) == ["step-000004", "step-000005"]
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step-000005"


def test_saving_the_same_step_again_replaces_it(tmp_path: Path) -> None:
    save(tmp_path, trained_trio(seed=0), step=3)
    save(tmp_path, trained_trio(seed=1), step=3)
    checkpoint = load_latest(tmp_path)
    assert checkpoint is not None and names(tmp_path) == ["step-000003"]
    restored = trained_trio(seed=5, steps=0)
    checkpoint.restore(*restored)
    assert torch.equal(restored[0].embed.weight, trained_trio(seed=1)[0].embed.weight)
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]


@contextlib.contextmanager
def file_size_limit() -> Iterator[None]:
    """Make writes past 4 KiB fail with EFBIG (a real "disk full" in the middle of a file)."""
    if sys.platform != "linux":
        pytest.skip("RLIMIT_FSIZE failure injection needs Linux")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_write_failing_midway_leaves_no_partial_checkpoint(tmp_path: Path) -> None:
    save(tmp_path, trained_trio(width=6), step=1)
    big = trained_trio(width=200)  # its weights are far over the 4 KiB limit
    with pytest.raises(CheckpointError) as error, file_size_limit():
        save(tmp_path, big, step=2)
    assert "step-000002" in str(error.value) and "previous checkpoint is kept" in str(error.value)
    assert is_one_sentence(str(error.value))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest",
        "step-000001",
    ]
    checkpoint = load_latest(tmp_path)
    assert checkpoint is not None and checkpoint.state.step == 1
    checkpoint.restore(*trained_trio(width=6, steps=0))


def test_an_unwritable_run_folder_is_a_checkpoint_error(tmp_path: Path) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("a file where the run folder should be")
    with pytest.raises(CheckpointError) as error:
        save(blocker, trained_trio(), step=1)
    assert "Cannot write checkpoint step-000001" in str(error.value)
    assert is_one_sentence(str(error.value))
    assert blocker.read_text() == "a file where the run folder should be"


def test_load_latest_falls_back_when_the_pointer_is_missing_or_dangling(tmp_path: Path) -> None:
    trio = trained_trio()
    save(tmp_path, trio, step=4)
    save(tmp_path, trio, step=8)
    pointer = tmp_path / "checkpoints" / "latest"
    pointer.write_text("step-000099\n")  # a crash between the two renames of a re-save
    assert load_latest(tmp_path).state.step == 8  # type: ignore[union-attr]
    pointer.unlink()
    (tmp_path / "checkpoints" / "step-000012").mkdir()  # no state.json: incomplete
    assert load_latest(tmp_path).state.step == 8  # type: ignore[union-attr]


def test_load_latest_of_a_run_without_checkpoints_is_none(tmp_path: Path) -> None:
    assert load_latest(tmp_path) is None
    (tmp_path / "checkpoints").mkdir()
    assert load_latest(tmp_path) is None


def test_a_corrupt_state_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    folder = save(tmp_path, trained_trio(), step=2)
    (folder / "state.json").write_text("{not json")
    with pytest.raises(CheckpointError) as error:
        load_latest(tmp_path)
    assert "cannot be read" in str(error.value) and is_one_sentence(str(error.value))


@pytest.mark.parametrize("damage", ["other_model", "truncated_optimizer"])
def test_restoring_into_the_wrong_objects_is_a_checkpoint_error(
    tmp_path: Path, damage: str
) -> None:
    folder = save(tmp_path, trained_trio(), step=2)
    target = trained_trio(steps=0)
    if damage == "other_model":
        target = trained_trio(width=8, steps=0)
    else:
        raw = (folder / "optimizer.pt").read_bytes()
        (folder / "optimizer.pt").write_bytes(raw[: len(raw) // 2])
    checkpoint = load_latest(tmp_path)
    assert checkpoint is not None
    with pytest.raises(CheckpointError) as error:
        checkpoint.restore(*target)
    assert "cannot be restored" in str(error.value) and is_one_sentence(str(error.value))


def test_config_digest_ignores_checkpointing_and_workers_but_not_the_recipe() -> None:
    base = {
        "name": "r",
        "data": {"dataset": "d", "target": "y"},
        "model": {"name": "mlp"},
        "epochs": 1,
    }

    def digest(**extra: object) -> str:
        return config_digest(TrainConfig.model_validate({**base, **extra}))

    assert digest() == digest(workers=4, checkpoint={"every_steps": 3, "keep": 5})
    assert digest() != digest(optimizer={"lr": 0.5})
    assert digest() != digest(seed=1)


# --- FSDP2: shards gathered into one checkpoint, and scattered back on resume -------------


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)


def fsdp_job() -> tuple[TaskData, TrainConfig]:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(96, 6, generator=generator)
    targets = (features[:, 0] > features[:, 1]).long()
    split = SplitData({"features": features}, targets)
    config = TrainConfig.model_validate(
        {
            "name": "fsdp",
            "data": {"dataset": "toy", "target": "y"},
            "model": {"name": "mlp"},
            "epochs": 2,
            "batch_size": 16,
            "grad_accum": 2,
            "clip_grad_norm": 1.0,
            "checkpoint": {"every_steps": 3},
        }
    )
    return TaskData("classification", split, split, num_classes=2, class_names=["a", "b"]), config


def sharded_net(world: int) -> DropoutNet:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = DropoutNet()
    mesh = init_device_mesh("cpu", (world,))
    for layer in (model.net[0], model.net[3], model):
        fully_shard(layer, mesh=mesh)
    return model


def fsdp_worker(rank: int, world: int, folder: str) -> None:
    import torch.distributed as torch_dist
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    torch.set_num_threads(1)
    torch_dist.init_process_group(
        "gloo", init_method=f"file://{folder}/store", rank=rank, world_size=world
    )
    data, config = fsdp_job()
    context = DistContext(rank=rank, world_size=world)
    polls = iter(range(1000))
    runs = Path(folder)
    common: dict[str, Any] = {"logger": NullLogger(), "dist": context}
    stopped = fit(
        sharded_net(world),
        data,
        config,
        run_dir=runs / "a",
        should_stop=lambda: next(polls) == 4,
        **common,
    )
    resumed_model = sharded_net(world)
    resumed = fit(resumed_model, data, config, run_dir=runs / "a", resume=True, **common)
    straight_model = sharded_net(world)
    straight = fit(straight_model, data, config, run_dir=runs / "b", **common)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights: dict[str, torch.Tensor] = {
        f"{which}/{name}": cast(torch.Tensor, tensor)
        for which, model in (("resumed", resumed_model), ("straight", straight_model))
        for name, tensor in get_model_state_dict(model, options=options).items()
    }
    if rank == 0:
        save_file(weights, str(runs / "weights.safetensors"))
        summary = {
            "stopped": [stopped.steps, stopped.preempted],
            "resumed": [resumed.steps, resumed.final_metrics["loss"]],
            "straight": [straight.steps, straight.final_metrics["loss"]],
        }
        (runs / "summary.json").write_text(json.dumps(summary))
    # a rank ends as forgeml's torchrun worker does (FSDP2's mesh keeps gloo's threads alive)
    cleanup()
    exit_rank(0)


@pytest.mark.slow
def test_an_fsdp2_run_checkpoints_full_weights_and_resumes_exactly(tmp_path: Path) -> None:
    import torch.multiprocessing as mp
    from safetensors.torch import load_file, load_model

    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    mp.spawn(fsdp_worker, args=(2, str(tmp_path)), nprocs=2)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped"] == [5, True]
    assert summary["resumed"][0] == summary["straight"][0] == 12
    assert summary["resumed"][1] == pytest.approx(summary["straight"][1], abs=1e-6)
    weights = load_file(tmp_path / "weights.safetensors")
    for name, tensor in weights.items():
        if name.startswith("straight/"):
            resumed = weights[name.replace("straight/", "resumed/")]
            assert torch.allclose(tensor, resumed, atol=1e-6), name
    # the checkpoint holds whole tensors: a plain, unsharded model loads it
    plain = DropoutNet()
    load_model(plain, tmp_path / "b" / "checkpoints" / "step-000012" / "model.safetensors")
    assert torch.equal(plain.state_dict()["net.0.weight"], weights["straight/net.0.weight"])
