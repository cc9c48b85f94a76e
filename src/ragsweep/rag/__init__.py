"""The RAG system under test: retrieve, prompt, generate.

- :mod:`ragsweep.rag.retriever`: BM25, TF-IDF, dense, hybrid, the oracle bound, rerankers; every retriever answers
  ``search(queries, k)`` over one index per chunk set.
- :mod:`ragsweep.rag.prompt`: prompt templates (plain format strings from YAML).
- :mod:`ragsweep.rag.tokens`: prompt tokens counted as the serving model counts them, to fit its context.
- :mod:`ragsweep.rag.generator`: the OpenAI-compatible client and the model servers it talks to (llama.cpp, vLLM,
  any external endpoint).
"""
