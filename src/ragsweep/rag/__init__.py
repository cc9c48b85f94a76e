"""Retrieval-augmented generation: retrievers, rerankers, prompts, generators and their servers."""
