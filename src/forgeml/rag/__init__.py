"""RAG: sources, chunking, embeddings, dense + BM25 index, fusion, citations, eval."""
