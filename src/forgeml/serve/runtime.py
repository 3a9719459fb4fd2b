"""Inference engines behind one small interface, chosen by name from a registry.

A `Runtime` maps named numpy arrays to named numpy arrays, so batching, protocols and
metrics never see which engine ran: "torch" rebuilds the module from the bundle's
safetensors (`load_bundle_model`), "onnx" runs the bundle's `model.onnx` through ONNX
Runtime (`forgeml.optimize.OnnxModel`). Either runs on the GPU or the CPU as
`ServeOptions.device` says (`forgeml.core.devices`: cuda falls back to the CPU with one
log line where this machine has no usable GPU). Input and output names are those of the model's
family (`forgeml.train.models.ModelFamily`: its forward keywords and its serving outputs,
e.g. a text classifier's `logits` and `embeddings`), as the ONNX export names them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from forgeml.core.devices import DeviceName, torch_device
from forgeml.core.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from torch import nn

    from forgeml.train.models import ModelFamily


class Runtime(Protocol):
    """A loaded model that runs named arrays; safe to call from one thread at a time."""

    name: str
    input_names: list[str]
    output_names: list[str]

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run one batch and return the requested `outputs`."""
        ...


RuntimeLoader = Callable[[Path, dict[str, Any], "int | None", DeviceName], Runtime]
_RUNTIMES: dict[str, RuntimeLoader] = {}


def register_runtime(name: str, loader: RuntimeLoader) -> None:
    """Make `loader(bundle_dir, description, intra_op_threads, device)` available as runtime
    `name` (`device`: auto, cuda or cpu; `forgeml.core.devices`)."""
    _RUNTIMES[name] = loader


def load_runtime(
    name: str,
    bundle_dir: Path,
    description: dict[str, Any],
    threads: int | None = None,
    device: DeviceName = "auto",
) -> Runtime:
    """Load the bundle in `bundle_dir` with the runtime called `name`, on `device`.

    Raises:
        UsageError: no runtime of that name.
        ConfigError: the bundle lacks what the runtime needs (e.g. `model.onnx`).
    """
    if name not in _RUNTIMES:
        known = ", ".join(sorted(_RUNTIMES))
        raise UsageError(f"Unknown runtime '{name}': use one of {known}.")
    return _RUNTIMES[name](bundle_dir, description, threads, device)


class TorchRuntime:
    """PyTorch eager, in inference mode, on the CPU or the first GPU."""

    name = "torch"

    def __init__(self, module: nn.Module, family: ModelFamily, device: str = "cpu") -> None:
        self.device = device
        self.module = module.to(device)  # what a language model generates with
        self.input_names = list(family.inputs)
        self.output_names = list(family.outputs)
        self._serving = family.serving_module(self.module).eval()

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run the family's serving module on the arrays and keep the requested outputs."""
        import torch

        tensors = {
            name: torch.from_numpy(inputs[name]).to(self.device) for name in self.input_names
        }
        with torch.inference_mode():
            found = self._serving(**tensors)
        found = found if isinstance(found, tuple) else (found,)
        named = dict(zip(self.output_names, found, strict=True))
        return {name: named[name].float().cpu().numpy() for name in outputs}


def _load_torch(
    bundle_dir: Path, description: dict[str, Any], threads: int | None, device: DeviceName
) -> Runtime:
    import torch

    from forgeml.train.models import family_of
    from forgeml.train.recipe import load_bundle_model

    if not (bundle_dir / "model.safetensors").exists() and not (bundle_dir / "adapter").exists():
        raise ConfigError(
            "The model bundle has no PyTorch weights (model.safetensors); serve it with "
            "--runtime onnx."
        )
    if threads is not None:
        torch.set_num_threads(threads)  # process-wide: one server, one thread budget
    placed = torch_device(device, torch.cuda.is_available())
    return TorchRuntime(load_bundle_model(bundle_dir), family_of(description), placed)


class OnnxRuntime:
    """ONNX Runtime over the bundle's `model.onnx` (H1's `OnnxModel`)."""

    name = "onnx"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.device = model.device  # "cuda" when a GPU provider leads its session
        self.input_names = list(model.input_names)
        self.output_names = list(model.output_names)

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run the ONNX graph for `outputs` (float32 results; strings as they are)."""
        feeds = {name: inputs[name] for name in self.input_names}
        results = self.model.run(feeds, outputs)
        return {name: _as_float32(np.asarray(results[name])) for name in outputs}


def _as_float32(values: np.ndarray) -> np.ndarray:
    # a graph from another framework may answer strings (a classifier's labels)
    return values if values.dtype.kind in "OUS" else values.astype(np.float32)


def _load_onnx(
    bundle_dir: Path, description: dict[str, Any], threads: int | None, device: DeviceName
) -> Runtime:
    from forgeml.optimize import OnnxModel

    if not (bundle_dir / "model.onnx").exists() or "onnx" not in description:
        raise ConfigError(
            "The model version has no ONNX export (model.onnx); make one with "
            "`forgeml optimize MODEL --onnx` and serve that version, or use --runtime torch."
        )
    return OnnxRuntime(OnnxModel(bundle_dir, threads=threads, device=device))


register_runtime("torch", _load_torch)
register_runtime("onnx", _load_onnx)
