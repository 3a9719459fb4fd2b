"""The models one server serves: loading, batching, and swapping in a moved alias.

Each `ServedModel` owns one batcher; a batch runs on whichever version is current when
it starts, so swapping a version is one reference assignment: batches already running
finish on the old version, queued requests run on the new one, and nothing is dropped.
References that can move (`NAME`, `NAME@alias`) are re-resolved every
`reload_interval_s` seconds by a watcher thread, which loads a moved one before swapping.

`ModelRepository` also implements the `OpenAIModels` protocol the OpenAI routes use.
"""

from __future__ import annotations

import gc
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from forgeml.core.errors import (
    ForgemlError,
    InvalidDataError,
    NotFoundError,
    ServiceUnavailableError,
    UsageError,
)
from forgeml.serve.batcher import Batcher, serving_batch_size
from forgeml.serve.metrics import ServerMetrics
from forgeml.serve.model import LoadedModel, load_model
from forgeml.serve.options import ServeOptions
from forgeml.serve.predictions import RecentPredictions

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.serve.tokens import LanguageGenerator

_FIXED_REF = re.compile(r"@v\d+$")  # a version number never moves
_log = logging.getLogger(__name__)
State = Literal["loading", "ready", "failed"]


class ServedModel:
    """A model under its served name: the current version and its batcher."""

    def __init__(self, name: str, ref: str, options: ServeOptions, metrics: ServerMetrics):
        self.name = name
        self.ref = ref
        self.movable = _FIXED_REF.search(ref) is None
        self.current: LoadedModel | None = None
        self.state: State = "loading"
        self.error: str | None = None
        self.batcher = Batcher(
            self._run_batch,
            serving_batch_size(options.max_batch_size, options.device),
            options.max_wait_ms,
            name=name,
            observe=lambda rows, seconds: metrics.observe_batch(name, rows, seconds),
        )
        metrics.track_queue(name, lambda: self.batcher.depth)
        metrics.set_objective(name, options.latency_objective_ms / 1000)

    def ready_model(self) -> LoadedModel:
        """The current version.

        Raises:
            ServiceUnavailableError: it is still loading, or failed to load.
        """
        if self.current is None:
            detail = f" ({self.error})" if self.error else ""
            raise ServiceUnavailableError(
                f"Model '{self.name}' is not ready: {self.state}{detail}."
            )
        return self.current

    async def infer(self, rows: list[Any], outputs: set[str]) -> tuple[dict[str, Any], LoadedModel]:
        """Check and run `rows` through the batcher; the decoded outputs and the version used.

        Raises:
            ServiceUnavailableError: the model is not ready.
            InvalidDataError: a row is not one the model takes.
        """
        encoder = self.ready_model().row_encoder()
        if not rows:
            raise InvalidDataError("The request holds no instances; send at least one.")
        encoder.check(rows)
        result: tuple[dict[str, Any], LoadedModel] = await self.batcher.submit(
            (rows, outputs), len(rows)
        )
        return result

    def _run_batch(self, payloads: list[tuple[list[Any], set[str]]]) -> list[Any]:
        model = self.current  # one version for the whole batch, even if a swap happens now
        if model is None:
            raise ServiceUnavailableError(f"Model '{self.name}' is not ready.")
        rows = [row for part, _ in payloads for row in part]
        wanted = set().union(*(outputs for _, outputs in payloads))
        arrays = model.run_rows(rows, wanted)
        results, start = [], 0
        for part, outputs in payloads:
            end = start + len(part)
            results.append(({name: arrays[name][start:end] for name in outputs}, model))
            start = end
        return results


class ModelRepository:
    """Every model of one server, by served name."""

    def __init__(self, workspace: Workspace, refs: list[str], options: ServeOptions) -> None:
        """Set up (not load) the models; names default to the registered model names.

        Raises:
            UsageError: no refs, `options.name` with several refs, or two refs of one name.
        """
        if not refs:
            raise UsageError("Give at least one model to serve (MODEL_REF).")
        if options.name is not None and len(refs) > 1:
            raise UsageError("--name serves one model under another name; give one MODEL_REF.")
        names = [options.name or ref.partition("@")[0] for ref in refs]
        if len(set(names)) < len(names):
            raise UsageError(
                "Two of the models would be served under one name; serve each model name once."
            )
        self.workspace = workspace
        self.options = options
        self.metrics = ServerMetrics()
        self.recent = RecentPredictions(options.feedback_window)  # for feedback by request id
        self.models = {
            n: ServedModel(n, r, options, self.metrics) for n, r in zip(names, refs, strict=True)
        }
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """Whether every model is loaded."""
        return all(model.current is not None for model in self.models.values())

    def get(self, name: str) -> ServedModel:
        """The model served as `name`.

        Raises:
            NotFoundError: the server has no model of that name.
        """
        if name not in self.models:
            known = ", ".join(self.models)
            raise NotFoundError(f"This server has no model '{name}' (it serves: {known}).")
        return self.models[name]

    def load(self) -> None:
        """Load every model now (in this thread).

        Raises:
            ForgemlError: a reference does not resolve or a bundle cannot be loaded; the
                model is marked failed.
        """
        from forgeml.tracking import get_model_version

        for served in self.models.values():
            try:
                record = get_model_version(self.workspace, served.ref)
                served.current = self._load(record)
                served.state = "ready"
                _log.info("serving %s as '%s'", record.ref, served.name)
            except ForgemlError as error:
                served.state, served.error = "failed", str(error)
                raise
        self._settle_heap()

    def _settle_heap(self) -> None:
        """Exempt what is alive now from full collections (`ServeOptions.freeze_heap`).

        A full collection scans every tracked object: with torch, numpy, FastAPI and the
        models loaded that is hundreds of thousands, a stall of tens to hundreds of ms that
        every queued request waits through. Frozen objects are skipped by every collection;
        what requests allocate is still collected. A reload thaws first, so the replaced
        version's cycles are freed, then freezes again.
        """
        if not self.options.freeze_heap:
            return
        gc.unfreeze()
        gc.collect()
        gc.freeze()

    def _load(self, record: ModelVersionRecord) -> LoadedModel:
        options = self.options
        return load_model(
            self.workspace,
            record,
            options.runtime,
            options.intra_op_threads,
            serving_batch_size(options.max_batch_size, options.device),
            options.device,
        )

    def start(self, load: bool) -> None:
        """Start the alias watcher, after loading the models in it first if `load`."""
        self._watcher = threading.Thread(target=self._watch, args=(load,), daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Stop watching and finish queued requests."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(30)
        for served in self.models.values():
            served.batcher.close()
            if served.current is not None:
                served.current.close()

    def _watch(self, load: bool) -> None:
        if load:
            try:
                self.load()
            except ForgemlError as error:
                _log.error("%s", error)
                return
        movable = [served for served in self.models.values() if served.movable]
        while movable and not self._stop.wait(self.options.reload_interval_s):
            for served in movable:
                self._refresh(served)

    def _refresh(self, served: ServedModel) -> None:
        """Load and swap in the version `served.ref` names now, if it moved."""
        from forgeml.tracking import get_model_version

        try:
            record = get_model_version(self.workspace, served.ref)
            if served.current is not None and record.artifact_digest == served.current.digest:
                return
            loaded = self._load(record)
        except Exception as error:  # keep serving the old version; say why once per poll
            _log.warning("cannot reload %s: %s", served.ref, error)
            return
        previous = served.current
        served.current, served.state = loaded, "ready"  # atomic: one reference assignment
        _log.info("'%s' now serves %s (was %s)", served.name, loaded.ref, previous and previous.ref)
        if previous is not None:
            previous.close()  # its running generations finish first
        del previous
        self._settle_heap()

    # --- the OpenAIModels protocol (forgeml.serve.protocols.openai) ----------------------

    def names(self) -> list[str]:
        """Served model names."""
        return list(self.models)

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        """Sentence embeddings of `texts` from encoder model `name`, through its batcher.

        Raises:
            NotFoundError: no such model.
            ServiceUnavailableError: it is not loaded yet.
            InvalidDataError: it is not an encoder, or a text is not a string.
        """
        served = self.get(name)
        model = served.ready_model()
        if "embeddings" not in model.runtime.output_names:
            raise InvalidDataError(f"Model '{name}' is not a text encoder; it has no embeddings.")
        outputs, _ = await served.infer(texts, {"embeddings"})
        vectors: np.ndarray = outputs["embeddings"]
        return [row.tolist() for row in vectors]

    def generator(self, name: str) -> LanguageGenerator:
        """The text generator of language model `name`, its generations metered.

        Raises:
            NotFoundError: no such model.
            ServiceUnavailableError: it is not loaded yet.
            InvalidDataError: it is not a language model.
        """
        from forgeml.serve.tokens import MeteredGenerator

        generator = self.get(name).ready_model().language_generator()
        return MeteredGenerator(
            generator, lambda stream: self.metrics.observe_generation(name, stream)
        )
