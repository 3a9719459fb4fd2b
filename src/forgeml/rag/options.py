"""The options of `rag index`, one pydantic model the CLI reads its help from.

Kept apart from the index so that `forgeml rag --help` loads nothing heavier than pydantic.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from forgeml.rag.chunking import ChunkerConfig
from forgeml.rag.dense import DenseConfig


class IndexOptions(BaseModel):
    """How `rag index` chunks and indexes (the CLI's help is read from these fields)."""

    chunk_tokens: int = Field(256, description="Tokens per chunk (the embedder's tokenizer).")
    overlap: int = Field(32, description="Tokens shared by consecutive chunks of a section.")
    hnsw: bool = Field(False, description="Approximate dense search (FAISS HNSW), not exact.")
    hnsw_m: int = Field(32, description="HNSW: neighbours per node (M).")
    ef_search: int = Field(64, description="HNSW: candidates kept while searching (efSearch).")

    def chunker(self) -> ChunkerConfig:
        return ChunkerConfig(self.chunk_tokens, self.overlap)

    def dense(self) -> DenseConfig:
        if not self.hnsw:
            return DenseConfig()
        return DenseConfig("hnsw", m=self.hnsw_m, ef_search=self.ef_search)


class RagServeOptions(BaseModel):
    """What `forgeml serve --rag` serves, and who writes its answers (the CLI's help)."""

    rag: list[str] = Field(
        default_factory=list,
        description="Serve this RAG index (NAME or NAME@vN) on /v1/rag/NAME/query and "
        "/v1/rag/NAME/answer; repeatable.",
    )
    rag_generator: str | None = Field(
        None,
        description="An OpenAI-compatible base URL that writes RAG answers "
        "(default: this server's own OpenAI routes).",
    )
    rag_generator_model: str | None = Field(
        None, description="The model name at --rag-generator (default: the request's model)."
    )
    rag_generator_key_env: str | None = Field(
        None, description="The environment variable holding --rag-generator's API key."
    )
