"""The offline claim checker: no network, no GPU, deterministic.

(The text analyses the features are built from are in :mod:`ragsweep.judge.offline_text`.
This file is the checker: its config, parameters, embeddings, the feature matrix and scoring.)

``score_pairs([(claim, reference), ...])`` gives P(the reference entails the claim). It is a small
logistic regression (parameters in ``offline_model.json`` next to this file, trained by
``experiments/meta_eval/train_offline.py`` on RAGBench sentence-support labels) over features of
the claim's best alignment to the reference:

- lexical: recall of the claim's content words (light stemming) in the best reference sentence,
  the best window of ``window`` adjacent sentences, the ``top_k_sentences`` best-aligned sentences
  together and the whole reference; the number of content words found nowhere; bigram recall;
- numbers and names: share of the claim's numbers / capitalised names missing from the reference;
- semantic: MiniLM cosine of the claim to the best sentence and the best window (the window's
  vector is the normalised sum of its sentences' vectors, so only sentences are ever encoded).

Citation markers ("[4]") and list markers ("1. ", a trailing " 6.") are ignored by the lexical
analysis. ``check_pairs`` turns P into labels: ``Entailment`` when P >= threshold (``threshold``
when the reference is retrieved context, ``answer_threshold`` with ``kind="answer"``: the
ground-truth answer or the response, which are written apart from each other); ``Contradiction``
only on concrete evidence on the best-aligned sentence (a near-paraphrase of the claim stating
another significant number, or the same content words with the negation flipped; P is then capped
at :data:`CONTRADICTION_CAP`); else ``Neutral``. ``model: none`` uses the lexical features only
(a second head in the same file; no torch). :func:`split_claims` is a deterministic claim splitter
(sentences, or clauses closer to atomic facts). Meta-evaluation: ``experiments/meta_eval/README.md``.

Embeddings of sentences are cached per (model, text) under stage ``"embeddings"`` with the same
key as :class:`ragsweep.rag.retriever.dense.DenseRetriever`, so a sweep shares them.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragsweep.corpus.text import STOPWORDS, split_sentences, words
from ragsweep.store.cache import class_key

from ragsweep.judge.offline_text import (  # noqa: F401 - the analyses, re-exported
    _CITATION,
    _YEAR_RANGE,
    _NUM,
    _NEG,
    _NUMBER_WORDS,
    _SUFFIXES,
    _validate,
    _validate_device,
    REFERENCE_KINDS,
    stem,
    _LIST_MARKER,
    strip_citations,
    _norm_number,
    numbers,
    _number_words,
    _names,
    _Text,
    _analyse,
    _Ref,
    _reference,
    _CLAUSE,
    _clauses,
    _rare,
    _windows,
    _recall,
    _weight,
    split_claims,
    _significant,
    _contradicts,
)
from ragsweep.judge.labels import CONTRADICTION, ENTAILMENT, LABELS, NEUTRAL  # noqa: F401 - LABELS re-exported

log = logging.getLogger(__name__)

PARAMS_PATH = Path(__file__).with_name("offline_model.json")
#: P(entailed) is capped here when the best-aligned sentence contradicts the claim (number / negation)
CONTRADICTION_CAP = 0.05

#: feature names, in the order of the feature matrix; the params file names the ones it uses
FEATURES = (
    "cos_sent",  # max cosine claim / reference sentence
    "cos_win",  # max cosine claim / window of adjacent sentences
    "cos_top_gap",  # cos_sent minus the second-best sentence cosine
    "rec_sent",  # content-word recall in the best sentence
    "rec_win",  # ... in the best window
    "rec_topk",  # ... in the top-k aligned sentences together
    "rec_all",  # ... in the whole reference
    "miss_log",  # log1p(content words of the claim found nowhere in the reference)
    "bigram_win",  # bigram recall in the best window
    "num_miss",  # share of the claim's numbers missing from the reference
    "has_num",
    "ent_miss",  # share of the claim's capitalised names missing from the reference
    "neg_flip",  # negation differs between claim and best-aligned sentence
    "len_log",  # log1p(content words of the claim)
    "rec_idf_all",  # rarity-weighted recall in the whole reference (weight ~ word length)
    "rec_wide",  # content-word recall in the best window of window + 1 sentences
    "seg_min_rec",  # min over the claim's clauses of their recall in the whole reference
    "miss_rare_log",  # log1p(missing content words that look rare: long, capitalised or numeric)
    "num_miss_win",  # share of the claim's numbers missing from its best-aligned window
    "ent_miss_win",  # share of the claim's capitalised names missing from its best-aligned window
    "rare_miss_win",  # log1p(rare-looking claim words missing from its best-aligned window)
)
LEXICAL_FEATURES = tuple(f for f in FEATURES if not f.startswith("cos_"))

#: citation markers ("[4]", "[1][2]", "[1, 3]", "[2-4]"): not content, and their numbers are not facts


def _load_sentence_transformer(model: str, device: str) -> Any:
    """One loaded model per (model, device) per process, shared with the dense retriever and RAGAS."""
    from ragsweep.corpus.embeddings import load_sentence_transformer

    return load_sentence_transformer(model, device)


class OfflineChecker:
    """Lexical + MiniLM alignment features and a small logistic regression; see the module doc."""

    @dataclass
    class Config:
        model: str = "minilm"  # "minilm" (bundled all-MiniLM-L6-v2), a sentence-transformers path, or "none"
        threshold: float | None = None  # P(entailed) at or above which a claim is Entailment; None: trained
        # the same when the reference is an answer (ground truth / response), not retrieved context;
        # None: the params file's value (chosen on WiCE, whose claims are written apart from their evidence)
        answer_threshold: float | None = None
        window: int = 2  # adjacent reference sentences in a window (the shipped head was fitted with 2)
        top_k_sentences: int = 3  # best-aligned sentences pooled for rec_topk (fitted with 3)
        contradiction: bool = True  # label Contradiction on numeric / negation evidence
        batch_size: int = 64
        device: str = "cpu"
        params: str | None = None  # parameters JSON; None: the shipped offline_model.json

        def __post_init__(self) -> None:
            _validate(isinstance(self.model, str) and bool(self.model), "model",
                      f"({self.model!r}) must be 'minilm', 'none' or a sentence-transformers model path")
            for name in ("threshold", "answer_threshold"):
                v = getattr(self, name)
                if v is not None:
                    _validate(isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= float(v) <= 1.0,
                              name, f"({v!r}) must be a number in [0, 1] or null")
                    setattr(self, name, float(v))
            _validate(isinstance(self.window, int) and not isinstance(self.window, bool) and 1 <= self.window <= 8,
                      "window", f"({self.window!r}) must be an integer in 1..8")
            _validate(isinstance(self.top_k_sentences, int) and not isinstance(self.top_k_sentences, bool)
                      and self.top_k_sentences >= 1, "top_k_sentences", f"({self.top_k_sentences!r}) must be >= 1")
            _validate(isinstance(self.contradiction, bool), "contradiction", f"({self.contradiction!r}) must be true or false")
            _validate(isinstance(self.batch_size, int) and not isinstance(self.batch_size, bool) and self.batch_size >= 1,
                      "batch_size", f"({self.batch_size!r}) must be >= 1")
            _validate_device(self.device)
            if self.params is not None:
                _validate(isinstance(self.params, str) and Path(self.params).is_file(), "params",
                          f"({self.params!r}) must be null or an existing JSON file")

    name = "offline"
    #: what ``check_pairs(kind=...)`` accepts: the reference is retrieved ``context`` or an ``answer``
    reference_kinds = REFERENCE_KINDS

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.checker")
        self._model: Any = None
        self._params: dict[str, Any] | None = None
        self.stats = {"texts_encoded": 0, "texts_cached": 0}

    # -- parameters -------------------------------------------------------------------------
    @property
    def use_embeddings(self) -> bool:
        return self.config.model != "none"

    def params(self) -> dict[str, Any]:
        """The logistic-regression head for the active feature set (full or lexical-only)."""
        if self._params is None:
            path = Path(self.config.params) if self.config.params else PARAMS_PATH
            if not path.is_file():
                raise FileNotFoundError(
                    f"{path} is missing: run python experiments/meta_eval/train_offline.py --data DATA to create it"
                )
            data = json.loads(path.read_text())
            head = data["models"]["full" if self.use_embeddings else "lexical"]
            fitted = data.get("feature_config", {})
            for key in ("window", "top_k_sentences", "model"):
                mine = getattr(self.config, key)
                if key in fitted and mine != fitted[key] and not (key == "model" and mine == "none"):
                    log.warning("evaluator.checker.%s=%r but %s was fitted with %r: scores are off-distribution",
                                key, mine, path.name, fitted[key])
            self._params = head
        return self._params

    @property
    def threshold(self) -> float:
        if self.config.threshold is not None:
            return self.config.threshold
        return float(self.params()["threshold"])

    @property
    def answer_threshold(self) -> float:
        if self.config.answer_threshold is not None:
            return self.config.answer_threshold
        head = self.params()
        return float(head.get("answer_threshold", head["threshold"]))

    def threshold_for(self, kind: str = "context") -> float:
        """The Entailment threshold for a reference of this kind (``context`` or ``answer``)."""
        if kind not in REFERENCE_KINDS:
            raise ValueError(f"kind ({kind!r}) must be one of {', '.join(REFERENCE_KINDS)}")
        return self.answer_threshold if kind == "answer" else self.threshold

    @property
    def cache_id(self) -> dict[str, Any]:
        """Class, config and a digest of the parameters file: a retrained head is a new checker."""
        import hashlib
        from dataclasses import asdict

        path = Path(self.config.params) if self.config.params else PARAMS_PATH
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
        return {"class": class_key(type(self)), "config": asdict(self.config),
                "params_sha256": digest}

    # -- embeddings -------------------------------------------------------------------------
    @property
    def model_key(self) -> str:
        from ragsweep.rag.retriever.dense import model_id

        return f"{model_id(self.config.model)}|max_seq_length=None"

    def _load_model(self) -> Any:
        if self._model is None:
            self._model = _load_sentence_transformer(self.config.model, self.config.device)
        return self._model

    def embed(self, texts: Sequence[str], cache: Any = None) -> dict[str, np.ndarray]:
        """Unit-norm float32 vectors of the distinct ``texts``; raw vectors cached per (model, text)."""
        from ragsweep.judge.embeddings import embed_cached

        unique = list(dict.fromkeys(texts))

        def encode(block: list[str]) -> Any:
            return self._load_model().encode(block, batch_size=self.config.batch_size, convert_to_numpy=True,
                                             show_progress_bar=False)

        vecs, n_cached = embed_cached(cache, self.model_key, unique, encode, block=2048, by_length=True)
        self.stats["texts_cached"] += n_cached
        self.stats["texts_encoded"] += len(unique) - n_cached
        out = {}
        for t in unique:
            v = vecs[t]
            n = float(np.linalg.norm(v))
            out[t] = v / n if n > 0 else v
        return out

    # -- features ---------------------------------------------------------------------------
    def features(self, pairs: Sequence[tuple[str, str]], cache: Any = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Feature matrix (rows = pairs, columns = :data:`FEATURES`) and per-pair alignment details."""
        pairs = [(str(c), str(r)) for c, r in pairs]
        refs = {r: _reference(r) for r in dict.fromkeys(r for _, r in pairs)}
        vec: dict[str, np.ndarray] = {}
        if self.use_embeddings and pairs:
            texts = [c for c, _ in pairs] + [s for ref in refs.values() for s in ref.sentences]
            vec = self.embed(texts, cache)
        ref_mats: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        X = np.zeros((len(pairs), len(FEATURES)), dtype=np.float64)
        details: list[dict[str, Any]] = []
        w = self.config.window
        for row, (claim, rtext) in enumerate(pairs):
            ref = refs[rtext]
            ci = _analyse(claim)
            n = len(ref.sentences)
            # lexical recall per sentence and per window
            win_sets, win_bi, wide = _windows(rtext, w)
            rec_s = np.array([_recall(ci.stems, info.stem_set) for info in ref.infos])
            rec_w = np.array([_recall(ci.stems, s) for s in win_sets])
            if self.use_embeddings:
                if rtext not in ref_mats:
                    S = np.stack([vec[s] for s in ref.sentences]).astype(np.float32)
                    W = np.stack([S[i : min(n, i + w)].sum(0) for i in range(n)])
                    W = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
                    ref_mats[rtext] = (S, W)
                S, W = ref_mats[rtext]
                cv = vec[claim]
                cos_s = S @ cv
                cos_w = W @ cv
            else:
                cos_s = np.zeros(n)
                cos_w = np.zeros(n)
            align = cos_s + rec_s if self.use_embeddings else rec_s
            order = np.argsort(-align, kind="stable")
            best = int(order[0])
            topk = frozenset().union(*[ref.infos[j].stem_set for j in order[: self.config.top_k_sentences]])
            bw = int(np.argmax(rec_w + cos_w))
            missing = [s for s in ci.stems if s not in ref.stem_set]
            wsum = sum(_weight(s) for s in ci.stems)
            rec_idf = 1.0 if wsum == 0 else sum(_weight(s) for s in ci.stems if s in ref.stem_set) / wsum
            bigram = 1.0 if not ci.bigrams else len(ci.bigrams & win_bi[bw]) / len(ci.bigrams)
            num_missing = [x for x in ci.nums if x not in ref.nums]
            names = _names(claim)
            names_missing = [x for x in names if x not in ref.all_words and stem(x) not in ref.all_words]
            best_info = ref.infos[best]
            neg_flip = float(ci.neg != best_info.neg)
            cs = np.sort(cos_s)[::-1]
            rec_wide = max((_recall(ci.stems, x) for x in wide), default=0.0)
            segs = [x for x in (_analyse(t).stems for t in _clauses(claim)) if len(x) >= 2] or [ci.stems]
            seg_min = min(_recall(x, ref.stem_set) for x in segs)
            rare = _rare(claim)
            miss_rare = sum(1 for x in missing if x in rare)
            bw_words = frozenset().union(*[ref.infos[j].all_words for j in range(bw, min(n, bw + w))]) if n else frozenset()
            bw_nums = frozenset().union(*[ref.infos[j].nums for j in range(bw, min(n, bw + w))]) if n else frozenset()
            num_miss_win = sum(1 for x in ci.nums if x not in bw_nums) / len(ci.nums) if ci.nums else 0.0
            ent_miss_win = (sum(1 for x in names if x not in bw_words and stem(x) not in bw_words) / len(names)
                            if names else 0.0)
            rare_miss_win = sum(1 for x in rare if x not in bw_words)
            X[row] = [
                float(cs[0]) if n else 0.0,
                float(cos_w.max()) if n else 0.0,
                float(cs[0] - cs[1]) if n > 1 else float(cs[0]) if n else 0.0,
                float(rec_s.max()) if n else 0.0,
                float(rec_w.max()) if n else 0.0,
                _recall(ci.stems, topk),
                _recall(ci.stems, ref.stem_set),
                math.log1p(len(missing)),
                bigram,
                len(num_missing) / len(ci.nums) if ci.nums else 0.0,
                float(bool(ci.nums)),
                len(names_missing) / len(names) if names else 0.0,
                neg_flip,
                math.log1p(len(ci.stems)),
                rec_idf,
                rec_wide,
                seg_min,
                math.log1p(miss_rare),
                num_miss_win,
                ent_miss_win,
                math.log1p(rare_miss_win),
            ]
            details.append({"best": best, "num_missing": num_missing, "empty": not ci.stems and not ci.nums,
                            "contradiction": bool(n) and _contradicts(ci, best_info, num_missing)})
        return X, details

    # -- scoring ----------------------------------------------------------------------------
    def predict(self, X: np.ndarray) -> np.ndarray:
        """P(entailed) from a feature matrix (rows of :data:`FEATURES`)."""
        p = self.params()
        idx = [FEATURES.index(f) for f in p["features"]]
        Z = (X[:, idx] - np.asarray(p["mean"])) / np.asarray(p["scale"])
        if p.get("squares"):
            Z = np.hstack([Z, Z**2])
        z = Z @ np.asarray(p["coef"]) + float(p["intercept"])
        return 1.0 / (1.0 + np.exp(-z))

    def _probabilities(self, pairs: Sequence[tuple[str, str]], cache: Any) -> tuple[np.ndarray, list[dict[str, Any]]]:
        X, details = self.features(pairs, cache)
        p = self.predict(X)
        for i, d in enumerate(details):
            if d["empty"]:  # nothing checkable (no content word, no number)
                p[i] = 0.0
            elif self.config.contradiction and d["contradiction"]:
                p[i] = min(p[i], CONTRADICTION_CAP)
        return p, details

    def score_pairs(self, pairs: Sequence[tuple[str, str]], cache: Any = None) -> list[float]:
        """P(entailed) in [0, 1] for each (claim, reference); P >= threshold <=> "Entailment"."""
        if not pairs:
            return []
        p, _ = self._probabilities(pairs, cache)
        return [float(v) for v in p]

    def check_pairs(self, pairs: Sequence[tuple[str, str]], cache: Any = None, kind: str = "context") -> list[str]:
        """ "Entailment" | "Neutral" | "Contradiction" for each (claim, reference); ``kind``: the
        references are retrieved ``context`` (threshold) or ``answer`` texts (answer_threshold)."""
        thr = self.threshold_for(kind)
        if not pairs:
            return []
        p, details = self._probabilities(pairs, cache)
        out = []
        for v, d in zip(p, details):
            if v >= thr and not (self.config.contradiction and d["contradiction"]):
                out.append(ENTAILMENT)
            elif self.config.contradiction and d["contradiction"]:
                out.append(CONTRADICTION)
            else:
                out.append(NEUTRAL)
        return out

    def check(self, claims: Sequence[str], reference: str, cache: Any = None, kind: str = "context") -> list[str]:
        return self.check_pairs([(c, reference) for c in claims], cache, kind)


__all__ = ["OfflineChecker", "FEATURES", "LEXICAL_FEATURES", "split_claims", "stem", "numbers", "strip_citations"]
