"""One loaded model version: its runtime, its input encoder and its output decoding.

A version is unpacked into a private temporary folder, loaded into memory and the folder
removed, so replicas of one model in several processes never share (or replace) files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import orjson

from forgeml.core.errors import InvalidDataError
from forgeml.data.features import FeatureSpec
from forgeml.serve.inputs import InputField, RowEncoder, TabularEncoder, TextEncoder
from forgeml.serve.runtime import Runtime, TorchRuntime, load_runtime

if TYPE_CHECKING:
    from torch import nn

    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace

ModelKind = Literal["tabular", "text", "language_model", "other"]
DECODED_OUTPUTS = ("probabilities", "label", "prediction")


@dataclass
class LoadedModel:
    """A model version in memory, ready to run rows."""

    ref: str  # NAME@vN
    name: str
    version: int
    digest: str
    task: str
    kind: ModelKind
    class_names: list[str] | None
    runtime: Runtime
    encoder: RowEncoder | None
    description: dict[str, Any]
    module: nn.Module | None = None  # the torch module language models generate with
    cache: dict[str, Any] = field(default_factory=dict)  # e.g. the text generator

    @property
    def outputs(self) -> list[InputField]:
        """The decoded outputs `run_rows` can return, with their v2 datatypes."""
        if self.kind in ("language_model", "other"):
            return []
        if self.task == "classification":
            found = [InputField("probabilities", "FP32"), InputField("label", "BYTES")]
        else:
            found = [InputField("prediction", "FP32")]
        if "embeddings" in self.runtime.output_names:
            found.append(InputField("embeddings", "FP32"))
        return found

    def row_encoder(self) -> RowEncoder:
        """The encoder of the rows this model takes.

        Raises:
            InvalidDataError: the model takes no rows (a language model).
        """
        if self.encoder is None:
            raise InvalidDataError(
                f"Model '{self.name}' does not take rows over this protocol; "
                "language models are served by /v1/completions and /v1/chat/completions."
            )
        return self.encoder

    def run_rows(self, rows: list[Any], outputs: set[str]) -> dict[str, np.ndarray]:
        """Encode `rows`, run them as one batch and decode the requested `outputs`.

        Raises:
            InvalidDataError: the rows cannot be encoded, or the model cannot take rows.
        """
        arrays = self.row_encoder().encode(rows)
        needed = ["logits"] if outputs & set(DECODED_OUTPUTS) else []
        if "embeddings" in outputs:
            needed.append("embeddings")
        raw = self.runtime.run(arrays, needed)
        found: dict[str, np.ndarray] = {}
        if "logits" in raw:
            found.update(self._decode(raw["logits"]))
        if "embeddings" in raw:
            found["embeddings"] = raw["embeddings"]
        return {name: found[name] for name in outputs if name in found}

    def _decode(self, logits: np.ndarray) -> dict[str, np.ndarray]:
        if self.task != "classification":
            return {"prediction": logits.reshape(len(logits), -1)[:, 0].astype(np.float32)}
        shifted = logits - logits.max(axis=1, keepdims=True)  # stable softmax
        exp = np.exp(shifted)
        probabilities = (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)
        names = self.class_names or [str(i) for i in range(logits.shape[1])]
        labels = np.array([names[int(i)] for i in probabilities.argmax(axis=1)], dtype=object)
        return {"probabilities": probabilities, "label": labels}


def load_model(
    workspace: Workspace, record: ModelVersionRecord, runtime: str, threads: int | None
) -> LoadedModel:
    """Unpack and load `record` with `runtime` (the unpacked files are removed afterwards).

    Raises:
        NotFoundError, IntegrityError: the bundle is missing or corrupt.
        ConfigError: the bundle lacks what the runtime needs.
    """
    scratch = Path(tempfile.mkdtemp(prefix="forgeml-serve-"))
    try:
        from forgeml.tracking import download_bundle

        bundle = download_bundle(workspace, record, scratch / "bundle")
        return _load_bundle(bundle, record, runtime, threads)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _load_bundle(
    bundle: Path, record: ModelVersionRecord, runtime_name: str, threads: int | None
) -> LoadedModel:
    description = json.loads((bundle / "model.json").read_text())
    task = description["task"]
    model_name = description["model"]["name"]
    encoder: RowEncoder | None = None
    kind: ModelKind = "other"
    if (bundle / "feature_spec.json").exists():
        spec = FeatureSpec.from_dict(orjson.loads((bundle / "feature_spec.json").read_bytes()))
        encoder, kind = TabularEncoder(spec), "tabular"
    elif model_name == "text_classifier":
        encoder, kind = TextEncoder(description["model"]["params"]), "text"
    elif task == "language_modeling":
        kind = "language_model"
    # generation needs the torch module whatever runtime serves the rest
    chosen = "torch" if kind == "language_model" else runtime_name
    runtime = load_runtime(chosen, bundle, description, threads)
    module = runtime.module if isinstance(runtime, TorchRuntime) else None
    names = description.get("class_names")
    return LoadedModel(
        ref=record.ref,
        name=record.name,
        version=record.version,
        digest=record.artifact_digest,
        task=task,
        kind=kind,
        class_names=[str(n) for n in names] if names else None,
        runtime=runtime,
        encoder=encoder,
        description=description,
        module=module,
    )
