"""The corpus stage: documents, chunking, the chunk store, embeddings."""
