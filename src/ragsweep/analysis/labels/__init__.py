"""Human labels on a sweep's answers and the prediction-powered estimates made from them (issue 25).

The flow (``ragsweep-label``, :mod:`ragsweep.analysis.labels.cli`):

1. ``sample``: a seeded, uniformly random sample of the questions every system of the sweep
   answered (the same questions for every system, so comparisons stay paired) is drawn and marked
   on the runs' MLflow traces (trace tag ``ragsweep.label = sample``).
2. A person labels those answers: in the MLflow UI, as feedback assessments with a HUMAN source
   named after a label of the metric registry (:func:`ragsweep.judge.metrics.registry.human_labels`:
   ``correct``, ``complete``, ``faithful``, ``supported``), or in a labels file (CSV or JSONL,
   columns ``system`` (or ``run``), ``question_id``, ``label``, ``value``, ``labeller``).
   Both become the same :class:`Label` rows.
3. ``estimate`` (and ``ragsweep-report``): per system and label, the PPI++ mean and interval of
   the metric (:mod:`ragsweep.analysis.ppi`) beside the judge-only interval; paired PPI differences between
   systems; the judge's in-domain agreement with these labels.

Nothing here imports mlflow (that is :mod:`ragsweep.tracking.labels`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ragsweep.judge.human import (  # noqa: F401 - re-exported: the label contract
    QUESTION_LABELS,
    QUESTION_SYSTEM,
    SAMPLE_ARTIFACT,
    SAMPLE_TAG,
    SAMPLE_TAG_VALUE,
    Label,
    LabelError,
    canonical_name,
    is_question_label,
    label_kinds,
    parse_value,
)

FILE_COLUMNS = ("system", "question_id", "label", "value", "labeller")


def read_file(path: str | Path) -> list[Label]:
    """Labels from a CSV (header row) or JSONL file with columns ``system`` (or ``run``),
    ``question_id``, ``label``, ``value`` and optionally ``labeller``."""
    p = Path(path)
    if not p.is_file():
        raise LabelError(f"--labels {p}: no such file")
    rows: list[tuple[int, dict[str, Any]]] = []
    if p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        from ragsweep.corpus.dataset.loaders import read_jsonl  # the one JSONL reader: errors name file and line
        from ragsweep.errors import DataError

        try:
            rows = list(read_jsonl(p))
        except DataError as exc:
            raise LabelError(f"{exc} (a labels file has {', '.join(FILE_COLUMNS)})") from None
    else:
        with p.open(newline="", encoding="utf-8") as fh:
            for i, row in enumerate(csv.DictReader(fh), start=2):
                rows.append((i, {str(k).strip(): v for k, v in row.items() if k is not None}))
    kinds = label_kinds()
    out = []
    for i, row in rows:
        where = f"{p}:{i}"
        system = row.get("system", row.get("run"))
        if system in (None, ""):
            raise LabelError(f"{where}: field 'system' (or 'run') is missing; give the run name or run id the label is for")
        qid = row.get("question_id", row.get("query_id"))
        if qid in (None, ""):
            raise LabelError(f"{where}: field 'question_id' is missing")
        name = canonical_name(row.get("label", ""))
        if name is None:
            raise LabelError(f"{where}: field 'label' is {row.get('label')!r}; known labels: "
                             f"{', '.join([*kinds, *QUESTION_LABELS])}")
        value = row.get("value")
        if value in (None, ""):
            continue  # an unfilled row of the template
        out.append(Label(str(system).strip(), str(qid).strip(), name, parse_value(value, f"{where}: field 'value'"),
                         str(row.get("labeller") or ""), "file"))
    return out


def draw_sample(question_ids: Iterable[str], n: int, seed: int = 0) -> list[str]:
    """``n`` question ids drawn uniformly without replacement (seeded; independent of the order
    the ids come in); all of them when there are at most ``n``."""
    ids = sorted({str(q) for q in question_ids})
    if n <= 0:
        raise LabelError(f"--n {n}: the sample needs at least one question")
    if n >= len(ids):
        return ids
    rng = np.random.default_rng(seed)
    return sorted(ids[i] for i in rng.choice(len(ids), size=n, replace=False))


def n_for_width(sd: float, width: float, confidence: float = 0.95) -> int:
    """Labels for a labels-only interval of total ``width`` when labels spread ``sd`` (0..1 scale;
    0.5 is the worst case of a yes/no label); the PPI interval is at most about this wide."""
    from scipy.stats import norm

    if not (width > 0):
        raise LabelError(f"--width {width}: give the interval's total width on the 0..1 scale, e.g. 0.2")
    z = float(norm.ppf(0.5 + confidence / 2))
    return max(1, int(math.ceil((2 * z * sd / width) ** 2)))


def resolve_systems(labels: Sequence[Label], runs: Mapping[str, str]) -> tuple[list[Label], list[str]]:
    """Labels with ``system`` replaced by the run id (``runs``: run id -> run name); the names that
    match no run are returned as the second element."""
    by_name = {name: rid for rid, name in runs.items()}
    out, unknown = [], []
    for lab in labels:
        if is_question_label(lab.name):  # a question's own label: no system to resolve
            out.append(lab)
            continue
        rid = lab.system if lab.system in runs else by_name.get(lab.system)
        if rid is None:
            unknown.append(lab.system)
            continue
        out.append(Label(rid, lab.question_id, lab.name, lab.value, lab.labeller, lab.source))
    return out, sorted(set(unknown))


def by_run(labels: Iterable[Label]) -> dict[str, dict[str, dict[str, float]]]:
    """run id -> label name -> question id -> value (several labellers: their mean); question labels
    (:data:`QUESTION_LABELS`) left out: :func:`by_question` has them."""
    acc: dict[str, dict[str, dict[str, list[float]]]] = {}
    for lab in labels:
        if is_question_label(lab.name):
            continue
        acc.setdefault(lab.system, {}).setdefault(lab.name, {}).setdefault(lab.question_id, []).append(lab.value)
    return {r: {n: {q: sum(v) / len(v) for q, v in qs.items()} for n, qs in names.items()} for r, names in acc.items()}


def by_question(labels: Iterable[Label]) -> dict[str, dict[str, float]]:
    """Question label name -> question id -> value: the mean over every labeller and over the runs
    it was given on (a question's label is the same whichever system's trace carries it)."""
    acc: dict[str, dict[str, list[float]]] = {}
    for lab in labels:
        if is_question_label(lab.name):
            acc.setdefault(lab.name, {}).setdefault(lab.question_id, []).append(lab.value)
    return {n: {q: sum(v) / len(v) for q, v in qs.items()} for n, qs in acc.items()}


def validity(labels: Iterable[Label]) -> dict[str, float]:
    """Question id -> whether people found the question valid and its reference answer correct (the
    product of the two labels where both were given, else the one that was)."""
    q = by_question(labels)
    ids = set(q.get("valid", {})) | set(q.get("reference_correct", {}))
    return {i: q.get("valid", {}).get(i, 1.0) * q.get("reference_correct", {}).get(i, 1.0) for i in sorted(ids)}


def attach(records: Mapping[str, Sequence[dict[str, Any]] | None], labels: Iterable[Label]) -> int:
    """Put each run's human labels into its records as ``rec["human"][metric] = value * scale`` (on
    the judge metric's scale), where the report's per-question code finds them; returns how many."""
    from ragsweep.judge.metrics.registry import find

    kinds = label_kinds()
    per = by_run(labels)
    count = 0
    for rid, recs in records.items():
        for rec in recs or []:
            qid = str(rec.get("query_id"))
            for name, qs in per.get(rid, {}).items():
                if qid in qs:
                    m = find(kinds[name].metric)
                    scale = m.scale if m is not None and math.isfinite(m.scale) else 1.0
                    rec.setdefault("human", {})[kinds[name].metric] = qs[qid] * scale
                    count += 1
    return count
