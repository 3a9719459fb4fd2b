from __future__ import annotations

import numpy as np

from forgeml.rag.embeddings import _BATCH, MiniLMEmbedder

TEXTS = [
    "bisect",
    "Insert an item into a sorted list, keeping it sorted, after any equal entries. " * 6,
    "heapq.heappush pushes onto a heap.",
    "",
    "Return a list of the n largest elements of the iterable, largest first. " * 3,
    *[f"text number {n} " * (n % 5 + 1) for n in range(2 * _BATCH)],
]


def test_batches_cover_every_text_once_longest_first(embedder: MiniLMEmbedder) -> None:
    batches = embedder.batches(TEXTS)
    flat = [i for batch in batches for i in batch]
    lengths = [len(embedder.offsets(TEXTS[i])) for i in flat]
    assert sorted(flat) == list(range(len(TEXTS)))
    assert all(len(batch) <= _BATCH for batch in batches)
    assert lengths == sorted(lengths, reverse=True)


def test_sorted_batches_return_vectors_in_input_order(embedder: MiniLMEmbedder) -> None:
    together = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([text]) for text in TEXTS])
    assert together.shape == (len(TEXTS), embedder.dimension)
    assert together.dtype == np.float32
    np.testing.assert_allclose(together, alone, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_no_texts_embed_to_an_empty_matrix(embedder: MiniLMEmbedder) -> None:
    assert embedder.embed([]).shape == (0, embedder.dimension)
