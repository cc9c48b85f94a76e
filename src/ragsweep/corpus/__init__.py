"""The corpus stage: datasets, file parsing, chunking, the chunk store, embeddings."""
