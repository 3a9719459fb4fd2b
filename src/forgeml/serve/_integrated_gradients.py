"""Integrated Gradients (Sundararajan et al. 2017) through captum, for PyTorch-served models.

Text: `LayerIntegratedGradients` over the encoder's word-embedding layer, from a baseline
that keeps the special tokens ([CLS], [SEP]) and pads every other one, so only the words
carry attribution; word pieces are merged back into words (their attributions summed).
Tabular: `IntegratedGradients` over the encoded features from the mean background row,
each field's encoded columns summed. Both run the `steps` points of the path as one batch
(captum's default): one forward and one backward pass per explained input, beside one
forward of the input and the baseline that gives the prediction and the base value.

Text paths run their forward and backward under bf16 autocast where the hardware computes
bf16 natively (AVX512-BF16 or AMX on CPU, bf16-capable CUDA), the costliest part of an
explanation: matmuls in bf16, gradients taken w.r.t. the fp32 embedding output and the
attributions summed over the steps in fp32. The prediction and base value stay fp32, as
served, so completeness is checked against the served numbers; the top words equal the
fp32 run's on SST-2 dev sentences (tests/governance/test_explain.py). Elsewhere emulated
bf16 would be slower than fp32, so it stays fp32.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import ConfigError
from forgeml.serve.explain import (
    Attribution,
    Explanation,
    Target,
    sorted_attributions,
    target_of,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    from forgeml.serve._shap import FieldMasker
    from forgeml.serve.model import LoadedModel


def torch_module(model: LoadedModel) -> nn.Module:
    """The PyTorch module of `model` (gradients need it; ONNX Runtime has none)."""
    if model.module is None:
        raise ConfigError(
            f"Model '{model.name}' is loaded in {model.runtime.name}; Integrated Gradients "
            "needs its PyTorch weights (serve it with --runtime torch)."
        )
    # gradients are taken for the inputs only: skipping the weights' saves a third of the
    # backward pass (serving runs in inference mode and never needs them)
    for parameter in model.module.parameters():
        parameter.requires_grad_(False)
    return model.module


def _output(target: Target, logits: torch.Tensor) -> torch.Tensor:
    """The explained output [N] of logits, as `Target.pick` computes it in numpy."""
    if target.class_index is None:
        return logits.reshape(len(logits), -1)[:, 0]
    return logits.softmax(dim=-1)[:, target.class_index]


def explain_features(
    model: LoadedModel, masker: FieldMasker, record: dict[str, Any], steps: int
) -> Explanation:
    """Integrated Gradients of one tabular record, from the mean background row."""
    import torch
    from captum.attr import IntegratedGradients

    module = torch_module(model)
    device = next(module.parameters()).device
    inputs = torch.from_numpy(masker.encode([record])).to(device)
    baseline = torch.from_numpy(masker.encoded_background.mean(axis=0, keepdims=True)).to(device)
    with torch.no_grad():
        logits = module(torch.cat([inputs, baseline]))
        target = target_of(model, logits[0].double().cpu().numpy())
        ends = _output(target, logits).double().cpu().numpy()

    def forward(features: torch.Tensor) -> torch.Tensor:
        return _output(target, module(features))

    with torch.enable_grad():
        found = IntegratedGradients(forward).attribute(inputs, baselines=baseline, n_steps=steps)
    per_column = found[0].detach().double().cpu().numpy()
    per_field = np.bincount(masker.groups, weights=per_column, minlength=len(masker.fields))
    return Explanation(
        method="integrated_gradients",
        output=target.output,
        label=target.label,
        prediction=float(ends[0]),
        base_value=float(ends[1]),
        attributions=sorted_attributions(
            [Attribution(name, float(v)) for name, v in zip(masker.fields, per_field, strict=True)]
        ),
        convergence_delta=_gap(per_column.sum(), ends),
        details={"steps": steps, "baseline": "mean of background rows"},
    )


def _gap(total: float, ends: np.ndarray) -> float:
    """Completeness' residual: the attributions' sum minus f(input) - f(baseline)
    (captum's convergence delta; small when the path integral converged)."""
    return float(total - (ends[0] - ends[1]))


def _tokenizer(model: LoadedModel) -> Any:
    from forgeml.train.models.text_classifier import load_tokenizer, pretrained_path

    params = (model.description.get("model") or {}).get("params") or {}
    return load_tokenizer(pretrained_path(params.get("pretrained")))


def _embedding_layer(model: LoadedModel, module: nn.Module) -> nn.Module:
    encoder: Any = getattr(module, "encoder", None)
    layer = encoder.get_input_embeddings() if hasattr(encoder, "get_input_embeddings") else None
    if layer is None:
        raise ConfigError(
            f"Model '{model.name}' has no pretrained encoder with token embeddings; text "
            "explanations cover the text_classifier family."
        )
    return layer


def native_bf16(device: torch.device) -> bool:
    """Whether `device` multiplies bf16 natively (faster than fp32), not by emulation."""
    import torch

    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        capabilities = torch.cpu.get_capabilities()
        return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    return False


def _path_precision(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[Any]:
    import torch

    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def explain_text(
    model: LoadedModel, text: str, steps: int, bf16: bool | None = None
) -> Explanation:
    """Layer Integrated Gradients of one text over its token embeddings, per word.

    Args:
        model: a loaded text_classifier model version.
        text: the text to explain.
        steps: integration steps.
        bf16: run the path under bf16 autocast; None: where the device has native bf16.
    """
    import torch
    from captum.attr import LayerIntegratedGradients

    module = torch_module(model)
    layer = _embedding_layer(model, module)
    tokenizer = _tokenizer(model)
    device = next(module.parameters()).device
    bf16 = native_bf16(device) if bf16 is None else bf16
    arrays = model.row_encoder().encode([text])
    ids = torch.from_numpy(arrays["input_ids"]).to(device)
    mask = torch.from_numpy(arrays["attention_mask"]).to(device)
    ids_list = ids[0].tolist()
    special = tokenizer.get_special_tokens_mask(ids_list, already_has_special_tokens=True)
    keep = torch.tensor(special, dtype=torch.bool, device=device)
    baseline = torch.where(keep, ids[0], tokenizer.pad_token_id)[None]
    with torch.no_grad():
        logits = module(torch.cat([ids, baseline]), mask.repeat(2, 1))
        target = target_of(model, logits[0].double().cpu().numpy())
        ends = _output(target, logits).double().cpu().numpy()

    def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return _output(target, module(input_ids, attention_mask))

    with torch.enable_grad(), _path_precision(device, bf16):
        # all steps in one batch (captum's default): one forward and one backward pass;
        # the gradients w.r.t. the fp32 embedding output come back fp32 and captum sums
        # the steps in fp32
        found = LayerIntegratedGradients(forward, layer).attribute(
            ids, baselines=baseline, additional_forward_args=(mask,), n_steps=steps
        )
    per_token = found[0].float().sum(dim=-1).detach().double().cpu().numpy()
    tokens = tokenizer.convert_ids_to_tokens(ids_list)
    return Explanation(
        method="integrated_gradients",
        output=target.output,
        label=target.label,
        prediction=float(ends[0]),
        base_value=float(ends[1]),
        attributions=sorted_attributions(_words(tokens, per_token, special)),
        convergence_delta=_gap(per_token.sum(), ends),
        details={
            "steps": steps,
            "baseline": "padding tokens",
            "precision": "bf16" if bf16 else "fp32",
        },
    )


def _words(tokens: list[str], values: np.ndarray, special: list[int]) -> list[Attribution]:
    """Word pieces merged into words ("play", "##ing" -> "playing"), specials left out."""
    words: list[tuple[str, float]] = []
    for token, value, is_special in zip(tokens, values, special, strict=True):
        if is_special:
            continue  # kept in the baseline: exactly zero attribution
        if token.startswith("##") and words:
            word, total = words[-1]
            words[-1] = (word + token[2:], total + float(value))
        else:
            words.append((token, float(value)))
    return [Attribution(word, value, position) for position, (word, value) in enumerate(words)]
