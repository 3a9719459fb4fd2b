"""PyTorch -> ONNX: export with torch.export, rewrite the graph, verify the outputs.

The exporter is `torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript). The
legacy TorchScript exporter (`dynamo=False`) produced MiniLM outputs off by more than 1.0
with torch 2.13 and transformers 5; this one matches to ~1e-6. What is exported is the
model family's record (`forgeml.train.models.ModelFamily`): its serving outputs (a text
classifier's `logits` and `embeddings`, so one graph serves classification and embedding
requests), its dynamic axes, and its graph rewrite (BERT-like encoders' fusions).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from forgeml.core.errors import OptimizationError
from forgeml.optimize.session import OnnxModel
from forgeml.train.task import SplitData

if TYPE_CHECKING:
    from forgeml.train.models import ModelFamily

ONNX_FILE = "model.onnx"
_VERIFY_BATCH = 16


@dataclass(frozen=True)
class OnnxGraph:
    """What an export wrote: the graph's input and output names, opset, fused operators."""

    inputs: list[str]
    outputs: list[str]
    opset: int
    fused: dict[str, int] = field(default_factory=dict)


def exportable(module: nn.Module, family: ModelFamily | None = None) -> tuple[nn.Module, list[str]]:
    """The module to export and its output names: the family's serving outputs, or `logits`."""
    if family is None:
        return module.eval(), ["logits"]
    return family.serving_module(module).eval(), list(family.outputs)


def _dynamic_shapes(
    example: dict[str, torch.Tensor], family: ModelFamily | None
) -> dict[str, dict[int, str]]:
    """Batch is dynamic for every input, plus the axes the family names (a sequence)."""
    extra = family.onnx.dynamic_axes if family is not None and family.onnx is not None else {}
    return {name: {0: "batch", **extra.get(name, {})} for name in example}


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    # the exporter logs and warns about optional operator sets (torchvision) and renamed
    # axes while working as intended; warnings are errors under pytest
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._export")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"copyreg|torch\.")
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.")
            # torch's LSTM/GRU export (a while_loop) warns from generated code and contextlib
            warnings.filterwarnings("ignore", "_check_is_size will be removed", FutureWarning)
            warnings.filterwarnings("ignore", "The tensor attributes .*_flat_weights", UserWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _forget_rnn_dispatch() -> None:
    """Drop the cached kernels of aten.lstm and aten.gru before an export.

    The exporter swaps in while-loop RNN kernels (dynamic sequence length) by editing the
    ops' `py_kernels`, which does not clear their dispatch caches (torch 2.13): a second
    LSTM/GRU export in one process then froze the sequence length and failed.
    """
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        cache = getattr(op, "_dispatch_cache", None)
        if isinstance(cache, dict):
            cache.clear()


def export_onnx(
    module: nn.Module,
    example: dict[str, torch.Tensor],
    dest: Path,
    family: ModelFamily | None = None,
) -> OnnxGraph:
    """Export `module` (called with keyword tensors) to the ONNX file `dest`.

    Args:
        module: a model in eval mode.
        example: a batch of at least 2 rows (1 would be specialised as a constant).
        dest: the .onnx file to write.
        family: the model's family: its serving outputs, dynamic axes and graph rewrite
            are exported; None exports `module`'s one output as `logits`.

    Returns:
        The graph's input and output names, opset and fused operators.

    Raises:
        OptimizationError: torch.export or the ONNX conversion fails.
    """
    if family is not None and family.onnx is None:
        raise OptimizationError(f"Model family '{family.name}' does not export to ONNX.")
    target, outputs = exportable(module, family)
    names = list(example)
    _forget_rnn_dispatch()
    try:
        with _quiet_exporter(), torch.inference_mode(False), torch.no_grad():
            program = torch.onnx.export(
                target,
                (),
                kwargs=dict(example),
                dynamo=True,
                input_names=names,
                output_names=outputs,
                dynamic_shapes=_dynamic_shapes(example, family),
                verbose=False,
            )
    except Exception as error:  # torch.export raises many untyped errors on unsupported code
        raise OptimizationError(
            f"The model cannot be exported to ONNX: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}"
        ) from None
    if program is None:
        raise OptimizationError("The ONNX exporter returned no program.")
    program.save(str(dest))
    rewrite = family.onnx.optimize if family is not None and family.onnx is not None else None
    fused = rewrite(dest, module) if rewrite is not None else {}
    return OnnxGraph(names, outputs, _opset(dest), fused)


def _opset(path: Path) -> int:
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    return next((int(o.version) for o in graph.opset_import if o.domain in ("", "ai.onnx")), 0)


def max_abs_difference(
    module: nn.Module,
    onnx: OnnxModel,
    split: SplitData,
    rows: int,
    family: ModelFamily | None = None,
    cap: int | None = None,
) -> tuple[float, int]:
    """Largest |PyTorch - ONNX| over every output on the first `rows` rows of `split`,
    `_VERIFY_BATCH` rows per call, or `cap` where fewer (`OnnxExport.max_rows`).

    Returns:
        The difference and the number of rows compared.
    """
    target, outputs = exportable(module, family)
    count = min(rows, len(split))
    batch = _VERIFY_BATCH if cap is None else max(1, min(_VERIFY_BATCH, cap))
    worst = 0.0
    for start in range(0, count, batch):
        inputs = {name: t[start : min(start + batch, count)] for name, t in split.inputs.items()}
        with torch.inference_mode():
            expected = target(**inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = onnx.run({name: t.numpy() for name, t in inputs.items()}, outputs)
        for name, reference in zip(outputs, expected, strict=True):
            diff = (torch.from_numpy(got[name]) - reference.float()).abs().max().item()
            worst = max(worst, float(diff))
    return worst, count
