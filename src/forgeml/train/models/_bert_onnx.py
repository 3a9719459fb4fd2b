"""ONNX graph fusions for BERT-like encoders, run after the export of a text classifier.

The exporter is `torch.onnx.export(..., dynamo=True)`; BERT-like encoders then go through
onnxscript's ONNX Runtime fusions (attention, the bulk of the speed-up) and ONNX Runtime's
transformer optimizer (LayerNorm/GELU fusion). The text classifier family names
`fuse_bert` as its export's graph rewrite.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnxscript import ir
    from torch import nn

# encoder families whose graphs ONNX Runtime's "bert" optimizer knows
_BERT_LIKE = frozenset({"bert", "roberta", "distilbert", "xlm-roberta", "electra", "mpnet"})
_FOLD_LIMIT = 1 << 30  # elements


def fuse_bert(path: Path, module: nn.Module) -> dict[str, int]:
    """Run ONNX Runtime's transformer optimizer on a BERT-like encoder's graph in place.

    `module` is the exported model (its `encoder.config` says the encoder family); other
    encoders are left as exported.

    Returns:
        The fused operators and their counts (empty when nothing was fused).
    """
    encoder = getattr(module, "encoder", None)
    config: Any = getattr(encoder, "config", None)
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
