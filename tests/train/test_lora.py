from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.train.config import LoraConfig
from forgeml.train.lora import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    HEAD_WEIGHTS,
    apply_lora,
    load_adapter,
    merge_adapter,
    save_adapter,
    trainable_parameters,
)
from forgeml.train.models.text_classifier import TextClassifier, build, pretrained_path, tokenize
from forgeml.train.task import SplitData, TaskData

TEXTS = ["a gripping, funny film", "dull and far too long", "the cast is superb", "a mess"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)


def _task(classes: int = 2) -> TaskData:
    return TaskData(task="classification", train=SplitData({}, torch.zeros(0)), num_classes=classes)


def _base(seed: int = 0, classes: int = 2) -> TextClassifier:
    torch.manual_seed(seed)
    return build(_task(classes))


@pytest.fixture
def inputs() -> dict[str, torch.Tensor]:
    return tokenize(TEXTS, {})


def _logits(model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**inputs)


def _trained(inputs: dict[str, torch.Tensor], config: LoraConfig | None = None) -> nn.Module:
    # a few real steps, so the adapter (lora_B starts at zero) and the head have moved
    model = apply_lora(_base(), config or LoraConfig(dropout=0.0))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    targets = torch.tensor([1, 0, 1, 0])
    model.train()
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(**inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def test_only_the_adapter_and_the_head_train() -> None:
    model = apply_lora(_base(), LoraConfig(r=8, alpha=16, target_modules=["query", "value"]))
    trainable, total = trainable_parameters(model)
    lora = [name for name, _ in model.named_parameters() if "lora_" in name]
    head = [name for name, _ in model.named_parameters() if name.startswith("head.")]
    assert {name for name, p in model.named_parameters() if p.requires_grad} == {*lora, *head}
    # 6 layers x (query, value) x (A: 8x384 + B: 384x8) + head 384x2 + 2
    assert len(lora) == 24
    assert trainable == 6 * 2 * 2 * 8 * 384 + 384 * 2 + 2
    assert trainable / total < 0.01
    assert total > 22_000_000


def test_gradients_reach_only_trainable_parameters(inputs: dict[str, torch.Tensor]) -> None:
    model = apply_lora(_base(), LoraConfig())
    model(**inputs).sum().backward()
    with_grad = {name for name, p in model.named_parameters() if p.grad is not None}
    assert with_grad == {name for name, p in model.named_parameters() if p.requires_grad}


def test_a_fresh_adapter_does_not_change_the_outputs(inputs: dict[str, torch.Tensor]) -> None:
    before = _logits(_base(), inputs)
    after = _logits(apply_lora(_base(), LoraConfig()), inputs)
    torch.testing.assert_close(after, before)


def test_saved_adapter_is_small_and_reloads_to_the_same_outputs(
    tmp_path: Path, inputs: dict[str, torch.Tensor]
) -> None:
    model = _trained(inputs)
    expected = _logits(model, inputs)
    size = save_adapter(model, tmp_path / "adapter")
    files = sorted(path.name for path in (tmp_path / "adapter").iterdir())
    assert files == sorted([ADAPTER_WEIGHTS, ADAPTER_CONFIG, HEAD_WEIGHTS])
    assert size == sum(path.stat().st_size for path in (tmp_path / "adapter").iterdir())
    base_bytes = (Path(pretrained_path(None)) / "model.safetensors").stat().st_size
    assert size < base_bytes / 100

    assert all("lora_" in key for key in load_file(tmp_path / "adapter" / ADAPTER_WEIGHTS))
    assert set(load_file(tmp_path / "adapter" / HEAD_WEIGHTS)) == {"head.weight", "head.bias"}
    saved = json.loads((tmp_path / "adapter" / ADAPTER_CONFIG).read_text())
    assert (saved["r"], saved["lora_alpha"], saved["peft_type"]) == (8, 16, "LORA")
    assert saved["base_model_name_or_path"] == pretrained_path(None)

    fresh = _base(seed=1)  # another head initialisation, which the saved head replaces
    assert not torch.allclose(_logits(fresh, inputs), expected)
    loaded = load_adapter(fresh, tmp_path / "adapter")
    torch.testing.assert_close(_logits(loaded, inputs), expected, atol=1e-6, rtol=0)
    assert trainable_parameters(loaded)[0] == 0


def test_a_loaded_adapter_can_keep_training(
    tmp_path: Path, inputs: dict[str, torch.Tensor]
) -> None:
    save_adapter(_trained(inputs), tmp_path / "adapter")
    loaded = load_adapter(_base(), tmp_path / "adapter", trainable=True)
    names = {name for name, p in loaded.named_parameters() if p.requires_grad}
    assert names
    assert all("lora_" in name or name.startswith("head.") for name in names)


def test_saving_again_replaces_the_adapter(tmp_path: Path, inputs: dict[str, torch.Tensor]) -> None:
    save_adapter(apply_lora(_base(), LoraConfig()), tmp_path / "adapter")
    model = _trained(inputs)
    save_adapter(model, tmp_path / "adapter")
    loaded = load_adapter(_base(), tmp_path / "adapter")
    torch.testing.assert_close(_logits(loaded, inputs), _logits(model, inputs))
    assert [path.name for path in tmp_path.iterdir()] == ["adapter"]  # no temporaries left


def test_merged_model_gives_the_same_logits(inputs: dict[str, torch.Tensor]) -> None:
    model = _trained(inputs)
    adapted = _logits(model, inputs)
    merged = merge_adapter(model)
    assert type(merged.encoder).__name__ == "BertModel"
    assert not any("lora_" in name for name, _ in merged.named_parameters())
    torch.testing.assert_close(_logits(merged, inputs), adapted, atol=1e-5, rtol=0)
    # same architecture as the base again: its weights load into a freshly built model
    fresh = _base(seed=3)
    fresh.load_state_dict(merged.state_dict())
    torch.testing.assert_close(_logits(fresh, inputs), adapted, atol=1e-5, rtol=0)


def test_empty_target_modules_adapt_the_attention_projections() -> None:
    model = apply_lora(_base(), LoraConfig(target_modules=[]))
    adapted = {
        name.split(".lora_")[0].rsplit(".", 1)[-1]
        for name, _ in model.named_parameters()
        if "lora_" in name
    }
    assert adapted == {"query", "value"}


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        (
            ["qkv"],
            r"lora.target_modules: 'qkv' matches no layer of the encoder; choose among "
            r"its linear layers: dense, key, query, value\.",
        ),
        (
            ["LayerNorm"],
            r"'LayerNorm' names LayerNorm layers, which LoRA cannot adapt; "
            r"choose among the encoder's linear layers: dense, key, query, value\.",
        ),
    ],
)
def test_bad_target_modules_are_config_errors(targets: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_lora(_base(), LoraConfig(target_modules=targets))


def test_a_model_without_encoder_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"Linear has no `encoder` module; use model"):
        apply_lora(nn.Linear(3, 2), LoraConfig())


def test_applying_twice_is_a_config_error() -> None:
    model = apply_lora(_base(), LoraConfig())
    with pytest.raises(ConfigError, match="already has a LoRA adapter; apply LoRA once"):
        apply_lora(model, LoraConfig())


@pytest.mark.parametrize("action", [save_adapter, lambda model, _dir: merge_adapter(model)])
def test_saving_or_merging_without_adapter_is_a_config_error(
    tmp_path: Path, action: object
) -> None:
    with pytest.raises(ConfigError, match=r"has no LoRA adapter to (save|merge); apply_lora first"):
        action(_base(), tmp_path / "adapter")  # type: ignore[operator]


def test_loading_from_a_folder_without_adapter_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"is not a saved LoRA adapter \(no adapter_model"):
        load_adapter(_base(), tmp_path)


def test_loading_into_a_head_of_another_size_is_a_config_error(
    tmp_path: Path, inputs: dict[str, torch.Tensor]
) -> None:
    save_adapter(_trained(inputs), tmp_path / "adapter")
    other = _base(classes=3)
    with pytest.raises(ConfigError, match=r"does not fit this model \(other layers or number"):
        load_adapter(other, tmp_path / "adapter")
    assert type(other.encoder).__name__ == "BertModel"  # left as it was
