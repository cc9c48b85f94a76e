"""ragsweep: find out which RAG configuration works, and why."""

__version__ = "0.1.0"
