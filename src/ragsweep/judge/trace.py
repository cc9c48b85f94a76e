"""TRACe: uTilization, Relevance, Adherence, Completeness (RAGBench, Friel et al. 2024, sec. 3.2).

Context documents are split into keyed sentences, RAGBench style: document index + letters,
``"0a", "0b", ... "0z", "0aa", "0ab", ... "0az", "0ba", ...`` (bijective base 26, as in
spreadsheet column names; checked against RAGBench's documents_sentences, where documents have up
to 550 sentences). Response sentences are keyed by letters alone (``"a", "b", ...``).

Given the relevant keys R and the utilized keys U of an example (eq. 1-4)::

    document relevance   = Len(R_i) / Len(d_i)            example: sum Len(R_i) / sum Len(d_i)
    document utilization = Len(U_i) / Len(d_i)            example: sum Len(U_i) / sum Len(d_i)
    completeness         = Len(R_i & U_i) / Len(R_i)      example: over all documents

``Len`` is ``"sentences"`` (a sentence count; the default, and what RAGBench's shipped scores
use) or ``"chars"`` (the characters of those sentences). Completeness with nothing relevant is
``empty_completeness`` (1.0, RAGBench's convention: nothing relevant was left out); with no context
at all (a closed-book answer, or documents without a sentence) it is NaN, as relevance and
utilization are: there is nothing to complete, and a 1.0 there would score the closed-book floor as
perfectly complete.
Adherence is a boolean per example: every response sentence is supported by the context.

RAGBench's shipped relevance/utilization/completeness are reproduced exactly (RMSE 0 on all 1,927
validation rows of 7 subsets) by ``length="sentences", ragbench_compat=True``: relevance and
utilization count the key *lists* as given (a duplicated key counts twice, a key that names no
sentence of the documents still counts), completeness is |set(R) & set(U)| / len(R list).
The default (``ragbench_compat=False``) de-duplicates keys and drops keys absent from the
documents, reporting how many were dropped. See docs/metrics.md for the measurements and
``python -m ragsweep.judge.trace --ragbench-dir DIR`` to re-run them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping, Sequence

from ragsweep.corpus.text import sentence_spans

Keyed = list[tuple[str, str]]

LENGTHS = ("sentences", "chars")
_KEY = re.compile(r"(\d+)([a-z]+)")
_NAN = float("nan")


def key_letters(index: int) -> str:
    """0 -> "a", 25 -> "z", 26 -> "aa", 51 -> "az", 52 -> "ba", 701 -> "zz", 702 -> "aaa"."""
    if index < 0:
        raise ValueError(f"sentence index must be >= 0, got {index}")
    letters = ""
    n = index + 1
    while n:
        n, rem = divmod(n - 1, 26)
        letters = chr(ord("a") + rem) + letters
    return letters


def letters_index(letters: str) -> int:
    """Inverse of :func:`key_letters`."""
    if not letters or not all("a" <= c <= "z" for c in letters):
        raise ValueError(f"not a sentence letter key: {letters!r}")
    n = 0
    for c in letters:
        n = n * 26 + (ord(c) - ord("a") + 1)
    return n - 1


def sentence_key(doc_index: int, sentence_index: int) -> str:
    """Key of sentence ``sentence_index`` of document ``doc_index``: (0, 27) -> "0ab"."""
    return f"{doc_index}{key_letters(sentence_index)}"


def parse_key(key: str) -> tuple[int, int] | None:
    """``"12ab"`` -> ``(12, 27)``; None for anything that is not a document sentence key."""
    m = _KEY.fullmatch(key.strip()) if isinstance(key, str) else None
    return (int(m.group(1)), letters_index(m.group(2))) if m else None


def key_sentences(docs: Sequence[str]) -> list[Keyed]:
    """Split documents into RAGBench-style keyed sentences with :func:`ragsweep.corpus.text.sentence_spans`.

    ``[[("0a", first sentence of doc 0), ("0b", ...)], [("1a", ...)], ...]``; a document with
    no sentence (empty or blank) gives an empty list.
    """
    return [
        [(sentence_key(d, j), doc[s:e]) for j, (s, e) in enumerate(sentence_spans(doc))]
        for d, doc in enumerate(docs)
    ]


def key_response(response: str) -> Keyed:
    """Response sentences keyed ``"a", "b", ...`` like RAGBench's response_sentences."""
    return [(key_letters(j), response[s:e]) for j, (s, e) in enumerate(sentence_spans(response))]


def _norm_key(key: Any) -> str:
    # RAGBench's support information sometimes spells a key with a trailing period ("a.").
    return str(key).strip().rstrip(".")


def _ratio(num: float, den: float, empty: float = _NAN) -> float:
    return num / den if den else empty


def trace_scores(
    documents_sentences: Sequence[Sequence[Sequence[str]]],
    relevant_keys: Iterable[str],
    utilized_keys: Iterable[str],
    length: str = "sentences",
    *,
    ragbench_compat: bool = False,
    empty_completeness: float = 1.0,
) -> dict[str, Any]:
    """Relevance, utilization and completeness of one example, per document and overall.

    ``documents_sentences``: per document, its ``(key, sentence_text)`` pairs (RAGBench's column,
    or :func:`key_sentences`). ``length``: ``"sentences"`` or ``"chars"`` (see module doc).

    Returns ``{"relevance", "utilization", "completeness", "documents": [{"relevance",
    "utilization", "completeness"} per document], "unknown_keys": [keys naming no sentence],
    "length"}``, values in [0, 1] (relevance and utilization can exceed 1 only with
    ``ragbench_compat`` and duplicated keys). A document without sentences has NaN relevance and
    utilization; the example's are NaN when no document has any sentence.

    With ``ragbench_compat=True`` keys are counted as RAGBench's scorer counts them: duplicates
    and keys absent from the documents count (a missing sentence has 0 characters, so this
    changes only ``length="sentences"``), and completeness = |set(R) & set(U)| / len(R).
    """
    if length not in LENGTHS:
        raise ValueError(f"length must be one of {LENGTHS}, got {length!r}")
    rel = [_norm_key(k) for k in relevant_keys]
    util = [_norm_key(k) for k in utilized_keys]

    size: dict[str, float] = {}  # key -> Len of that sentence
    doc_of: dict[str, int] = {}
    doc_len: list[float] = []
    for d, doc in enumerate(documents_sentences):
        total = 0.0
        for key, text in doc:
            key = _norm_key(key)
            size[key] = 1.0 if length == "sentences" else float(len(text))
            doc_of[key] = d
            total += size[key]
        doc_len.append(total)
    n_docs = len(doc_len)

    unknown = sorted({k for k in rel + util if k not in size})
    if not ragbench_compat:
        rel = [k for k in dict.fromkeys(rel) if k in size]
        util = [k for k in dict.fromkeys(util) if k in size]
    unit = 1.0 if length == "sentences" else 0.0  # Len of a key that names no sentence

    def doc_index(key: str) -> int | None:
        if key in doc_of:
            return doc_of[key]
        parsed = parse_key(key)
        return parsed[0] if parsed and parsed[0] < n_docs else None

    def lengths(keys: list[str]) -> tuple[float, list[float]]:
        per_doc = [0.0] * n_docs
        total = 0.0
        for k in keys:
            v = size.get(k, unit)
            total += v
            d = doc_index(k)
            if d is not None:
                per_doc[d] += v
        return total, per_doc

    rel_total, rel_doc = lengths(rel)
    util_total, util_doc = lengths(util)
    util_set = set(util)
    both = [k for k in dict.fromkeys(rel) if k in util_set]  # R & U (a set)
    both_total, both_doc = lengths(both)

    context = sum(doc_len)
    documents = [
        {
            "relevance": _ratio(rel_doc[d], doc_len[d]),
            "utilization": _ratio(util_doc[d], doc_len[d]),
            "completeness": _ratio(both_doc[d], rel_doc[d], empty_completeness if doc_len[d] else _NAN),
        }
        for d in range(n_docs)
    ]
    return {
        "relevance": _ratio(rel_total, context),
        "utilization": _ratio(util_total, context),
        "completeness": _ratio(both_total, rel_total, empty_completeness if context else _NAN),
        "documents": documents,
        "unknown_keys": unknown,
        "length": length,
    }


#: a context sentence joins a claim's lexical cover only when it supplies at least this many of the
#: claim's still-uncovered content words (chosen on RAGBench validation utilization, see
#: experiments/meta_eval/README.md)
COVER_MIN_NEW = 3


def lexical_cover(claims: Sequence[str], documents: Sequence[Keyed], min_new: int = COVER_MIN_NEW) -> list[list[str]]:
    """Per claim, the keys of the context sentences it draws its words from.

    Greedy set cover over content-word stems: repeatedly take the sentence (of any document) that
    supplies most of the claim's still-uncovered stems, while one supplies at least ``min_new``
    (or all of a claim with fewer content words; ties: the first in document order). A claim whose words are not in the context gets ``[]``.
    This is the ``trace_attribution="cover"`` rule of the evaluator: RAGBench's utilized sentences
    are the ones a response draws on, and a response sentence usually combines several of them,
    so "sentences that entail a claim on their own" finds few of them.
    """
    from ragsweep.judge.offline import stem
    from ragsweep.corpus.text import content_words

    if isinstance(min_new, bool) or not isinstance(min_new, int) or min_new < 1:
        raise ValueError(f"min_new must be an integer >= 1, got {min_new!r}")
    sents = [(key, frozenset(stem(w) for w in content_words(text))) for doc in documents for key, text in doc]
    out: list[list[str]] = []
    for claim in claims:
        left = {stem(w) for w in content_words(str(claim))}
        need = min(min_new, len(left))  # a short claim: one sentence holding all of it counts
        keys: list[str] = []
        while left and sents:
            key, have = max(sents, key=lambda kv: len(left & kv[1]))
            if len(left & have) < need:
                break
            keys.append(key)
            left -= have
        out.append(keys)
    return out


def adherence(supported: Iterable[bool | None]) -> bool | None:
    """Example adherence from per-sentence (or per-claim) support flags: all True -> True.

    A ``False`` anywhere gives False; otherwise a ``None`` (judge failure) gives None (unknown).
    An empty response is vacuously adherent. With :func:`sentence_support` this reproduces
    RAGBench's ``adherence_score`` on every validation row.
    """
    flags = list(supported)
    if any(f is False for f in flags):
        return False
    if any(f is None for f in flags):
        return None
    return True


def sentence_support(
    response_sentences: Sequence[Sequence[str]], unsupported_keys: Iterable[str]
) -> list[bool]:
    """Per response sentence (in order): supported unless its key is in ``unsupported_keys``.

    RAGBench's ``adherence_score`` is exactly "no unsupported_response_sentence_keys" on all its
    validation rows (its per-sentence ``fully_supported`` is often null and does not decide it);
    keys are compared without a trailing period (the data has both "a" and "a.").
    """
    bad = {_norm_key(k) for k in unsupported_keys}
    return [_norm_key(key) not in bad for key, _ in response_sentences]


def adherence_rate(
    response_sentences: Sequence[Sequence[str]],
    supported: Sequence[bool],
    length: str = "sentences",
) -> float:
    """Share of the response that is supported (the granular A_i of sec. 3.2), by sentence count
    or characters; NaN for an empty response."""
    if length not in LENGTHS:
        raise ValueError(f"length must be one of {LENGTHS}, got {length!r}")
    if len(supported) != len(response_sentences):
        raise ValueError(
            f"{len(supported)} support flags for {len(response_sentences)} response sentences"
        )
    sizes = [1.0 if length == "sentences" else float(len(t)) for _, t in response_sentences]
    return _ratio(sum(s for s, ok in zip(sizes, supported) if ok), sum(sizes))


# --- reproduction of RAGBench's shipped scores (docs/metrics.md) -------------------------------

SUBSETS = ("covidqa", "delucionqa", "emanual", "expertqa", "hagrid", "hotpotqa", "msmarco")

#: The candidate readings of "Len" measured against RAGBench's shipped scores.
CANDIDATES: dict[str, dict[str, Any]] = {
    "sentences, keys as shipped (compat)": {"length": "sentences", "ragbench_compat": True},
    "sentences, keys de-duplicated, unknown dropped": {"length": "sentences"},
    "chars, keys de-duplicated, unknown dropped": {"length": "chars"},
    "sentences, compat, empty completeness = 0": {
        "length": "sentences", "ragbench_compat": True, "empty_completeness": 0.0,
    },
}


def shipped_rmse(rows: Iterable[Mapping[str, Any]], **options: Any) -> dict[str, float]:
    """RMSE of :func:`trace_scores` (with ``options``) against each row's shipped
    relevance/utilization/completeness_score, and the adherence accuracy of :func:`adherence`."""
    err = {"relevance": 0.0, "utilization": 0.0, "completeness": 0.0}
    n = agree = 0
    for row in rows:
        docs = [[(k, t) for k, t in doc] for doc in row["documents_sentences"]]
        s = trace_scores(
            docs, list(row["all_relevant_sentence_keys"]), list(row["all_utilized_sentence_keys"]),
            **options,
        )
        for m in err:
            err[m] += (s[m] - float(row[f"{m}_score"])) ** 2
        predicted = adherence(
            sentence_support(row["response_sentences"], row["unsupported_response_sentence_keys"])
        )
        agree += predicted == bool(row["adherence_score"])
        n += 1
    out = {m: math.sqrt(v / n) if n else _NAN for m, v in err.items()}
    out["adherence_accuracy"] = agree / n if n else _NAN
    out["n"] = n
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the RMSE table of docs/metrics.md from RAGBench validation parquet files."""
    import argparse
    from pathlib import Path

    import pandas as pd

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--ragbench-dir", required=True, help="folder with SUBSET/validation.parquet")
    args = ap.parse_args(argv)
    print("| candidate | subset | n | RMSE relevance | RMSE utilization | RMSE completeness |")
    print("|---|---|---|---|---|---|")
    for subset in SUBSETS:
        path = Path(args.ragbench_dir) / subset / "validation.parquet"
        if not path.exists():
            print(f"(skipped {subset}: {path} not found)")
            continue
        rows = pd.read_parquet(path).to_dict("records")
        for name, options in CANDIDATES.items():
            r = shipped_rmse(rows, **options)
            print(
                f"| {name} | {subset} | {r['n']} | {r['relevance']:.4f} | "
                f"{r['utilization']:.4f} | {r['completeness']:.4f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
