"""Dataset loaders, reachable as ``ragsweep.corpus.dataset.X`` (the ``_target_`` of every
``conf/dataset/*.yaml``): the built-ins and the shared helpers live in
:mod:`ragsweep.corpus.dataset.loaders`; a user's JSONL corpus (:mod:`.corpus_file`), the BEIR layout, the
RAGChecker benchmark and the long-document corpora in their own modules, which build on those
helpers (never on this package, so no import cycle).

Every loader is a small class with a ``Config`` dataclass (its YAML schema) and ``load()``
returning a :class:`ragsweep.types.Dataset`. Relevance is expressed as character spans into the
documents so that it survives any chunking.
"""

from ragsweep.corpus.dataset.beir import BeirDataset
from ragsweep.corpus.dataset.benchmark import RagcheckerBenchmark
from ragsweep.corpus.dataset.corpus_file import JsonlDataset
from ragsweep.corpus.dataset.loaders import (
    BUILTIN,
    ClapNQ,
    RagbenchPaperQA,
    RagcheckerDataset,
    finish,
    read_json,
    read_jsonl,
)
from ragsweep.corpus.dataset.longdoc import ClapNQLongDoc, RagbenchPaperLongDoc

__all__ = ["BUILTIN", "BeirDataset", "ClapNQ", "ClapNQLongDoc", "JsonlDataset", "RagbenchPaperLongDoc",
           "RagbenchPaperQA", "RagcheckerBenchmark", "RagcheckerDataset", "finish", "read_json", "read_jsonl"]
