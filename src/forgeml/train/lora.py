"""LoRA fine-tuning through PEFT (Hu et al. 2021, "LoRA: Low-Rank Adaptation").

`apply_lora` wraps the pretrained `encoder` of a model (the `text_classifier`) in a PEFT
model: the encoder's weights freeze and low-rank update matrices are added to its target
layers, while everything outside the encoder (the classifier head) stays trainable.

An adapter folder holds only what training changed, in PEFT's own format plus the head:

    adapter_model.safetensors   the LoRA matrices (PEFT keys)
    adapter_config.json         r, alpha, dropout, target modules, base model path
    head.safetensors            the parameters outside the encoder (the classifier head)

`load_adapter` puts it back on a freshly built base model; `merge_adapter` folds the update
into the base weights (W + B A * alpha / r) for serving, leaving a plain model.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.train.config import LoraConfig

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
HEAD_WEIGHTS = "head.safetensors"
_ENCODER_PREFIX = "encoder."


@contextlib.contextmanager
def _peft_quietly() -> Iterator[None]:
    # peft 0.21 reads transformers' deprecated `is_gradient_checkpointing` when wrapping a
    # model; the FutureWarning is theirs to fix and says nothing about our configuration.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
        )
        yield


def _encoder(model: nn.Module) -> nn.Module:
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, nn.Module):
        raise ConfigError(
            f"LoRA adapts a pretrained encoder, but {type(model).__name__} has no `encoder` "
            "module; use model text_classifier (or a model with an `encoder` attribute)."
        )
    return encoder


def _is_adapted(encoder: nn.Module) -> bool:
    from peft import PeftModel

    return isinstance(encoder, PeftModel)


# Layer types PEFT's LoRA can adapt (transformers' GPT-2 style Conv1D included).
_ADAPTABLE = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.MultiheadAttention)


def _check_targets(encoder: nn.Module, targets: list[str]) -> None:
    modules = [(name, module) for name, module in encoder.named_modules() if name]
    linear = sorted({name.rsplit(".", 1)[-1] for name, m in modules if isinstance(m, nn.Linear)})
    for target in targets:
        # PEFT's rule for a list of names: the full module name or its dotted suffix
        matched = [m for name, m in modules if name == target or name.endswith("." + target)]
        if not matched:
            raise ConfigError(
                f"lora.target_modules: '{target}' matches no layer of the encoder; "
                f"choose among its linear layers: {', '.join(linear)}."
            )
        if not any(_adaptable(module) for module in matched):
            kind = type(matched[0]).__name__
            raise ConfigError(
                f"lora.target_modules: '{target}' names {kind} layers, which LoRA cannot "
                f"adapt; choose among the encoder's linear layers: {', '.join(linear)}."
            )


def _adaptable(module: nn.Module) -> bool:
    return isinstance(module, _ADAPTABLE) or type(module).__name__ == "Conv1D"


def apply_lora(model: nn.Module, config: LoraConfig) -> nn.Module:
    """Wrap `model.encoder` with LoRA adapters; only they and the head stay trainable.

    Args:
        model: A model whose pretrained encoder is at `model.encoder` (text_classifier).
        config: Rank, alpha, dropout and target modules (empty: the encoder's attention
            query/value projections).

    Returns:
        `model` itself, its `encoder` now a `peft.PeftModel`.

    Raises:
        ConfigError: No encoder, an encoder already adapted, or target modules that
            match no layer (or a layer LoRA cannot adapt).
    """
    import peft

    encoder = _encoder(model)
    if _is_adapted(encoder):
        raise ConfigError("The model's encoder already has a LoRA adapter; apply LoRA once.")
    targets = list(config.target_modules)
    if not targets:
        from forgeml.train.models.text_classifier import encoder_module_names

        targets = encoder_module_names(model)  # type: ignore[arg-type]
    _check_targets(encoder, targets)
    peft_config = peft.LoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=targets,
    )
    try:
        with _peft_quietly():
            adapted = peft.get_peft_model(encoder, peft_config)
    except ValueError as error:  # anything PEFT refuses that the checks above let through
        reason = str(error).split(". ", 1)[0].rstrip(".")
        raise ConfigError(
            f"lora.target_modules {targets} cannot be adapted ({reason}); "
            "target linear layers such as the attention projections."
        ) from None
    model.encoder = adapted
    for name, parameter in model.named_parameters():
        if not name.startswith(_ENCODER_PREFIX):
            parameter.requires_grad_(True)
    return model


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts of `model`, shared parameters counted once."""
    trainable = total = 0
    for parameter in model.parameters():
        total += parameter.numel()
        if parameter.requires_grad:
            trainable += parameter.numel()
    return trainable, total


def _head_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: tensor.detach().contiguous()
        for name, tensor in model.state_dict().items()
        if not name.startswith(_ENCODER_PREFIX)
    }


def save_adapter(model: nn.Module, directory: str | Path) -> int:
    """Save only the adapter (and the head) of a LoRA model, as safetensors + JSON.

    Each file is written in a temporary folder beside `directory` and renamed into place.

    Args:
        model: A model returned by `apply_lora` (or `load_adapter`).
        directory: Folder to write; created if missing, same-named files replaced.

    Returns:
        The adapter's size in bytes (all files written).

    Raises:
        ConfigError: The model has no LoRA adapter.
    """
    from safetensors.torch import save_file

    encoder = _encoder(model)
    if not _is_adapted(encoder):
        raise ConfigError("The model has no LoRA adapter to save; apply_lora first.")
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}-") as scratch:
        staging = Path(scratch)
        encoder.save_pretrained(str(staging), safe_serialization=True)  # type: ignore[operator]
        (staging / "README.md").unlink(missing_ok=True)  # PEFT's boilerplate model card
        save_file(_head_state(model), str(staging / HEAD_WEIGHTS))
        target.mkdir(exist_ok=True)
        size = 0
        # the config last: a folder with a config has its weights
        for name in (ADAPTER_WEIGHTS, HEAD_WEIGHTS, ADAPTER_CONFIG):
            size += (staging / name).stat().st_size
            os.replace(staging / name, target / name)
    return size


def load_adapter(
    base_model: nn.Module, directory: str | Path, *, trainable: bool = False
) -> nn.Module:
    """Put a saved adapter and head on a freshly built base model.

    Args:
        base_model: The same architecture as at training time, without an adapter.
        directory: A folder written by `save_adapter`.
        trainable: Keep training the adapter and head (else they are frozen, for inference).

    Returns:
        `base_model`, adapted; its outputs match the saved model's.

    Raises:
        NotFoundError: The folder is not a saved adapter.
        ConfigError: The model already has an adapter, or the head does not fit.
    """
    from peft import PeftModel
    from safetensors.torch import load_file

    folder = Path(directory)
    missing = [
        n for n in (ADAPTER_WEIGHTS, ADAPTER_CONFIG, HEAD_WEIGHTS) if not (folder / n).is_file()
    ]
    if missing:
        raise NotFoundError(
            f"{folder} is not a saved LoRA adapter (no {', '.join(missing)}); "
            "give the folder save_adapter wrote."
        )
    encoder = _encoder(base_model)
    if _is_adapted(encoder):
        raise ConfigError(
            "The model's encoder already has a LoRA adapter; load into a fresh model."
        )
    head = load_file(str(folder / HEAD_WEIGHTS))
    _check_head(base_model, head, folder)  # before wrapping: a misfit leaves the model as it was
    with _peft_quietly():
        base_model.encoder = PeftModel.from_pretrained(encoder, str(folder), is_trainable=trainable)
    base_model.load_state_dict(head, strict=False)
    for name, parameter in base_model.named_parameters():
        if not name.startswith(_ENCODER_PREFIX):
            parameter.requires_grad_(trainable)
    return base_model


def _check_head(model: nn.Module, head: dict[str, torch.Tensor], folder: Path) -> None:
    expected = _head_state(model)
    fits = head.keys() == expected.keys() and all(
        head[name].shape == tensor.shape for name, tensor in expected.items()
    )
    if not fits:
        raise ConfigError(
            f"The head saved in {folder} does not fit this model (other layers or number of "
            "outputs); build the base model with the task the adapter was trained on."
        )


def has_adapter(model: nn.Module) -> bool:
    """Whether `model.encoder` carries a LoRA adapter (not merged yet)."""
    encoder = getattr(model, "encoder", None)
    return isinstance(encoder, nn.Module) and _is_adapted(encoder)


def merge_adapter(model: nn.Module) -> nn.Module:
    """Fold the LoRA update into the encoder's weights, for serving and export.

    The model is changed in place: `model.encoder` becomes the plain base architecture
    again (W + B A * alpha / r in each target layer), with the same outputs.

    Raises:
        ConfigError: The model has no LoRA adapter.
    """
    encoder = _encoder(model)
    if not _is_adapted(encoder):
        raise ConfigError("The model has no LoRA adapter to merge; apply_lora first.")
    model.encoder = encoder.merge_and_unload()  # type: ignore[operator]
    return model
