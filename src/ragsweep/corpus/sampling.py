"""Seeded, stratified samples of text windows to generate questions from (``ragsweep-questions``).

A question set must not depend on the chunking a sweep will compare, so the windows here are cut
from the parsed text itself, never from chunks:

* a document's **strata** are its sections (the headings of the two outermost levels it has), else
  its pages (a PDF), else ``parts`` about equal parts of its text, cut where a sentence starts;
* a stratum is cut into **windows** of whole sentences, about ``window_chars`` characters each
  (:func:`ragsweep.corpus.text.sentence_spans`); a window shorter than ``min_chars`` is no window;
* the **anchors** (one per sample) are drawn round-robin over the documents in a seeded random order,
  and inside a document round-robin over its strata in a seeded order, so ``n`` samples spread over
  as many documents and sections as there are before any is used twice; ``per_doc`` caps how many
  samples draw on one document (anchor or partner);
* each sample gets a **kind** (``kinds``: shares that sum to 1, split by largest remainder and
  shuffled); the two-window kinds (``multi_hop``, ``comparison``) get a **partner** window: the
  window of another document, or of the same document at least ``min_distance`` characters away,
  that is closest to the anchor in TF-IDF cosine (scikit-learn) among a stratified pool of
  windows, so the two pieces talk about something in common. A sample whose anchor has no partner
  becomes ``single`` (counted in ``stats["paired_to_single"]``).

Everything is a pure function of the documents and the config: the same seed gives the same samples.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from ragsweep.corpus.place import heading_path, page_of
from ragsweep.corpus.text import sentence_spans
from ragsweep.types import Document

KINDS = ("single", "multi_hop", "comparison", "unanswerable")
PAIRED = frozenset({"multi_hop", "comparison"})
#: at most this many windows per document in the partner pool, and this many windows in all
POOL_PER_DOC = 12
POOL_MAX = 20_000


@dataclass(frozen=True)
class Window:
    """``text == document.text[start:end]``; ``stratum`` names the section, page or part it is in."""

    doc_id: str
    start: int
    end: int
    text: str
    stratum: str


@dataclass(frozen=True)
class Sample:
    kind: str
    windows: tuple[Window, ...]


@dataclass
class SamplingConfig:
    n: int
    kinds: Mapping[str, float] = field(default_factory=lambda: {"single": 1.0})
    seed: int = 0
    window_chars: int = 1200
    min_chars: int = 200
    per_doc: int | None = None
    min_distance: int = 3000
    parts: int = 4

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n ({self.n!r}) must be a whole number >= 1")
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"kinds: unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
        shares = [float(v) for v in self.kinds.values()]
        if any(not math.isfinite(s) or s < 0 for s in shares) or not math.isclose(sum(shares), 1.0, abs_tol=1e-6):
            raise ValueError(f"kinds: the shares must be >= 0 and sum to 1, got {dict(self.kinds)}")
        if self.per_doc is not None and self.per_doc < 1:
            raise ValueError(f"per_doc ({self.per_doc}) must be >= 1 or null (no cap)")
        if self.min_chars < 1 or self.window_chars < self.min_chars:
            raise ValueError(f"window_chars ({self.window_chars}) must be >= min_chars ({self.min_chars}) >= 1")


def strata(doc: Document, parts: int = 4) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of the document's sections, else pages, else ``parts`` equal parts."""
    n = len(doc.text)
    if doc.headings:
        top = sorted({h.level for h in doc.headings})[:2]
        cuts = sorted({h.start for h in doc.headings if h.level in top} | {0})
        bounds = list(zip(cuts, cuts[1:] + [n]))
        return [(_section(doc, a), a, b) for a, b in bounds if b > a]
    if len(doc.pages) > 1:
        cuts = list(doc.pages) + [n]
        return [(f"p. {page_of(doc, a)}", a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    k = max(1, min(parts, n // 2000 or 1))
    starts = [s for s, _ in sentence_spans(doc.text)] or [0]
    cuts = sorted({0} | {starts[min(bisect_left(starts, i * n // k), len(starts) - 1)] for i in range(1, k)} | {n})
    return [(f"part {i + 1}/{len(cuts) - 1}", a, b) for i, (a, b) in enumerate(zip(cuts, cuts[1:])) if b > a]


def _section(doc: Document, pos: int) -> str:
    path = heading_path(doc, pos)
    return "§ " + " › ".join(path) if path else "§ (before the first heading)"


def cut(text: str, start: int, end: int, size: int, min_chars: int) -> list[tuple[int, int]]:
    """Windows of whole sentences of ``text[start:end]``, each about ``size`` characters (a longer
    sentence is a window of its own, cut at ``2 * size``); those under ``min_chars`` dropped."""
    out: list[tuple[int, int]] = []
    lo = hi = None
    for s, e in sentence_spans(text[start:end]):
        s, e = s + start, min(e + start, s + start + 2 * size)
        if lo is not None and e - lo > size:
            out.append((lo, hi))
            lo = None
        if lo is None:
            lo = s
        hi = e
    if lo is not None:
        out.append((lo, hi))
    return [(a, b) for a, b in out if b - a >= min_chars]


def windows_of(doc: Document, cfg: SamplingConfig) -> list[list[Window]]:
    """The document's windows, grouped by stratum (empty strata left out)."""
    out = []
    for name, a, b in strata(doc, cfg.parts):
        ws = [Window(doc.doc_id, s, e, doc.text[s:e], name) for s, e in cut(doc.text, a, b, cfg.window_chars, cfg.min_chars)]
        if ws:
            out.append(ws)
    return out


def counts(n: int, kinds: Mapping[str, float]) -> dict[str, int]:
    """``n`` split over the kinds by largest remainder (ties in the order of :data:`KINDS`)."""
    raw = {k: n * float(kinds.get(k, 0.0)) for k in KINDS}
    got = {k: int(math.floor(v)) for k, v in raw.items()}
    for k in sorted(KINDS, key=lambda k: (-(raw[k] - got[k]), KINDS.index(k)))[: n - sum(got.values())]:
        got[k] += 1
    return {k: v for k, v in got.items() if v}


class _Cursor:
    """One document's strata, each drawn in a seeded order, round-robin; windows never repeat."""

    def __init__(self, groups: list[list[Window]], rng: np.random.Generator):
        self.groups = [[g[i] for i in rng.permutation(len(g))] for g in groups]
        self.order = list(rng.permutation(len(groups)))
        self.at = 0

    def next(self) -> Window | None:
        for _ in range(len(self.order)):
            g = self.groups[self.order[self.at % len(self.order)]]
            self.at += 1
            if g:
                return g.pop()
        return None


def draw(documents: Iterable[Document], cfg: SamplingConfig) -> tuple[list[Sample], dict[str, int]]:
    """The samples (see the module docstring) and counts: ``documents``, ``documents_with_windows``,
    ``windows``, ``samples``, ``samples_<kind>``, ``paired_to_single``, ``short`` (fewer than ``n``:
    the documents, or their caps, ran out)."""
    rng = np.random.default_rng(cfg.seed)
    docs = [d for d in documents]
    grouped = {d.doc_id: windows_of(d, cfg) for d in docs}
    ids = [d.doc_id for d in docs if grouped[d.doc_id]]
    stats = {"documents": len(docs), "documents_with_windows": len(ids),
             "windows": sum(len(g) for gs in grouped.values() for g in gs)}
    if not ids:
        return [], {**stats, "samples": 0, "short": cfg.n}
    order = [ids[i] for i in rng.permutation(len(ids))]
    cursors = {d: _Cursor(grouped[d], rng) for d in order}
    used = {d: 0 for d in ids}
    cap = cfg.per_doc or math.inf
    anchors: list[Window] = []
    live = list(order)
    while len(anchors) < cfg.n and live:
        for d in list(live):
            if len(anchors) >= cfg.n:
                break
            w = cursors[d].next() if used[d] < cap else None
            if w is None:
                live.remove(d)
                continue
            anchors.append(w)
            used[d] += 1
    plan = [k for k, c in counts(len(anchors), cfg.kinds).items() for _ in range(c)]
    plan = [plan[i] for i in rng.permutation(len(plan))]
    pool = _pool(grouped, ids, rng) if PAIRED & set(plan) else []
    partner = _Partners(pool, anchors, cfg.min_distance) if pool else None
    samples, to_single = [], 0
    for w, kind in zip(anchors, plan):
        if kind in PAIRED:
            p = partner.best(w, lambda d: used.get(d, 0) < cap) if partner else None
            if p is None:
                kind, to_single = "single", to_single + 1
            else:
                used[p.doc_id] = used.get(p.doc_id, 0) + 1
                samples.append(Sample(kind, (w, p)))
                continue
        samples.append(Sample(kind, (w,)))
    stats.update({"samples": len(samples), "paired_to_single": to_single, "short": cfg.n - len(samples)})
    for k in KINDS:
        stats[f"samples_{k}"] = sum(1 for s in samples if s.kind == k)
    return samples, stats


def _pool(grouped: Mapping[str, list[list[Window]]], ids: Sequence[str], rng: np.random.Generator) -> list[Window]:
    """Up to :data:`POOL_PER_DOC` windows of each document (spread over its strata), at most
    :data:`POOL_MAX` in all (documents drawn at random beyond that)."""
    per = max(1, min(POOL_PER_DOC, POOL_MAX // max(1, len(ids))))
    pool: list[Window] = []
    for d in ids:
        groups = grouped[d]
        flat = [g[j] for j in range(max(len(g) for g in groups)) for g in groups if j < len(g)]  # stratum by stratum
        pool += flat[:per]
    if len(pool) > POOL_MAX:
        pool = [pool[i] for i in sorted(rng.choice(len(pool), POOL_MAX, replace=False))]
    return pool


class _Partners:
    """The pool window most like an anchor (TF-IDF cosine), from another document or far enough
    away in the same one, not used before."""

    def __init__(self, pool: list[Window], anchors: list[Window], min_distance: int):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.pool, self.min_distance = pool, min_distance
        vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1)
        try:
            self.m = vec.fit_transform([w.text for w in pool] + [w.text for w in anchors])
        except ValueError:  # no word at all (only stop words): no partner is better than another
            self.m = None
        self.anchor_row = {id(w): len(pool) + i for i, w in enumerate(anchors)}
        self.taken = {(w.doc_id, w.start) for w in anchors}

    def best(self, anchor: Window, allowed) -> Window | None:
        if self.m is None:
            return None
        sims = (self.m[: len(self.pool)] @ self.m[self.anchor_row[id(anchor)]].T).toarray().ravel()
        for i in np.argsort(-sims, kind="stable"):
            w = self.pool[int(i)]
            if (w.doc_id, w.start) in self.taken or not allowed(w.doc_id):
                continue
            if w.doc_id == anchor.doc_id and abs(w.start - anchor.start) < self.min_distance:
                continue
            if sims[i] <= 0:
                return None
            self.taken.add((w.doc_id, w.start))
            return w
        return None


__all__ = ["KINDS", "PAIRED", "Sample", "SamplingConfig", "Window", "counts", "cut", "draw", "strata", "windows_of"]
