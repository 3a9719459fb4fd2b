"""PyTorch -> ONNX: export with torch.export, fuse transformer graphs, verify the outputs.

The exporter is `torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript). The
legacy TorchScript exporter (`dynamo=False`) produced MiniLM outputs off by more than 1.0
with torch 2.13 and transformers 5; this one matches to ~1e-6. BERT-like encoders then go
through onnxscript's ONNX Runtime fusions (attention, the bulk of the speed-up) and ONNX
Runtime's transformer optimizer (LayerNorm/GELU fusion). Text classifiers get a second
output, `embeddings`, the pooled sentence vector, so one graph serves classification and
embedding requests.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from forgeml.core.errors import OptimizationError
from forgeml.optimize.session import OnnxModel
from forgeml.train.task import SplitData

if TYPE_CHECKING:
    from onnxscript import ir

ONNX_FILE = "model.onnx"
# encoder families whose graphs ONNX Runtime's "bert" optimizer knows
_BERT_LIKE = frozenset({"bert", "roberta", "distilbert", "xlm-roberta", "electra", "mpnet"})
_VERIFY_BATCH = 16
_FOLD_LIMIT = 1 << 30  # elements


@dataclass(frozen=True)
class OnnxGraph:
    """What an export wrote: the graph's input and output names, opset, fused operators."""

    inputs: list[str]
    outputs: list[str]
    opset: int
    fused: dict[str, int] = field(default_factory=dict)


class _TextOutputs(nn.Module):
    """A text classifier returning (logits, pooled sentence vectors)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        model: Any = self.model
        embeddings = model.embed(input_ids, attention_mask)
        return model.classify(embeddings), embeddings


def _is_text_classifier(module: nn.Module) -> bool:
    from forgeml.train.models.text_classifier import TextClassifier

    return isinstance(module, TextClassifier)


def exportable(module: nn.Module) -> tuple[nn.Module, list[str]]:
    """The module to export and its output names (`logits`, plus `embeddings` for text)."""
    if _is_text_classifier(module):
        return _TextOutputs(module).eval(), ["logits", "embeddings"]
    return module.eval(), ["logits"]


def _dynamic_shapes(example: dict[str, torch.Tensor]) -> dict[str, dict[int, str]]:
    """Batch is dynamic for every input; token inputs also vary in sequence length."""
    shapes: dict[str, dict[int, str]] = {}
    for name, tensor in example.items():
        dims = {0: "batch"}
        if name in ("input_ids", "attention_mask") and tensor.dim() == 2:
            dims[1] = "sequence"
        shapes[name] = dims
    return shapes


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
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def export_onnx(module: nn.Module, example: dict[str, torch.Tensor], dest: Path) -> OnnxGraph:
    """Export `module` (called with keyword tensors) to the ONNX file `dest`.

    Args:
        module: a forgeml zoo model in eval mode.
        example: a batch of at least 2 rows (1 would be specialised as a constant).
        dest: the .onnx file to write.

    Returns:
        The graph's input and output names, opset and fused operators.

    Raises:
        OptimizationError: torch.export or the ONNX conversion fails.
    """
    target, outputs = exportable(module)
    names = list(example)
    try:
        with _quiet_exporter(), torch.inference_mode(False), torch.no_grad():
            program = torch.onnx.export(
                target,
                (),
                kwargs=dict(example),
                dynamo=True,
                input_names=names,
                output_names=outputs,
                dynamic_shapes=_dynamic_shapes(example),
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
    fused = _fuse_transformer(dest, module)
    return OnnxGraph(names, outputs, _opset(dest), fused)


def _opset(path: Path) -> int:
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    return next((int(o.version) for o in graph.opset_import if o.domain in ("", "ai.onnx")), 0)


def _fuse_transformer(path: Path, module: nn.Module) -> dict[str, int]:
    """Run ONNX Runtime's transformer optimizer on a BERT-like encoder's graph in place."""
    if not _is_text_classifier(module):
        return {}
    config: Any = module.encoder.config  # type: ignore[union-attr]
    if getattr(config, "model_type", None) not in _BERT_LIKE:
        return {}
    from onnxruntime.transformers.optimizer import optimize_model
    from onnxscript import ir, optimizer
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    # ONNX Runtime's own matcher does not recognise the attention of a torch.export graph
    # (scaled_dot_product_attention with a boolean mask); onnxscript's ORT fusions rewrite
    # it into ORT's fused Attention op, then ORT's optimizer fuses what it knows
    fused, _ = optimize_for_ort(ir.load(str(path)))
    # fold the fused Attention's Q/K/V weight concatenation into one initializer (the
    # default limits skip tensors this large), so it is a weight and not run-time work
    optimizer.fold_constants(fused, input_size_limit=_FOLD_LIMIT, output_size_limit=_FOLD_LIMIT)
    _attention_mask_index(fused)
    optimizer.remove_unused_nodes(fused)  # the additive mask's subgraph, now unread
    ir.save(fused, str(path))
    optimized = optimize_model(
        str(path),
        model_type="bert",
        num_heads=int(config.num_attention_heads),
        hidden_size=int(config.hidden_size),
    )
    optimized.save_model_to_file(str(path))
    return {name: int(n) for name, n in optimized.get_fused_operator_statistics().items() if n}


def _attention_mask_index(model: ir.Model) -> None:
    """Give the fused Attention ops the padding mask as `mask_index`, in ORT's BERT form.

    onnxscript's fusion feeds each com.microsoft Attention an additive `attention_bias`
    computed from `attention_mask` and sets `qkv_hidden_sizes`. ONNX Runtime's dynamic
    quantiser skips an Attention with `qkv_hidden_sizes`, leaving the Q/K/V weights (a
    quarter of an encoder layer's GEMM work) fp32, and its QAttention has no
    `attention_bias` input, so it would drop the mask. A bias computed from
    `attention_mask` alone is, in a BERT-like encoder, the key padding mask, which
    Attention also takes as a 2-D `mask_index` (1 = attend), the form ONNX Runtime's own
    BERT fusion emits; equal Q/K/V sizes are the default.
    """
    from onnxscript import ir

    graph = model.graph
    attention_mask = next((v for v in graph.inputs if v.name == "attention_mask"), None)
    if attention_mask is None:
        return
    mask_index: ir.Value | None = None
    for node in list(graph):
        if not _has_padding_bias(node, attention_mask):
            continue
        if mask_index is None:
            cast = ir.node("Cast", [attention_mask], {"to": ir.DataType.INT32})
            graph.insert_before(node, cast)
            mask_index = cast.outputs[0]
        node.resize_inputs(4)
        node.replace_input_with(3, mask_index)
        sizes = node.attributes.get("qkv_hidden_sizes")
        if sizes is not None and len(set(sizes.as_ints())) == 1:
            del node.attributes["qkv_hidden_sizes"]


def _has_padding_bias(node: ir.Node, attention_mask: ir.Value) -> bool:
    """An ORT Attention whose only mask is an `attention_bias` made from `attention_mask`.

    A bias that also reads other graph inputs (MPNet's relative position bias reads the
    sequence) is more than padding and stays.
    """
    if node.op_type != "Attention" or node.domain != "com.microsoft" or len(node.inputs) != 6:
        return False
    _, _, _, mask, past, bias = node.inputs
    if mask is not None or past is not None or bias is None:
        return False
    pending, seen = [bias], set[int]()
    while pending:
        value = pending.pop()
        if value is attention_mask or id(value) in seen:
            continue
        seen.add(id(value))
        if value.is_graph_input():
            return False
        producer = value.producer()
        if producer is not None:
            pending.extend(v for v in producer.inputs if v is not None)
    return True


def max_abs_difference(
    module: nn.Module, onnx: OnnxModel, split: SplitData, rows: int
) -> tuple[float, int]:
    """Largest |PyTorch - ONNX| over every output on the first `rows` rows of `split`.

    Returns:
        The difference and the number of rows compared.
    """
    target, outputs = exportable(module)
    count = min(rows, len(split))
    worst = 0.0
    for start in range(0, count, _VERIFY_BATCH):
        inputs = {
            name: t[start : min(start + _VERIFY_BATCH, count)] for name, t in split.inputs.items()
        }
        with torch.inference_mode():
            expected = target(**inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = onnx.run({name: t.numpy() for name, t in inputs.items()}, outputs)
        for name, reference in zip(outputs, expected, strict=True):
            diff = (torch.from_numpy(got[name]) - reference.float()).abs().max().item()
            worst = max(worst, float(diff))
    return worst, count
