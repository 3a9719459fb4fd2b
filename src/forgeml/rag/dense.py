"""The dense index: FAISS exact inner product by default, HNSW as an option.

Vectors are normalised, so inner product is cosine similarity. Ids are the chunk rows'
ids; a search can be limited to a set of ids (live rows that pass the filters), which is
how tombstoned rows stay unreachable before compaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class DenseConfig:
    """Exact search (`flat`) or approximate (`hnsw`, with M and efSearch)."""

    kind: str = "flat"
    m: int = 32
    ef_search: int = 64
    ef_construction: int = 80

    def __post_init__(self) -> None:
        if self.kind not in ("flat", "hnsw"):
            raise UsageError(f"The dense index is 'flat' or 'hnsw', not '{self.kind}'.")
        if min(self.m, self.ef_search, self.ef_construction) < 2:
            raise UsageError("HNSW's M, efSearch and efConstruction must each be at least 2.")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) if self.kind == "hnsw" else {"kind": "flat"}


class DenseIndex:
    """A FAISS index over (row id, vector) pairs."""

    def __init__(self, dimension: int, config: DenseConfig) -> None:
        import faiss

        self.config = config
        inner: Any
        if config.kind == "hnsw":
            inner = faiss.IndexHNSWFlat(dimension, config.m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = config.ef_construction
            inner.hnsw.efSearch = config.ef_search
        else:
            inner = faiss.IndexFlatIP(dimension)
        self._inner = inner
        self.index = faiss.IndexIDMap2(inner)

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        import numpy as np

        if ids:
            self.index.add_with_ids(vectors, np.asarray(ids, dtype=np.int64))

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The `k` nearest rows to `query` (one normalised vector), only `allowed` ids (an
        int64 array) if given."""
        import faiss
        import numpy as np

        if self.size == 0 or k <= 0 or (allowed is not None and not len(allowed)):
            return []
        params: Any = None
        module: Any = faiss  # its stubs miss SearchParametersHNSW and `sel`
        if allowed is not None:
            selector = faiss.IDSelectorBatch(np.asarray(allowed, dtype=np.int64))
            if self.config.kind == "hnsw":
                params = module.SearchParametersHNSW(sel=selector, efSearch=self.config.ef_search)
            else:
                params = module.SearchParameters(sel=selector)
        # one thread: a single query gains little from more, and on 2 cores other work had
        # taken, exact search of 100k vectors took 13 ms p50 on 1 OpenMP thread and 92-112
        # ms on 2, whose threads wait on each other (the process-wide setting is restored)
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            scores, ids = self.index.search(query.reshape(1, -1), min(k, self.size), params=params)
        finally:
            faiss.omp_set_num_threads(before)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
