"""ONNX Runtime dynamic int8 quantisation: int8 weights, activations quantised per batch.

Dynamic quantisation (weights QInt8, activation scales computed at run time) needs no
calibration data and suits transformer encoders on CPU, where MatMul dominates
(ONNX Runtime's quantization guide recommends it for BERT-like models). A fused
com.microsoft Attention becomes QAttention, int8 Q/K/V weights, only in the form
`onnx_export` writes (a `mask_index` input, no `qkv_hidden_sizes`); others stay fp32.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from forgeml.core.errors import OptimizationError

SUPPORTED = ("int8",)


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    # quantize_dynamic logs an advisory on the root logger on every call; the graph it
    # refers to (shape inference) is already optimised by the export step
    hint = _DropPreprocessHint()
    logging.getLogger().addFilter(hint)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(hint)


def quantize_int8(source: Path, dest: Path, per_channel: bool = True) -> None:
    """Write an int8 (dynamic) quantised copy of the ONNX graph `source` to `dest`.

    Args:
        source: fp32 ONNX file.
        dest: the quantised file to write.
        per_channel: one scale per output channel of each weight instead of per tensor.

    Raises:
        OptimizationError: ONNX Runtime cannot quantise the graph.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    try:
        with _quiet_quantizer():
            quantize_dynamic(
                str(source), str(dest), weight_type=QuantType.QInt8, per_channel=per_channel
            )
    except Exception as error:  # the quantizer raises plain Exceptions on graphs it rejects
        raise OptimizationError(f"ONNX Runtime cannot quantise {source}: {error}") from None
