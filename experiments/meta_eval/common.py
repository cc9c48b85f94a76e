"""Shared pieces of the meta-evaluation suites: arguments, data loaders, checkers, statistics, tables.

Every suite is ``python -m experiments.meta_eval.NAME --data PATH [--checker offline] [--limit N]
[--out FILE]``. ``--data`` may be the shared data root (``.../data``), the suite's own folder, or
(where it makes sense) the file itself; a path that does not exist prints a skip message and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ragsweep.judge.labels import ENTAILMENT
from ragsweep.corpus.text import content_words, words

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_CACHE = os.environ.get("RAGSWEEP_META_CACHE", "/tmp/ragsweep_meta_eval_cache")
RAGBENCH_SUBSETS = ("covidqa", "delucionqa", "emanual", "expertqa", "hagrid", "hotpotqa", "msmarco")


class Skip(Exception):
    """The data is not there: print the message and exit 0."""


# -- command line ---------------------------------------------------------------------------------
def parser(name: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m experiments.meta_eval.{name}", description=description)
    p.add_argument("--data", default="../shared/data", help="data root, the suite's folder, or its file")
    p.add_argument("--checker", default="offline", help="a checker of conf/evaluator/checker: offline (default), nli, llm")
    p.add_argument("--limit", type=int, default=None, help="use only the first N items (per subset)")
    p.add_argument("--out", default=None, help=f"Markdown output (default {RESULTS_DIR}/{name}.md)")
    p.add_argument("--cache", default=DEFAULT_CACHE, help="embedding cache directory ('' disables)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--model", default=None,
                   help="offline: minilm (default) or none; nli: a model name/path; llm: the judge's model name")
    p.add_argument("--base-url", default=None,
                   help="llm: an OpenAI-compatible endpoint (default: a managed llama.cpp SmolLM2 server)")
    p.add_argument("--api-key-env", default=None, help="llm: environment variable holding the endpoint's key")
    return p


def checker_from_args(args: argparse.Namespace) -> Any:
    """The checker ``--checker NAME`` names: the YAML ``conf/evaluator/checker/NAME.yaml``, with
    ``--model`` as its ``model`` (or, for a checker that needs a judge, the judge's model: the
    endpoint of ``--base-url``, else a managed llama.cpp SmolLM2 server)."""
    from ragsweep.judge import components

    try:
        spec = components.group_spec("checker", args.checker)
        judge = None
        if components.needs_judge("checker", spec):
            from ragsweep.judge.llm_judge import Judge

            if getattr(args, "base_url", None):
                judge = Judge(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env)
            else:
                judge = Judge(server={"_target_": "ragsweep.rag.generator.server.LlamaCppServer"}, model=args.model)
        elif getattr(args, "model", None) and "model" in spec:
            spec["model"] = args.model
        return components.build("checker", spec, judge)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - unknown name, missing judge, bad options
        from ragsweep.errors import ConfigError

        if isinstance(exc, ConfigError) and not isinstance(exc, components.EvaluatorConfigError):
            raise  # e.g. an NLI model that cannot be loaded: run_main prints it
        raise SystemExit(f"checker {args.checker!r} is not available or not configured here: {exc}") from None


def run_main(name: str, body: Callable[[argparse.Namespace], str], p: argparse.ArgumentParser,
             argv: Sequence[str] | None = None) -> int:
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    try:
        table = body(args)
    except Skip as exc:
        print(f"[{name}] skipped: {exc}")
        return 0
    except Exception as exc:  # a checker that cannot run here (NLI model not loadable, ...): one clear line
        from ragsweep.errors import ConfigError

        if not isinstance(exc, ConfigError):
            raise
        print(f"[{name}] error: {exc}", file=sys.stderr)
        return 2
    print(table)
    out = Path(args.out) if args.out else RESULTS_DIR / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table if table.endswith("\n") else table + "\n")
    print(f"[{name}] wrote {out}")
    return 0


def find_data(data: str, folder: str, marker: str) -> Path:
    """The directory holding ``marker`` given the data root, the folder itself or a file in it."""
    root = Path(data)
    if not root.exists():
        raise Skip(f"--data {data} does not exist (the meta-eval data is read from a path, never shipped)")
    cands = [root, root / folder] if root.is_dir() else [root.parent]
    for c in cands:
        if list(c.glob(marker)):
            return c
    raise Skip(f"no {folder}/{marker} under {data}")


def set_threads(n: int) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch

        torch.set_num_threads(max(1, n))
    except Exception:  # noqa: BLE001
        pass


def open_cache(path: str | None) -> Any:
    if not path:
        return None
    from ragsweep.store.cache import Cache

    return Cache(path)


# -- checkers -------------------------------------------------------------------------------------
def make_checker(name: str, **kwargs: Any) -> Any:
    """The checker ``conf/evaluator/checker/<name>.yaml`` with ``kwargs`` as options; anything
    that cannot be built exits with a clear message."""
    from ragsweep.judge import components

    try:
        return components.build("checker", components.group_spec("checker", name, **kwargs))
    except Exception as exc:  # noqa: BLE001 - unknown name, missing judge, bad options
        raise SystemExit(f"checker {name!r} is not available or not configured here: {exc}") from None


def score_pairs(checker: Any, pairs: Sequence[tuple[str, str]], cache: Any = None) -> np.ndarray:
    """P(entailed) per pair; a checker with labels only scores 1.0 for Entailment, else 0.0."""
    if not pairs:
        return np.zeros(0)
    if not hasattr(checker, "score_pairs"):
        return np.array([float(lab == ENTAILMENT) for lab in check_pairs(checker, pairs, cache)])
    try:
        return np.asarray(checker.score_pairs(list(pairs), cache=cache), dtype=float)
    except TypeError:
        return np.asarray(checker.score_pairs(list(pairs)), dtype=float)


def check_pairs(checker: Any, pairs: Sequence[tuple[str, str]], cache: Any = None, kind: str = "context") -> list[str]:
    """Labels per pair; ``kind="answer"`` (references are answers, not retrieved context) is passed
    to a checker that tells the two apart (``reference_kinds``: the offline checker's thresholds)."""
    if not pairs:
        return []
    kw = {"kind": kind} if kind != "context" and kind in (getattr(checker, "reference_kinds", None) or ()) else {}
    try:
        return list(checker.check_pairs(list(pairs), cache=cache, **kw))
    except TypeError:
        return list(checker.check_pairs(list(pairs), **kw))


# -- lexical baselines ----------------------------------------------------------------------------
def token_prf(pred: str, ref: str) -> tuple[float, float, float]:
    """SQuAD-style token precision / recall / F1 (multiset overlap of lower-cased word tokens)."""
    from collections import Counter

    p, r = Counter(words(pred)), Counter(words(ref))
    common = sum((p & r).values())
    if common == 0:
        return 0.0, 0.0, 0.0
    prec, rec = common / sum(p.values()), common / sum(r.values())
    return prec, rec, 2 * prec * rec / (prec + rec)


def _lcs(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    # row-by-row DP with numpy over the longer sequence
    if len(a) < len(b):
        a, b = b, a
    idx: dict[str, list[int]] = {}
    for j, t in enumerate(b):
        idx.setdefault(t, []).append(j)
    prev = np.zeros(len(b) + 1, dtype=np.int32)
    for t in a:
        cur = prev.copy()
        match = idx.get(t)
        if match:
            m = np.array(match)
            cur[m + 1] = np.maximum(cur[m + 1], prev[m] + 1)
        np.maximum.accumulate(cur, out=cur)
        prev = cur
    return int(prev[-1])


def rouge_l(pred: str, ref: str) -> tuple[float, float, float]:
    """ROUGE-L precision / recall / F1 over lower-cased word tokens (no stemming)."""
    a, b = words(pred), words(ref)
    lcs = _lcs(a, b)
    if lcs == 0:
        return 0.0, 0.0, 0.0
    p, r = lcs / len(a), lcs / len(b)
    return p, r, 2 * p * r / (p + r)


def content_overlap(claim: str, reference: str) -> float:
    """Share of the claim's content words that occur in the reference (the token-overlap baseline)."""
    cw = content_words(claim)
    if not cw:
        return 1.0
    have = set(words(reference))
    return sum(1 for w in cw if w in have) / len(cw)


# -- statistics -----------------------------------------------------------------------------------
def auroc(y: Iterable[int], s: Iterable[float]) -> float:
    y, s = np.asarray(list(y), dtype=int), np.asarray(list(s), dtype=float)
    if len(set(y.tolist())) < 2:
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s))


def correlation(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Pearson and Spearman x100 (RAGChecker's meta_eval.py convention)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan"), float("nan")
    return float(stats.pearsonr(a, b)[0] * 100), float(stats.spearmanr(a, b)[0] * 100)


def fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(v, digits) for v in r) + " |")
    return "\n".join(lines)


# -- data loaders ---------------------------------------------------------------------------------
def load_json_or_jsonl(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def load_ragbench_subset(folder: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of ``folder/validation.parquet`` (or ``validation.jsonl``) as plain dicts."""
    pq, jl = folder / "validation.parquet", folder / "validation.jsonl"
    if pq.is_file():
        import pandas as pd

        df = pd.read_parquet(pq)
        if limit:
            df = df.head(limit)
        rows = [_plain(r) for r in df.to_dict("records")]
    elif jl.is_file():
        rows = load_json_or_jsonl(jl)[: limit or None]
    else:
        return []
    return rows


def _plain(x: Any) -> Any:
    """numpy arrays / scalars from parquet -> lists / Python scalars (recursively)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def ragbench_sentence_labels(row: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(key, response sentence, supported) for each response sentence of a RAGBench row.

    A sentence is unsupported iff its key is in ``unsupported_response_sentence_keys`` (this is
    exactly what ``adherence_score`` is computed from; ``fully_supported`` is often the string
    'None' in delucionqa / emanual / expertqa / hagrid).
    """
    bad = set(row.get("unsupported_response_sentence_keys") or [])
    return [(k, t, int(k not in bad)) for k, t in row["response_sentences"]]


def ragbench_reference(row: dict[str, Any]) -> str:
    """The documents as one reference text: each document's sentences, documents separated by blank lines."""
    docs = []
    for doc in row["documents_sentences"]:
        docs.append(" ".join(t for _, t in doc))
    return "\n\n".join(docs)


def ragbench_sentence_pairs(rows: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[int], list[int]]:
    """Every labelled response sentence of ``rows`` as (sentence, the row's reference) pairs, with its
    support label and the index of its row."""
    pairs, y, rix = [], [], []
    for i, r in enumerate(rows):
        ref = ragbench_reference(r)
        for _, text, lab in ragbench_sentence_labels(r):
            pairs.append((text, ref))
            y.append(lab)
            rix.append(i)
    return pairs, y, rix


def ragbench_sentence_data(folder: Path, checker: Any, cache: Any = None, limit: int | None = None,
                           subsets: Sequence[str] = RAGBENCH_SUBSETS) -> dict[str, Any]:
    """Features (``checker.features``: the offline checker's) of every RAGBench response sentence against
    its row's documents.

    Returns ``X`` (n x len(FEATURES)), ``y`` (1 = supported), ``subset`` and ``row`` (index of the
    row within its subset) per sentence, and ``rows[subset]`` (the loaded rows).
    """
    from ragsweep.judge.offline import FEATURES

    X, y, sub, rix, rows = [], [], [], [], {}
    for s in subsets:
        rs = load_ragbench_subset(folder / s, limit)
        if not rs:
            continue
        rows[s] = rs
        pairs, labels, idx = ragbench_sentence_pairs(rs)
        if not pairs:
            continue
        Xs, _ = checker.features(pairs, cache)
        X.append(Xs)
        y += labels
        sub += [s] * len(pairs)
        rix += idx
    return {
        "X": np.vstack(X) if X else np.zeros((0, len(FEATURES))),
        "y": np.asarray(y, dtype=int),
        "subset": np.asarray(sub),
        "row": np.asarray(rix, dtype=int),
        "rows": rows,
    }


def wice_reference(item: dict[str, Any]) -> str:
    """A WiCE chunk's evidence lines (web-page lines, often without final punctuation) as one text,
    one line per paragraph so that no two lines merge into one sentence."""
    return "\n\n".join(s.strip() for s in item["evidence"] if s and s.strip())
