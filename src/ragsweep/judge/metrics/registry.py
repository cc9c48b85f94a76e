"""Every metric described once: the evaluator, the statistics, tracking and the report read this.

A metric family (RAGChecker, TRACe, RAGAS, retrieval ...) is one module in ``ragsweep.judge.metrics``
that calls :func:`register` at import; :func:`load_all` imports every module of the package,
so adding a metric is one new module (or one ``register`` call) and nothing else.

    Metric(name="ragchecker/overall/f1", scale=100, higher_is_better=True, needs_gt=True,
           per_question=lambda rec: ..., family="ragchecker", description="...")

``per_question(record) -> float`` gives the value for one scored record (a dict in RAGChecker's
output schema plus ragsweep's fields); NaN where the metric is undefined for that question
(no ground truth, no retrieved context ...). An aggregate is the mean of the defined values.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

PerQuestion = Callable[[dict[str, Any]], float]


@dataclass(frozen=True)
class Metric:
    name: str  # the logged name, e.g. "ragchecker/overall/f1"
    scale: float  # the value range's top: 100 (RAGChecker's percentages) or 1
    higher_is_better: bool | None  # None: neither (a count, a cost)
    needs_gt: bool  # undefined (NaN) for questions without a ground-truth answer / labels
    per_question: PerQuestion | None  # None: logged only as an aggregate (e.g. computed over the run)
    family: str  # ragchecker | trace | ragas | retrieval | baseline | ...
    description: str = ""

    @property
    def short(self) -> str:
        return self.name.rsplit("/", 1)[-1]


_REGISTRY: dict[str, Metric] = {}


def _put(table: dict, name: str, item: Any, what: str) -> Any:
    """Add ``item`` under ``name``; the same name twice with a different definition is a bug."""
    old = table.get(name)
    if old is not None and old != item:
        raise ValueError(f"{what} {name!r} is registered twice with different definitions")
    table[name] = item
    return item


def register(metric: Metric) -> Metric:
    """Add ``metric``; registering the same name twice with a different description is a bug."""
    return _put(_REGISTRY, metric.name, metric, "metric")


def load_all() -> None:
    """Import every module of ``ragsweep.judge.metrics`` (each registers its family)."""
    import ragsweep.judge.metrics as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name != "registry":
            importlib.import_module(f"{pkg.__name__}.{info.name}")


def get(name: str) -> Metric:
    load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def find(name: str) -> Metric | None:
    load_all()
    return _REGISTRY.get(name)


def all_metrics(family: str | None = None) -> Iterator[Metric]:
    load_all()
    for m in sorted(_REGISTRY.values(), key=lambda m: m.name):
        if family is None or m.family == family:
            yield m


def values(metric: Metric, records: Iterable[dict[str, Any]]) -> list[float]:
    """``metric``'s per-question values of ``records`` (NaN where undefined). A record whose
    generation failed is NaN for every metric that reads the answer (:mod:`ragsweep.judge.ledger`):
    failed work is counted, never scored as an empty answer."""
    from ragsweep.judge.ledger import excluded

    if metric.per_question is None:
        raise ValueError(f"metric {metric.name!r} has no per-question function")
    return [float("nan") if excluded(r, metric.family) else float(metric.per_question(r)) for r in records]


def by_question(metric: Metric, records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``metric``'s per-question values keyed by question id (NaN where undefined or failed)."""
    recs = list(records)
    return {str(r.get("query_id", i)): v for i, (r, v) in enumerate(zip(recs, values(metric, recs)))}


def mean(vals: Iterable[float]) -> float:
    """Mean of the defined values (NaN skipped), summed in order; NaN when none is defined."""
    kept = [v for v in vals if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")


def families_in(records: Iterable[dict[str, Any]]) -> set[str]:
    """The families of the registered metrics that ``records`` carry per question (``metrics``;
    RAGChecker's own values keep RAGChecker's names there: ``precision``, not ``ragchecker/...``)."""
    names = {str(k) for r in records for k in (r.get("metrics") or {})}
    return {m.family for m in all_metrics() if m.name in names or (m.family == "ragchecker" and m.short in names)}


# -- human counterparts (issue 25): what a person can label, and which judge metric it corrects ----
@dataclass(frozen=True)
class HumanLabel:
    """A label a person gives one answer, the human counterpart of the judge ``metric``: an MLflow
    feedback assessment with a HUMAN source named ``name`` (or a row of a labels file), value on 0..1
    (yes/no -> 1/0). Declared in ``ragsweep.judge.metrics.human``; read by :mod:`ragsweep.analysis.labels`."""

    name: str
    metric: str
    values: str  # what the labeller enters, e.g. "yes/no" or "0..1"
    description: str


_HUMAN: dict[str, HumanLabel] = {}


def register_human(label: HumanLabel) -> HumanLabel:
    return _put(_HUMAN, label.name, label, "human label")


def human_labels() -> list[HumanLabel]:
    load_all()
    return [_HUMAN[k] for k in sorted(_HUMAN)]
