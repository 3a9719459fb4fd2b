"""`OnnxModel`: an ONNX model bundle behind an ONNX Runtime inference session.

The model server's onnx runtime and `forgeml models compare` run ONNX bundles through
this class. Inputs are named as the PyTorch model's forward keywords (`features`;
`input_ids`, `attention_mask`; `images`) and cast to the dtypes the graph declares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.devices import DeviceName, onnx_providers, report, started_placement
from forgeml.core.errors import InvalidDataError

if TYPE_CHECKING:
    import onnxruntime

# ONNX tensor type names -> numpy dtypes, for the input kinds forgeml's models take
_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def read_description(bundle_dir: Path) -> dict[str, Any]:
    """A bundle's `model.json`.

    Raises:
        InvalidDataError: the bundle has no readable model.json.
    """
    path = Path(bundle_dir) / "model.json"
    try:
        description: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise InvalidDataError(
            f"Model bundle {bundle_dir} has no readable model.json ({type(error).__name__})."
        ) from None
    return description


def is_onnx_bundle(bundle_dir: Path) -> bool:
    """True when the bundle's weights are an ONNX graph (no PyTorch safetensors)."""
    description = read_description(bundle_dir)
    return bool(description.get("onnx")) and not (Path(bundle_dir) / "model.safetensors").exists()


class OnnxModel:
    """An ONNX bundle ready to run: `run({"features": array}) -> {"logits": array}`."""

    def __init__(
        self, bundle_dir: Path, threads: int | None = None, device: DeviceName = "auto"
    ) -> None:
        """Open the bundle's ONNX graph in an inference session.

        Args:
            bundle_dir: a model bundle whose model.json has an `onnx` section.
            threads: intra-op threads per operator (ONNX Runtime's default: all cores).
            device: cuda, cpu or auto (`forgeml.core.devices`); `self.device` says
                where the session runs ("cuda" when a GPU provider leads).

        Raises:
            InvalidDataError: the bundle has no ONNX graph, or the graph cannot be loaded.
        """
        import onnxruntime as ort

        self.bundle_dir = Path(bundle_dir)
        self.description = read_description(self.bundle_dir)
        info = self.description.get("onnx")
        if not isinstance(info, dict) or not (self.bundle_dir / str(info.get("file"))).is_file():
            raise InvalidDataError(
                f"Model bundle {bundle_dir} has no ONNX graph; export one with "
                "`forgeml optimize MODEL_REF --onnx`."
            )
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        path = self.bundle_dir / str(info["file"])
        asked = onnx_providers(device)
        try:
            self.session: onnxruntime.InferenceSession = ort.InferenceSession(
                str(path), options, providers=list(asked.providers)
            )
        except Exception as error:  # onnxruntime raises its own untyped Fail/InvalidGraph
            raise InvalidDataError(f"ONNX graph {path} cannot be loaded: {error}") from None
        self.device = report(started_placement(device, asked, self.session.get_providers())).device
        self._input_types = {i.name: _DTYPES.get(i.type) for i in self.session.get_inputs()}
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    @property
    def size_bytes(self) -> int:
        """Bytes of the ONNX graph file (weights included)."""
        return (self.bundle_dir / str(self.description["onnx"]["file"])).stat().st_size

    def run(
        self, inputs: dict[str, np.ndarray], outputs: list[str] | None = None
    ) -> dict[str, np.ndarray]:
        """Run the graph on one batch.

        Args:
            inputs: one array per input name, batch first.
            outputs: output names to compute; default all.

        Returns:
            The named output arrays.

        Raises:
            InvalidDataError: an input is missing or unknown, or an output name is unknown.
        """
        missing = [name for name in self.input_names if name not in inputs]
        extra = [name for name in inputs if name not in self._input_types]
        if missing or extra:
            raise InvalidDataError(
                f"The model takes inputs {', '.join(self.input_names)}; "
                + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}")
                + "."
            )
        wanted = outputs or self.output_names
        unknown = [name for name in wanted if name not in self.output_names]
        if unknown:
            raise InvalidDataError(
                f"The model has outputs {', '.join(self.output_names)}, not {', '.join(unknown)}."
            )
        feed = {
            name: np.asarray(inputs[name], dtype=self._input_types[name])
            for name in self.input_names
        }
        results = self.session.run(wanted, feed)
        return {name: np.asarray(value) for name, value in zip(wanted, results, strict=True)}
