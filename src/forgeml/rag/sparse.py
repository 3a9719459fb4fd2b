"""The BM25 index: `bm25s`' eager sparse scores (Lucene's BM25, k1 1.5, b 0.75).

bm25s computes every (term, chunk) score once, when the index is built, into a
term-major sparse matrix, so a query adds up the columns of its few terms and takes the
top k, where SQLite FTS5's bm25() scored every chunk any query term matched at query
time (benchmarks/rag_scale.py). Tokens are bm25s' own lower-cased `\\w\\w+` words. Every
word is indexed; a query drops bm25s' English stop words unless it has nothing else, since
they weigh almost nothing but match nearly every chunk, so each would add up a posting
per chunk.

The index covers the rows it was built over, each a chunk's row id. An `Index` builds it
from the live chunks: a snapshot stores it in its file (plain arrays, see `to_blobs`; no
pickle), a writable index builds it again after any update, so a tombstoned row is never
in it; a search may be limited further to `allowed` row ids (the filters).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import InvalidDataError

if TYPE_CHECKING:
    import numpy as np

_ARRAYS = ("data", "indices", "indptr", "rowids")


def _tokens(texts: Sequence[str], *, ids: bool) -> Any:
    import bm25s

    return bm25s.tokenize(list(texts), stopwords=None, return_ids=ids, show_progress=False)


@cache
def _stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def query_words(query: str) -> list[str]:
    """`query`'s distinct words as BM25 searches them: stop words dropped unless that
    leaves none."""
    words = list(dict.fromkeys(_tokens([query], ids=False)[0]))
    return [word for word in words if word not in _stop_words()] or words


class SparseIndex:
    """bm25s' BM25 over (row id, text) pairs."""

    def __init__(self, retriever: Any, rowids: np.ndarray) -> None:
        self._retriever = retriever  # None when no chunk holds a word
        self.rowids = rowids  # column -> row id, ascending

    @classmethod
    def build(cls, rowids: Sequence[int], texts: Sequence[str]) -> SparseIndex:
        """The index of `texts`, the chunks with row ids `rowids` (ascending)."""
        import bm25s
        import numpy as np

        tokenized = _tokens(texts, ids=True)
        if not tokenized.vocab:  # bm25s cannot index a corpus without a word
            return cls(None, np.zeros(0, dtype=np.int64))
        retriever = bm25s.BM25()
        retriever.index(tokenized, show_progress=False)
        return cls(retriever, np.asarray(rowids, dtype=np.int64))

    @property
    def size(self) -> int:
        return len(self.rowids)

    def to_blobs(self) -> dict[str, bytes]:
        """The index as named blobs: its arrays as `.npy` bytes, its vocabulary as JSON
        (none for an index without a word)."""
        import numpy as np

        if self._retriever is None:
            return {}

        arrays = {**self._retriever.scores, "rowids": self.rowids}
        blobs = {}
        for name in _ARRAYS:
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            blobs[name] = buffer.getvalue()
        # bm25s adds an empty token past the matrix's last column; no query word is empty
        vocab = {t: n for t, n in self._retriever.vocab_dict.items() if t}
        blobs["vocab"] = json.dumps(sorted(vocab, key=vocab.__getitem__)).encode()
        return blobs

    @classmethod
    def from_blobs(cls, blobs: Mapping[str, bytes]) -> SparseIndex:
        """The index `to_blobs` wrote.

        Raises:
            InvalidDataError: a blob is missing or does not hold what it should.
        """
        import bm25s
        import numpy as np

        try:
            arrays = {n: np.load(io.BytesIO(blobs[n]), allow_pickle=False) for n in _ARRAYS}
            tokens = json.loads(blobs["vocab"])
        except (KeyError, ValueError) as error:
            raise InvalidDataError(f"The index file's BM25 arrays are damaged ({error}).") from None
        if len(arrays["indptr"]) != len(tokens) + 1:
            raise InvalidDataError("The index file's BM25 vocabulary and arrays disagree.")
        retriever = bm25s.BM25()
        retriever.scores = {
            "data": arrays["data"],
            "indices": arrays["indices"],
            "indptr": arrays["indptr"],
            "num_docs": len(arrays["rowids"]),
        }
        retriever.vocab_dict = {token: n for n, token in enumerate(tokens)}
        retriever.nonoccurrence_array = None  # Lucene's BM25 scores only what occurs
        return cls(retriever, arrays["rowids"])

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None, *, ties: bool = False
    ) -> list[tuple[int, float]]:
        """The `k` best rows for `query` that match a term, best first (ties by row id).

        Args:
            query: free text.
            k: how many rows.
            allowed: only these row ids (ascending), if given.
            ties: also every row tied with the k-th, so that a caller breaking ties by
                another key (the chunk id) finds the same k whatever the row order.
        """
        import numpy as np

        if self._retriever is None:
            return []
        vocab = self._retriever.vocab_dict
        words = [word for word in query_words(query) if word in vocab]
        if not words:
            return []
        scores = self._retriever.get_scores(words)
        if allowed is not None:
            columns = np.searchsorted(self.rowids, allowed)
            inside = columns < self.size
            columns = columns[inside][self.rowids[columns[inside]] == allowed[inside]]
            kept = np.zeros_like(scores)
            kept[columns] = scores[columns]
            scores = kept
        found = np.flatnonzero(scores > 0)
        if len(found) > k:  # the k best and any tied with the k-th, then sorted and cut
            kth = np.partition(scores[found], len(found) - k)[len(found) - k]
            found = found[scores[found] >= kth]
        # columns ascend with row ids, so the column breaks a tie as the row id would
        ranked = sorted(found.tolist(), key=lambda c: (-scores[c], c))
        return [(int(self.rowids[c]), float(scores[c])) for c in ranked[: None if ties else k]]
