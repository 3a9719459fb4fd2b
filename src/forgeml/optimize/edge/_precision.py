"""fp32 or int8 for an edge bundle: measured on held-out rows, int8 kept only where it agrees.

Dynamic int8 (`forgeml.optimize.quantize`) shrinks a graph about 4x and is often faster on
CPU, but it can move a classifier's decision. `choose_precision` quantises the fp32 graph,
then measures on up to `AGREEMENT_ROWS` held-out rows how often both pick the same class,
and the batch-1 p50 latency and file size of each; under `auto` int8 is kept only when the
agreement reaches `MIN_AGREEMENT` and int8 is smaller or faster.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import OptimizationError

if TYPE_CHECKING:
    import numpy as np

    from forgeml.train.task import SplitData

AGREEMENT_ROWS = 512
MIN_AGREEMENT = 0.99  # share of held-out rows where int8 picks fp32's class
LATENCY_REPEATS = 50
_BATCH = 64


@dataclass(frozen=True)
class HeldOut:
    """The rows a choice is measured on: the model's task and its held-out split."""

    task: str
    split: SplitData


@dataclass(frozen=True)
class Precision:
    """The chosen precision and the figures it was chosen on (None: not measured)."""

    chosen: str  # fp32 or int8
    reason: str
    size_bytes: dict[str, int]
    p50_ms_batch_1: dict[str, float]
    agreement: float | None
    rows: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": self.chosen,
            "reason": self.reason,
            "size_bytes": self.size_bytes,
            "p50_ms_batch_1": self.p50_ms_batch_1,
            "agreement": self.agreement,
            "agreement_rows": self.rows,
        }


def _session(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _feeds(session: Any, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    names = {i.name for i in session.get_inputs()}
    return {name: tensor.numpy() for name, tensor in inputs.items() if name in names}


def _classes(session: Any, split: SplitData, rows: int) -> np.ndarray:
    import numpy as np

    from forgeml.optimize._inputs import batch_rows

    found = []
    for start in range(0, rows, _BATCH):
        inputs = batch_rows(split, start, min(_BATCH, rows - start))
        (logits,) = session.run(["logits"], _feeds(session, inputs))
        found.append(np.asarray(logits).argmax(axis=1))
    return np.concatenate(found)


def _p50(session: Any, split: SplitData) -> float:
    from forgeml.optimize._inputs import batch_rows
    from forgeml.optimize.latency import measure

    feeds = _feeds(session, batch_rows(split, 0, 1))
    return measure(lambda: session.run(None, feeds), 1, LATENCY_REPEATS).p50_ms


def choose_precision(
    fp32: Path, held: HeldOut | None, wanted: str, description: dict[str, Any], dest: Path
) -> Precision:
    """Write the graph of the chosen precision to `dest` and say why it was chosen.

    Raises:
        OptimizationError: int8 was asked for where it cannot be measured or made.
    """
    from forgeml.optimize.quantize import quantize_int8

    quantized = (description.get("onnx") or {}).get("quantization")
    if quantized or wanted == "fp32" or held is None or held.task != "classification":
        if wanted == "int8" and not quantized:
            raise OptimizationError(
                "int8 is chosen on held-out agreement, which needs a classifier trained by "
                "forgeml; export this model with --precision fp32 or auto."
            )
        shutil.copyfile(fp32, dest)
        reason = (
            f"the registered graph is {quantized} already" if quantized
            else "fp32 asked for" if wanted == "fp32"
            else "int8 agreement is measured on a classifier's held-out rows; none here"
        )  # fmt: skip
        label = str(quantized or "fp32")
        return Precision(label, reason, {label: dest.stat().st_size}, {}, None, 0)
    int8 = dest.with_name("int8.onnx")
    quantize_int8(fp32, int8)
    return _measured(fp32, int8, held, wanted, dest)


def _measured(fp32: Path, int8: Path, held: HeldOut, wanted: str, dest: Path) -> Precision:
    rows = min(AGREEMENT_ROWS, len(held.split))
    sessions = {"fp32": _session(fp32), "int8": _session(int8)}
    agreement = float((_classes(sessions["fp32"], held.split, rows)
                       == _classes(sessions["int8"], held.split, rows)).mean())  # fmt: skip
    p50 = {name: _p50(session, held.split) for name, session in sessions.items()}
    size = {"fp32": fp32.stat().st_size, "int8": int8.stat().st_size}
    helps = size["int8"] < size["fp32"] or p50["int8"] < p50["fp32"]
    if wanted == "int8":
        chosen, reason = "int8", "int8 asked for"
    elif agreement >= MIN_AGREEMENT and helps:
        chosen, reason = "int8", f"int8 agrees with fp32 on {agreement:.2%} of {rows} rows"
    else:
        chosen = "fp32"
        reason = (
            f"int8 agrees with fp32 on {agreement:.2%} of {rows} rows, under {MIN_AGREEMENT:.0%}"
        )
        if agreement >= MIN_AGREEMENT:
            reason = "int8 is neither smaller nor faster"
    shutil.copyfile(int8 if chosen == "int8" else fp32, dest)
    int8.unlink()
    return Precision(chosen, reason, size, p50, agreement, rows)
