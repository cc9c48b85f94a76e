"""The corpus: what the RAG systems read.

- :mod:`ragsweep.corpus.dataset`: the datasets (built-in benchmarks, JSONL, BEIR, RAGChecker files), each a corpus of
  documents and a question set with span relevance; the document table that lets a warm run skip parsing.
- :mod:`ragsweep.corpus.chunker`: documents into chunks with character offsets (sizes in tokens of a named tokenizer).
- :mod:`ragsweep.corpus.chunkstore`: chunks as a memory-mapped Arrow file.
- :mod:`ragsweep.corpus.embeddings`: the embedding model and the embedding file of a chunk set.
- :mod:`ragsweep.corpus.text`: sentence splitting with offsets, word tokens.
- :mod:`ragsweep.corpus.ray_data`: the Ray Data session of the Ray chunker and encoder.
"""
