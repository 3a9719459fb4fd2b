"""`export_edge`: a registered model as a folder that runs with onnxruntime and numpy alone.

The folder holds the ONNX graph (int8 when it agrees with fp32 on held-out rows), the
tokenizer.json or the FeatureSpec's steps as plain JSON, model.json (what the runner
needs), runner.py and manifest.json (a SHA-256 per file, and the precision figures). It is
built in a private folder beside the destination and renamed into place: a failure leaves
no folder behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from forgeml.core.errors import AlreadyExistsError, OptimizationError, UsageError
from forgeml.optimize.edge._precision import HeldOut, Precision, choose_precision

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.models import ModelFamily

PrecisionChoice = Literal["auto", "fp32", "int8"]
EDGE_FORMAT = 1
MANIFEST = "manifest.json"
RUNNER = Path(__file__).with_name("runner.py")
VERIFY_TOLERANCE = 1e-4  # max |PyTorch - ONNX| on held-out rows, as `forgeml optimize --onnx`


@dataclass(frozen=True)
class EdgeBundle:
    """What `export_edge` wrote: the folder, its files and the precision it chose."""

    source: str  # NAME@vN
    folder: Path
    files: dict[str, str]  # name -> sha256
    precision: Precision

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.source,
            "folder": str(self.folder),
            "files": self.files,
            **self.precision.as_dict(),
        }


def check_destination(dest: Path) -> None:
    """Raises AlreadyExistsError unless `dest` is absent or an empty folder."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise AlreadyExistsError(
            f"{dest} exists and is not an empty folder; choose a new folder for the edge bundle."
        )


def export_edge(
    workspace: Workspace, ref: str, dest: Path, precision: PrecisionChoice = "auto"
) -> EdgeBundle:
    """Write model version `ref` as an edge bundle in the new folder `dest`.

    Args:
        workspace: holds the model version (and its training data, for the checks).
        ref: `NAME`, `NAME@vN` or `NAME@ALIAS`.
        dest: an absent or empty folder.
        precision: auto: int8 only where it agrees with fp32 on held-out rows; or forced.

    Raises:
        AlreadyExistsError: `dest` is not empty.
        NotFoundError: no such model version.
        OptimizationError: a model the edge runner cannot run, or an export that differs.
    """
    from forgeml.optimize.session import read_description
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.models import family_of

    if precision not in ("auto", "fp32", "int8"):
        raise UsageError(f"Unknown precision '{precision}': use auto, fp32 or int8.")
    check_destination(dest)
    record = get_model_version(workspace, ref)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".forgeml-edge-", dir=dest.parent) as scratch:
        work = Path(scratch)
        source = download_bundle(workspace, record, work / "source")
        description = read_description(source)
        family = family_of(description)
        kind = _kind(family, description)
        held = _held_out(workspace, record, kind)
        fp32 = _fp32_graph(source, description, family, held, work)
        stage = work / "edge"
        stage.mkdir()
        chosen = choose_precision(fp32, held, precision, description, stage / "model.onnx")
        _companions(source, description, family, kind, stage)
        _write_json(stage / "model.json", _edge_description(record, description, kind, stage))
        shutil.copyfile(RUNNER, stage / "runner.py")
        files = _manifest(stage, record, chosen)
        if dest.exists():
            dest.rmdir()
        os.replace(stage, dest)
    return EdgeBundle(record.ref, dest, files, chosen)


def _kind(family: ModelFamily, description: dict[str, Any]) -> str:
    """tabular, text or graph: how the runner reads rows; refuses the rest."""
    if "graph" in description:  # an imported graph: rows by its own inputs
        return "graph"
    if family.modality in ("tabular", "text"):
        return family.modality
    raise OptimizationError(
        "Edge bundles hold tabular, text and imported-graph models; "
        f"{description['model']['name']} is a {family.modality} model."
    )


def _held_out(workspace: Workspace, record: ModelVersionRecord, kind: str) -> HeldOut | None:
    """The held-out split the model was scored on; None for a graph imported from elsewhere."""
    from forgeml.optimize._inputs import held_out, training_config
    from forgeml.train.data import load_task_data

    if kind == "graph":
        return None
    config = training_config(workspace, record)
    task = load_task_data(workspace, config)
    _, split = held_out(task, record.ref)
    return HeldOut(task.task, split)


def _fp32_graph(
    source: Path, description: dict[str, Any], family: ModelFamily, held: HeldOut | None, work: Path
) -> Path:
    """The model's ONNX graph: the bundle's own, or a verified export of its PyTorch weights."""
    from forgeml.optimize._inputs import batch_rows
    from forgeml.optimize._runtime import load_torch_module
    from forgeml.optimize.onnx_export import export_onnx, max_abs_difference
    from forgeml.optimize.session import OnnxModel, is_onnx_bundle

    if is_onnx_bundle(source):
        return source / str(description["onnx"]["file"])
    if held is None or family.onnx is None:
        raise OptimizationError(f"Model family '{family.name}' does not export to ONNX.")
    folder = work / "fp32"
    folder.mkdir()
    module = load_torch_module(source)
    graph = export_onnx(module, batch_rows(held.split, 0, 2), folder / "model.onnx", family)
    exported = {**description, "onnx": {"file": "model.onnx", "inputs": graph.inputs}}
    _write_json(folder / "model.json", exported)
    cap = family.onnx.rows_cap(description, 64)
    diff, rows = max_abs_difference(module, OnnxModel(folder), held.split, 64, family, cap)
    if not diff <= VERIFY_TOLERANCE:
        raise OptimizationError(
            f"The ONNX export differs from PyTorch by up to {diff:.3g} on {rows} held-out rows "
            f"(tolerance {VERIFY_TOLERANCE:g}); no edge bundle was written."
        )
    return folder / "model.onnx"


def _companions(
    source: Path, description: dict[str, Any], family: ModelFamily, kind: str, stage: Path
) -> None:
    """tokenizer.json (text) or features.json (tabular) beside the graph."""
    if kind == "text":
        shutil.copyfile(_tokenizer_file(family, description), stage / "tokenizer.json")
    elif kind == "tabular":
        import orjson

        from forgeml.data.features import FeatureSpec
        from forgeml.optimize.edge._features import feature_steps

        path = source / "feature_spec.json"
        if not path.is_file():
            raise OptimizationError("The tabular model has no feature_spec.json to encode rows.")
        spec = FeatureSpec.from_dict(orjson.loads(path.read_bytes()))
        _write_json(stage / "features.json", feature_steps(spec))


def _tokenizer_file(family: ModelFamily, description: dict[str, Any]) -> Path:
    """The WordPiece tokenizer.json of a pretrained encoder's text classifier."""
    from forgeml.train.models.text_classifier import PretrainedTokenizer, pretrained_path

    params = description["model"]["params"]
    if family.tokenizer is not PretrainedTokenizer:
        raise OptimizationError(
            f"Model family '{family.name}' tokenizes with its own vocabulary; edge bundles "
            "carry a pretrained encoder's WordPiece tokenizer.json."
        )
    path = Path(pretrained_path(params.get("pretrained"))) / "tokenizer.json"
    spec = json.loads(path.read_text()) if path.is_file() else {}
    if (spec.get("model") or {}).get("type") != "WordPiece":
        raise OptimizationError(
            f"The encoder's tokenizer ({path}) is not a WordPiece tokenizer.json, which is "
            "what the edge runner reads."
        )
    return path


def _edge_description(
    record: ModelVersionRecord, description: dict[str, Any], kind: str, stage: Path
) -> dict[str, Any]:
    """model.json of the bundle: what the runner needs and nothing of forgeml's."""
    import onnx

    graph = onnx.load(str(stage / "model.onnx"), load_external_data=False)
    initializers = {tensor.name for tensor in graph.graph.initializer}
    found: dict[str, Any] = {
        "format": EDGE_FORMAT,
        "source": record.ref,
        "kind": kind,
        "task": description.get("task"),
        "class_names": [str(n) for n in description.get("class_names") or []] or None,
        "file": "model.onnx",
        "inputs": description["graph"]["inputs"] if kind == "graph" else [
            {"name": v.name} for v in graph.graph.input if v.name not in initializers
        ],
    }  # fmt: skip
    if kind == "text":
        found["max_length"] = int(description["model"]["params"].get("max_length", 64))
    return found


def _manifest(stage: Path, record: ModelVersionRecord, chosen: Precision) -> dict[str, str]:
    """manifest.json: the SHA-256 of every other file, the source and the precision figures."""
    files = {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(stage.iterdir())
        if path.is_file() and path.name != MANIFEST
    }
    manifest = {
        "format": EDGE_FORMAT,
        "source": record.ref,
        "source_digest": record.artifact_digest,
        "files": files,
        "precision": chosen.as_dict(),
    }
    _write_json(stage / MANIFEST, manifest)
    return files


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True))
