from __future__ import annotations

import math
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.checkpoint import CheckpointError
from forgeml.train.config import TrainConfig, load_config
from forgeml.train.deepspeed import (
    check_deepspeed_runtime,
    convert_zero_checkpoint,
    deepspeed_json,
    zero_to_state_dict,
)
from forgeml.train.distributed import wrap_model
from forgeml.train.logger import NullLogger
from forgeml.train.loop import fit
from forgeml.train.step import DistContext
from forgeml.train.task import SplitData, TaskData
from forgeml.train.zero import allow_deepspeed_globals, engine_arguments


def _config(**overrides: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "name": "m",
        "data": {"dataset": "d", "target": "y"},
        "model": {"name": "mlp"},
        "max_steps": 10,
        "batch_size": 64,
        "strategy": "deepspeed",
    }
    return TrainConfig.model_validate({**base, **overrides})


def test_the_deepspeed_json_carries_every_setting() -> None:
    config = _config(
        precision="bf16",
        grad_accum=2,
        clip_grad_norm=1.0,
        optimizer={"name": "adamw", "lr": 3e-4, "weight_decay": 0.01},
        deepspeed={"zero_stage": 3, "offload_optimizer": "cpu", "offload_param": "cpu"},
    )

    assert deepspeed_json(config, world_size=4) == {
        "train_batch_size": 64,
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 2,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "fp16": {"enabled": False},
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.01}},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": True,
            "contiguous_gradients": True,
            "reduce_bucket_size": 500_000_000,
            "offload_optimizer": {"device": "cpu", "pin_memory": True},
            "offload_param": {"device": "cpu", "pin_memory": True},
        },
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def test_the_sections_precision_overrides_the_runs_and_sgd_keeps_its_momentum() -> None:
    config = _config(
        precision="bf16",
        optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.5},
        deepspeed={"zero_stage": 1, "precision": "fp16"},
    )

    ds = deepspeed_json(config, world_size=1)

    assert ds["bf16"] == {"enabled": False}
    assert ds["fp16"] == {"enabled": True}
    assert ds["gradient_clipping"] == 0.0
    assert ds["optimizer"] == {
        "type": "SGD",
        "params": {"lr": 0.1, "weight_decay": 0.0, "momentum": 0.5},
    }
    assert ds["zero_optimization"]["stage"] == 1
    assert "offload_optimizer" not in ds["zero_optimization"]


def test_a_batch_that_does_not_split_over_the_ranks_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^batch_size 64 must be a multiple of grad_accum x"):
        deepspeed_json(_config(), world_size=3)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"zero_stage": 4}, "'deepspeed.zero_stage'"),
        ({"stage": 2}, "unknown key 'deepspeed.stage'"),
        ({"offload_optimizer": "nvme"}, "'deepspeed.offload_optimizer'"),
        ({"zero_stage": 2, "offload_param": "cpu"}, "`offload_param` needs `zero_stage: 3`"),
    ],
)
def test_a_bad_deepspeed_section_names_the_file_and_the_key(
    tmp_path: Path, section: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(
        "name: m\ndata: {dataset: d, target: y}\nmodel: {name: mlp}\nmax_steps: 1\n"
        f"strategy: deepspeed\ndeepspeed: {section}\n"
    )

    with pytest.raises(ConfigError) as error:
        load_config(str(path))

    assert str(path) in str(error.value)
    assert expected in str(error.value)


def test_without_cuda_a_deepspeed_run_is_refused_in_one_sentence() -> None:
    with pytest.raises(ConfigError, match=r"^strategy deepspeed needs a CUDA GPU") as error:
        check_deepspeed_runtime(cuda=False)

    assert "\n" not in str(error.value)


def test_without_cuda_wrap_model_refuses_deepspeed_in_one_sentence() -> None:
    with pytest.raises(ConfigError, match=r"^strategy deepspeed needs a CUDA GPU") as error:
        wrap_model(nn.Linear(3, 2), DistContext(), "deepspeed")

    assert "\n" not in str(error.value)


def test_without_cuda_fit_refuses_deepspeed_before_any_work(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 2))
    before = [tensor.clone() for tensor in model.state_dict().values()]
    features = torch.randn(64, 8)
    split = SplitData({"input": features}, (features[:, 0] > 0).long())
    task = TaskData("classification", split, split, num_classes=2, class_names=["a", "b"])
    config = _config(batch_size=16, max_steps=2, deepspeed={"zero_stage": 2})

    with pytest.raises(ConfigError, match=r"^strategy deepspeed needs a CUDA GPU"):
        fit(model, task, config, run_dir=tmp_path / "run", logger=NullLogger())

    assert not (tmp_path / "run").exists()
    after = list(model.state_dict().values())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize(
    ("section", "optimizer_device"),
    [
        ({"zero_stage": 2}, "cuda"),
        ({"zero_stage": 3, "offload_optimizer": "cpu", "offload_param": "cpu"}, "cpu"),
    ],
)
def test_the_engine_gets_forgemls_optimiser_and_deepspeeds_zero_settings(
    section: dict[str, Any], optimizer_device: str
) -> None:
    config = _config(precision="bf16", grad_accum=2, clip_grad_norm=0.5, deepspeed=section)

    arguments = engine_arguments(config, world_size=2, device_type="cuda")

    expected = deepspeed_json(config, world_size=2)
    del expected["optimizer"]  # forgeml's optimiser object is passed instead
    assert arguments.config == {
        **expected,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
    }
    assert arguments.config["train_micro_batch_size_per_gpu"] == 16
    assert arguments.config["gradient_clipping"] == 0.5
    assert arguments.config["zero_optimization"]["stage"] == section["zero_stage"]
    assert arguments.optimizer_device == optimizer_device
    assert arguments.autocast is False


class Opaque:  # a class from outside the deepspeed package, as a crafted shard could hold
    def __init__(self) -> None:
        self.payload = "x"


def test_only_deepspeeds_own_classes_are_let_through_weights_only(tmp_path: Path) -> None:
    path = tmp_path / "mp_rank_00_model_states.pt"
    torch.save({"opaque": Opaque(), "w": torch.ones(2)}, path)

    with allow_deepspeed_globals(tmp_path), pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 5)
        self.hidden = nn.Linear(5, 3)
        self.norm = nn.BatchNorm1d(3)
        self.out = nn.Linear(5, 7, bias=False)
        self.out.weight = self.embed.weight  # tied, as in language models


def _model_states(model: nn.Module, groups: list[list[str]]) -> dict[str, Any]:
    params = dict(model.named_parameters())
    return {
        "module": {name: buffer.clone() for name, buffer in model.named_buffers()},
        "buffer_names": [name for name, _ in model.named_buffers()],
        "param_shapes": [OrderedDict((n, params[n].shape) for n in group) for group in groups],
        "shared_params": [["out.weight", "embed.weight"]],
    }


def _zero12(model: nn.Module, groups: list[list[str]], ranks: int, stage: int) -> list[Any]:
    params = dict(model.named_parameters())
    flats = []
    for group in groups:
        flat = torch.cat([params[n].detach().flatten() for n in group])
        # DeepSpeed pads each group to a multiple of 2 x world size before slicing it
        padded = math.ceil(flat.numel() / (2 * ranks)) * 2 * ranks
        flats.append(torch.cat([flat, torch.zeros(padded - flat.numel())]).chunk(ranks))
    return [
        {
            "optimizer_state_dict": {
                "zero_stage": stage,
                "partition_count": ranks,
                "single_partition_of_fp32_groups": [chunks[rank] for chunks in flats],
            }
        }
        for rank in range(ranks)
    ]


def _zero3(model: nn.Module, groups: list[list[str]], ranks: int) -> list[Any]:
    params = dict(model.named_parameters())
    per_rank: list[list[list[torch.Tensor]]] = [[[] for _ in groups] for _ in range(ranks)]
    for index, group in enumerate(groups):
        for name in group:
            flat = params[name].detach().flatten()
            part = math.ceil(flat.numel() / ranks)
            flat = torch.cat([flat, torch.zeros(part * ranks - flat.numel())])
            for rank in range(ranks):
                per_rank[rank][index].append(flat[rank * part : (rank + 1) * part])
    return [
        {
            "optimizer_state_dict": {
                "zero_stage": 3,
                "partition_count": ranks,
                "fp32_flat_groups": [torch.cat(parts) for parts in rank_groups],
            }
        }
        for rank_groups in per_rank
    ]


_GROUPS = [["embed.weight", "hidden.weight"], ["hidden.bias", "norm.weight", "norm.bias"]]


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_a_zero_checkpoint_converts_to_the_models_own_state_dict(stage: int, ranks: int) -> None:
    torch.manual_seed(0)
    model = _Tied()
    model.norm.running_mean.normal_()
    optim = _zero3(model, _GROUPS, ranks) if stage == 3 else _zero12(model, _GROUPS, ranks, stage)

    weights = zero_to_state_dict(_model_states(model, _GROUPS), optim)

    expected = model.state_dict()
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor.float(), rtol=0, atol=0)


def test_a_converted_checkpoint_folder_loads_into_a_fresh_model(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = _Tied()
    tag = tmp_path / "global_step7"
    tag.mkdir()
    torch.save(_model_states(model, _GROUPS), tag / "mp_rank_00_model_states.pt")
    for rank, state in enumerate(_zero3(model, _GROUPS, 2)):
        torch.save(state, tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")

    written = convert_zero_checkpoint(tag, tmp_path / "bundle")

    fresh = _Tied()
    fresh.load_state_dict(load_file(written))
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[name], tensor, rtol=0, atol=0)


def test_a_zero3_folder_with_per_rank_model_states_converts(tmp_path: Path) -> None:
    # ZeRO-3 writes zero_pp_rank_R_mp_rank_00_model_states.pt, no mp_rank_00 file; bf16
    # optimisers prefix their states with bf16_
    torch.manual_seed(2)
    model = _Tied()
    tag = tmp_path / "zero"
    tag.mkdir()
    for rank, state in enumerate(_zero3(model, _GROUPS, 2)):
        torch.save(
            _model_states(model, _GROUPS), tag / f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt"
        )
        torch.save(state, tag / f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")

    written = convert_zero_checkpoint(tag, tmp_path / "bundle")

    fresh = _Tied()
    fresh.load_state_dict(load_file(written))
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[name], tensor, rtol=0, atol=0)


def test_a_checkpoint_too_short_for_its_shapes_is_refused() -> None:
    model = _Tied()
    optim = _zero12(model, _GROUPS[:1], 1, 2)
    states = _model_states(model, _GROUPS[:1])
    states["param_shapes"][0]["extra"] = torch.Size([100])

    with pytest.raises(CheckpointError, match="too short for parameter 'extra'"):
        zero_to_state_dict(states, optim)


def test_a_folder_without_zero_states_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="holds no DeepSpeed optimiser states"):
        convert_zero_checkpoint(tmp_path, tmp_path / "out")
