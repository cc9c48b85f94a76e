"""ragsweep: find out which RAG configuration works, and why.

From Python (docs/python.md), on the same configs as the ``ragsweep`` command::

    import ragsweep
    r = ragsweep.run("retriever=tfidf generator=none")      # one system -> ragsweep.Run
    r.metrics, r.questions                                  # metrics with intervals; one row per question
    s = ragsweep.sweep("retriever=bm25,tfidf generator=none")   # the same multirun as `ragsweep -m`
    df = ragsweep.results("default")                        # one row per system x question, from MLflow
    ragsweep.compare(run_a, run_b)                          # paired differences with intervals
    ragsweep.mlflow_scorers()                               # ragsweep's judge as MLflow GenAI scorers

These names are loaded on first use (nothing heavy is imported by ``import ragsweep``).

The package is grouped by the stages of one job (docs/architecture.md): ``corpus`` -> ``rag`` ->
``judge`` -> ``tracking`` -> ``analysis``, run by ``pipeline``; ``store`` (the cache) under all.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

#: module paths of ragsweep 0.1's flat layout -> where they live now. A ``_target_`` or an import
#: written against the old path still works, with a FutureWarning, until ragsweep 0.3.
MOVED = {
    "ragsweep.dataset": "ragsweep.corpus.dataset",
    "ragsweep.chunker": "ragsweep.corpus.chunker",
    "ragsweep.chunkstore": "ragsweep.corpus.chunkstore",
    "ragsweep.embeddings": "ragsweep.corpus.embeddings",
    "ragsweep.ray_data": "ragsweep.corpus.ray_data",
    "ragsweep.text": "ragsweep.corpus.text",
    "ragsweep.retriever": "ragsweep.rag.retriever",
    "ragsweep.generator": "ragsweep.rag.generator",
    "ragsweep.prompt": "ragsweep.rag.prompt",
    "ragsweep.tokens": "ragsweep.rag.tokens",
    "ragsweep.evaluator.judge": "ragsweep.judge.llm_judge",
    "ragsweep.evaluator.score_cli": "ragsweep.pipeline.score_cli",
    "ragsweep.evaluator": "ragsweep.judge",
    "ragsweep.metrics": "ragsweep.judge.metrics",
    "ragsweep.judge_card": "ragsweep.judge.card",
    "ragsweep.ledger": "ragsweep.judge.ledger",
    "ragsweep.scoring": "ragsweep.analysis.scoring",
    "ragsweep.stats": "ragsweep.analysis.stats",
    "ragsweep.ppi": "ragsweep.analysis.ppi",
    "ragsweep.report": "ragsweep.analysis.report",
    "ragsweep.labels": "ragsweep.analysis.labels",
    "ragsweep.search": "ragsweep.analysis.search",
    "ragsweep.degenerate": "ragsweep.analysis.degenerate",
    "ragsweep.cost": "ragsweep.analysis.cost",
    "ragsweep.cache": "ragsweep.store.cache",
    "ragsweep.cli": "ragsweep.pipeline.cli",
    "ragsweep.config": "ragsweep.pipeline.config",
    # "ragsweep.sweep" (ragsweep.pipeline.sweep) is no longer mapped: ragsweep.sweep is the function
    "ragsweep.retrieval_only": "ragsweep.pipeline.retrieval_only",
    "ragsweep.summary": "ragsweep.pipeline.summary",
    "ragsweep.doctor": "ragsweep.pipeline.doctor",
}


#: the Python API: name -> the module that defines it, imported on first use (PEP 562)
API = {
    "run": "ragsweep.pipeline.api",
    "sweep": "ragsweep.pipeline.api",
    "compose": "ragsweep.pipeline.api",
    "Run": "ragsweep.pipeline.api",
    "Sweep": "ragsweep.pipeline.api",
    "results": "ragsweep.analysis.results",
    "compare": "ragsweep.analysis.results",
    "mlflow_scorers": "ragsweep.tracking.scorers",
    "mlflow_traces": "ragsweep.tracking.genai",
}
__all__ = sorted(API) + ["MOVED", "__version__", "moved_to"]


def __getattr__(name: str):
    if name in API:
        value = getattr(importlib.import_module(API[name]), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
    raise AttributeError(f"module 'ragsweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))


def moved_to(name: str) -> str | None:
    """The current module path of an old one (longest old prefix wins), else None."""
    for old in sorted(MOVED, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return MOVED[old] + name[len(old):]
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that lives at its new path (the same object)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001
        new = moved_to(fullname)
        if new is None or fullname in sys.modules:
            return None
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, self, is_package=real.submodule_search_locations is not None)
        spec.loader_state = real
        return spec

    def create_module(self, spec):  # noqa: ANN001
        warnings.warn(f"{spec.name} moved to {spec.loader_state.name}; the old path works until ragsweep 0.3 "
                      "(docs/architecture.md)", FutureWarning, stacklevel=2)
        return importlib.import_module(spec.loader_state.name)

    def exec_module(self, module):  # noqa: ANN001
        module.__spec__ = module.__spec__.loader_state  # the import system stamped the alias's spec on it

    def get_code(self, fullname):  # noqa: ANN001 - `python -m <old path>` runs the new module's code
        real = importlib.util.find_spec(moved_to(fullname))
        return real.loader.get_code(real.name)


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
