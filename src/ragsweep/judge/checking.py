"""Labels for (claim, reference) pairs through the shared cache: stage ``"entailment"``, key =
(checker id[, reference kind], claim text, reference). Only successful labels are stored."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any, Sequence

from ragsweep.store.cache import Cache, fetch
from ragsweep.judge.components import component_id
from ragsweep.judge.labels import LABELS, NEUTRAL

checker_id = component_id  # the same identity rule as extractors


def kinded(checker: Any, kind: str) -> bool:
    """Whether ``checker`` labels ``kind`` references differently (its ``reference_kinds``)."""
    return kind != "context" and kind in (getattr(checker, "reference_kinds", None) or ())


def call_checker(checker: Any, pairs: list[tuple[str, str]], cache: Any, kind: str = "context") -> list[Any]:
    """``checker.check_pairs`` with the optional ``cache`` / ``kind`` it takes; the labels checked."""
    fn = checker.check_pairs
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover
        params = {}
    kw: dict[str, Any] = {"cache": cache} if "cache" in params else {}
    if kinded(checker, kind):
        kw["kind"] = kind
    labels = list(fn(pairs, **kw))
    if len(labels) != len(pairs):
        raise RuntimeError(f"{checker!r} returned {len(labels)} labels for {len(pairs)} pairs")
    for lab in labels:
        if lab is not None and lab not in LABELS:
            raise ValueError(f"{checker!r} returned the label {lab!r}; expected one of {LABELS} or None")
    return labels


def check_cached(
    checker: Any,
    pairs: Sequence[tuple[str, str]],
    cache: Any = None,
    stats: Counter | None = None,
    memo: dict | None = None,
    kind: str = "context",
) -> list[str | None]:
    """A label per (claim, reference) pair; identical pairs are checked once, cached ones never.

    ``stats`` gets ``cache_hits``, ``checks`` (pairs sent to the checker) and ``check_failures``.
    ``memo``: labels already known in this run (updated), so that a pair asked again in a later
    round (a one-sentence chunk is also its own sentence) costs nothing. ``kind``: the references
    are retrieved ``context`` or ``answer`` texts; a checker that tells them apart
    (``reference_kinds``, the offline checker's two thresholds) gets it, and its answer labels are
    cached and memoised apart.
    """
    from ragsweep.judge.claims import claim_text

    stats = stats if stats is not None else Counter()
    is_kinded = kinded(checker, kind)
    memo = {} if is_kinded or memo is None else memo
    uses_q = bool(getattr(checker, "uses_question", False))
    # a pair is (claim, reference[, question]); a claim a string or a triplet. Its key: (claim
    # text, reference), plus the question for a checker whose prompt shows it (the LLM checker)
    raw: dict[tuple, tuple] = {}
    keyed = []
    for p in pairs:
        c, r = p[0], str(p[1])
        q = str(p[2]) if len(p) > 2 and p[2] is not None else None
        k = (claim_text(c), r, q or "") if uses_q else (claim_text(c), r)
        raw.setdefault(k, (c, r, q) if uses_q else (k[0], r))
        keyed.append(k)
    pairs = keyed
    result: dict[tuple, Any] = {}
    todo = []
    for p in dict.fromkeys(pairs):
        if not p[1].strip():
            result[p] = NEUTRAL  # an empty reference entails nothing
        elif p in memo:
            result[p] = memo[p]
        else:
            todo.append(p)
    if todo:
        if cache is not None:
            cid = checker_id(checker)
            extra = (f"kind={kind}",) if is_kinded else ()
            keys = {p: Cache.key("entailment", cid, *extra, *p) for p in todo}
        else:
            keys = {p: "\x00".join(p) for p in todo}  # distinct pairs, nothing stored
        checked: list[tuple] = []

        def compute(missing: list[tuple]) -> dict[tuple, Any]:
            checked.extend(missing)
            return dict(zip(missing, call_checker(checker, [raw[p] for p in missing], cache, kind)))

        got = fetch(cache, "entailment", keys, compute, keep=lambda lab: lab is not None)
        stats["cache_hits"] += len(todo) - len(checked)
        stats["checks"] += len(checked)
        stats["check_failures"] += sum(1 for p in checked if got[p] is None)
        for p in todo:
            result[p] = got[p]
            if got[p] is not None:
                memo[p] = got[p]
    return [result[p] for p in pairs]


__all__ = ["call_checker", "check_cached", "checker_id", "kinded"]
