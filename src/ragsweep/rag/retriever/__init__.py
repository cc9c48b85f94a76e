"""Retrievers: one module per implementation, each built from conf/retriever/<name>.yaml.

The implementations are imported lazily (``ragsweep.rag.retriever.bm25.BM25Retriever`` etc.) so that
importing the package does not import torch or faiss.
"""

from ragsweep.rag.retriever.base import Retriever, RetrieverConfig, chunks_fingerprint, rank_top_k

__all__ = ["Retriever", "RetrieverConfig", "chunks_fingerprint", "rank_top_k"]
