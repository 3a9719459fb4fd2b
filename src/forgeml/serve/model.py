"""One loaded model version: its runtime, its input encoder and its output decoding.

All three come from the model's family (`forgeml.train.models.ModelFamily`): its runtime
inputs and outputs, the encoder of the raw rows it takes and the decoder of its answers.

A version is unpacked into a private temporary folder, loaded into memory and the folder
removed, so replicas of one model in several processes never share (or replace) files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.devices import DeviceName
from forgeml.core.errors import InvalidDataError
from forgeml.serve.inputs import InputField, RowEncoder
from forgeml.serve.runtime import Runtime, TorchRuntime, load_runtime
from forgeml.serve.thresholds import with_group_thresholds
from forgeml.train.models import AnswerDecoder, ServedBundle, family_of
from forgeml.train.models.hf_causal_lm import TOKENIZER_RECORD as HF_TOKENIZER

if TYPE_CHECKING:
    from torch import nn

    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.serve.tokens import LanguageGenerator


@dataclass
class LoadedModel:
    """A model version in memory, ready to run rows."""

    ref: str  # NAME@vN
    name: str
    version: int
    digest: str
    task: str
    kind: str  # the family's modality: tabular, image, text, language_model, triples
    class_names: list[str] | None
    runtime: Runtime
    encoder: RowEncoder | None
    decoder: AnswerDecoder
    description: dict[str, Any]
    module: nn.Module | None = None  # the torch module language models generate with
    generator: LanguageGenerator | None = None  # a language model's text generator

    @property
    def outputs(self) -> list[InputField]:
        """The decoded outputs `run_rows` can return, with their v2 datatypes and shapes."""
        if self.encoder is None:
            return []
        return [f for f in self.decoder.outputs if self._computed(f.name)]

    def _computed(self, answer: str) -> bool:
        # an ONNX graph exported before a family listed an output does not compute it
        return set(self.decoder.needs({answer})) <= set(self.runtime.output_names)

    def language_generator(self) -> LanguageGenerator:
        """The text generator of this language model (a byte-level one made on first use).

        Raises:
            InvalidDataError: it is not a language model.
            ConfigError: its vocabulary is too small for a byte-level generator.
        """
        if self.generator is None:
            if self.kind != "language_model" or self.module is None:
                raise InvalidDataError(
                    f"Model '{self.name}' is not a language model; it cannot generate."
                )
            from forgeml.serve.generate import TextGenerator

            block_size = int(self.description["model"]["params"].get("block_size", 128))
            self.generator = TextGenerator.from_module(self.module, block_size)
        return self.generator

    def close(self) -> None:
        """Let the generator finish its requests and stop (a replaced or closed version)."""
        close = getattr(self.generator, "close", None)
        if close is not None:
            close()

    def row_encoder(self) -> RowEncoder:
        """The encoder of the rows this model takes.

        Raises:
            InvalidDataError: the model takes no rows (a language model).
        """
        if self.encoder is None:
            where = (
                "language models are served by /v1/completions and /v1/chat/completions"
                if self.kind == "language_model"
                else f"its family reads {self.kind} inputs and has no request encoder"
            )
            raise InvalidDataError(
                f"Model '{self.name}' does not take rows over this protocol; {where}."
            )
        return self.encoder

    def run_rows(self, rows: list[Any], outputs: set[str]) -> dict[str, np.ndarray]:
        """Encode `rows`, run them as one batch and decode the requested `outputs`.

        Raises:
            InvalidDataError: the rows cannot be encoded, or the model cannot take rows.
        """
        arrays = self.row_encoder().encode(rows)
        needed = [name for name in self.decoder.needs(outputs) if name in self.runtime.output_names]
        # the encoded request beside the raw outputs: some answers depend on it (a top k)
        found = self.decoder.decode({**arrays, **self.runtime.run(arrays, needed)})
        return {name: found[name] for name in outputs if name in found}


def load_model(
    workspace: Workspace,
    record: ModelVersionRecord,
    runtime: str,
    threads: int | None,
    max_batch: int = 8,
    device: DeviceName = "auto",
) -> LoadedModel:
    """Unpack and load `record` with `runtime` on `device` (the unpacked files are removed
    afterwards).

    A language model's generator batches at most `max_batch` concurrent requests.

    Raises:
        NotFoundError, IntegrityError: the bundle is missing or corrupt.
        ConfigError: the bundle lacks what the runtime needs.
    """
    scratch = Path(tempfile.mkdtemp(prefix="forgeml-serve-"))
    try:
        from forgeml.tracking import download_bundle

        bundle = download_bundle(workspace, record, scratch / "bundle")
        return _load_bundle(bundle, record, runtime, threads, max_batch, device)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _load_bundle(
    bundle: Path,
    record: ModelVersionRecord,
    runtime_name: str,
    threads: int | None,
    max_batch: int,
    device: DeviceName,
) -> LoadedModel:
    description = json.loads((bundle / "model.json").read_text())
    family = family_of(description)
    served = ServedBundle(family, description, bundle)
    # a fairness-mitigated version applies its group thresholds to the model's answers
    encoder, decoder = with_group_thresholds(
        bundle, description, family.request_encoder(served), family.answer_decoder(served)
    )
    kind = family.modality
    # generation needs the torch module whatever runtime serves the rest; a graph without
    # PyTorch weights (one imported from another framework) has only ONNX Runtime
    chosen = "torch" if kind == "language_model" else runtime_name
    if "onnx" in description and not (bundle / "model.safetensors").exists():
        chosen = "onnx"
    runtime = load_runtime(chosen, bundle, description, threads, device)
    module = runtime.module if isinstance(runtime, TorchRuntime) else None
    names = description.get("class_names")
    return LoadedModel(
        ref=record.ref,
        name=record.name,
        version=record.version,
        digest=record.artifact_digest,
        task=description["task"],
        kind=kind,
        class_names=[str(n) for n in names] if names else None,
        runtime=runtime,
        encoder=encoder,
        decoder=decoder,
        description=description,
        module=module,
        generator=None if module is None else _generator(served, module, max_batch),
    )


def _generator(bundle: ServedBundle, module: nn.Module, max_batch: int) -> LanguageGenerator | None:
    """A Hugging Face language model's generator, made while its tokenizer files are here."""
    if bundle.family.modality != "language_model":
        return None
    if (bundle.description.get("data") or {}).get("tokenizer") != HF_TOKENIZER:
        return None  # byte-level: `LoadedModel.language_generator` makes it when first asked
    from forgeml.serve.generate_hf import HFGenerator

    return HFGenerator.from_bundle(bundle.directory, module, max_batch)
