"""Where human labels enter the report's statistics (issue 25), kept apart from the verdict rules.

The report's per-question values (:mod:`ragsweep.analysis.report.paired`) are ``{question id: judge value}``
dicts. When a run's records carry human labels (``rec["human"][metric]``, put there by
:func:`ragsweep.analysis.labels.attach`), :func:`with_human` returns the same dict as a :class:`Judged`
that also holds those labels; :func:`level` carries them through a level's per-question mean; and
:func:`paired` gives the PPI++ paired difference that then stands in for the judge-only one (the
verdict rules read the same :class:`ragsweep.analysis.stats.Paired` either way). Without labels every
function returns its input unchanged (or None), so a report without labels is the same as before.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

PPI_METHOD = "PPI++"
SPARSE_METHOD = "labels, betting"


class Judged(dict):
    """Per-question judge values plus ``human``: the human labels of some of the same questions,
    on the metric's scale."""

    human: dict[str, float]

    def __init__(self, values: Mapping[str, float], human: Mapping[str, float]):
        super().__init__(values)
        self.human = dict(human)


def with_human(records: Sequence[dict[str, Any]] | None, metric: str, values: dict[str, float] | None):
    """``values`` as a :class:`Judged` when ``records`` carry human labels of ``metric``."""
    if values is None or not records:
        return values
    human = {}
    for i, r in enumerate(records):
        h = r.get("human") if isinstance(r, dict) else None
        if isinstance(h, dict) and metric in h and h[metric] is not None and math.isfinite(float(h[metric])):
            human[str(r.get("query_id", i))] = float(h[metric])
    return Judged(values, human) if human else values


def level(values: dict[str, float], per_run: Sequence[Any]):
    """A level's per-question mean (``values``) with the level's human values: per question, the
    mean over the level's runs, where every run of the level has a label."""
    if not per_run or not all(isinstance(p, Judged) for p in per_run):
        return values
    acc: dict[str, list[float]] = {}
    for p in per_run:
        for q, v in p.human.items():
            acc.setdefault(q, []).append(v)
    return Judged(values, {q: sum(v) / len(v) for q, v in acc.items() if len(v) == len(per_run) and q in values})


def paired(metric: str, a: Any, b: Any):
    """``(Paired, method, labelled human differences)``: the prediction-powered ``b - a`` (a
    :class:`ragsweep.analysis.stats.Paired`, n = labelled questions; :func:`ragsweep.analysis.ppi.paired`) when both
    carry human labels on enough common questions (:func:`ragsweep.analysis.ppi.min_labels`), else None.
    ``method`` is :data:`PPI_METHOD` for the PPI++ CLT interval, :data:`SPARSE_METHOD` where too
    few labelled differences are non-zero for it and the labelled differences' betting interval
    stands in (the differences, on the metric's scale, are what its tol tests read)."""
    if not (isinstance(a, Judged) and isinstance(b, Judged)):
        return None
    from ragsweep.analysis import ppi
    from ragsweep.judge.metrics.registry import find

    m = find(metric)
    scale = m.scale if m is not None and math.isfinite(m.scale) else 1.0
    res = ppi.paired(a, {q: v / scale for q, v in a.human.items()}, b, {q: v / scale for q, v in b.human.items()}, scale)
    if not res:
        return None
    diffs = [b.human[q] - a.human[q] for q in a if q in b and q in a.human and q in b.human]
    return res[0], (SPARSE_METHOD if res[1].method == ppi.SPARSE_METHOD else PPI_METHOD), diffs
