"""The trained checker: a small cross-encoder P(reference supports claim), run by torch alone.

The model is the bundled all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) read as a cross-encoder:
``[CLS] premise [SEP] claim [SEP]`` (premise = a piece of the reference first, the NLI order; token
types 0 / 1), BERT's forward of :func:`ragsweep.corpus.bert_encoder.bert_layers`, the mean of the
last hidden states over the real tokens, and one logistic unit on top. It was fine-tuned by
``experiments/meta_eval/train_checker.py`` on claim / evidence pairs that can be had without a
model hub (``experiments/meta_eval/checker_data.md``); the word embeddings stay those of the
bundled MiniLM (frozen in training), so the weights file holds the rest only.

Long references (a 20-chunk context) are not truncated blindly: the reference is split into
sentences as the offline checker splits it, every window of ``window`` adjacent sentences is
ranked by the offline checker's lexical alignment (content-word recall of the claim, light
stemming; bigram recall breaks ties), and the ``top_k_windows`` best windows are each scored
against the claim; the pair's P is the largest. A reference of at most ``whole_words`` words is
scored whole (one pair). Labels: ``Entailment`` when P >= the threshold (``threshold`` for
retrieved context, ``answer_threshold`` for an answer), else ``Neutral`` (the model is binary).

Weights: ``trained_checker.safetensors`` beside this file (a missing file is a clear error naming
``evaluator.checker.weights`` and the training command), or any file the training script wrote.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragsweep.errors import ConfigError
from ragsweep.judge.precision import PRECISIONS, quantize_int8, resolve_precision
from ragsweep.judge.labels import ENTAILMENT, NEUTRAL
from ragsweep.judge.offline_text import (REFERENCE_KINDS, _analyse, _reference, _recall, _validate,
                                         _validate_device, _windows)

log = logging.getLogger(__name__)

WEIGHTS_PATH = Path(__file__).with_name("trained_checker.safetensors")
TRAIN_COMMAND = "python -m experiments.meta_eval.train_checker --data DIR --out FILE"
#: the bundled MiniLM's tensor kept out of the weights file (frozen in training)
FROZEN = ("embeddings.word_embeddings.weight",)


class TrainedCheckerError(ConfigError, FileNotFoundError):
    """The trained checker's weights file is missing or unreadable."""


def select_windows(claim: str, reference: str, window: int = 3, k: int = 2, whole_words: int = 150) -> list[str]:
    """The pieces of ``reference`` the claim is scored against: the whole reference when it has at
    most ``whole_words`` words, else the ``k`` windows of ``window`` adjacent sentences that hold
    most of the claim's content words (the offline checker's alignment), best first."""
    reference = str(reference)
    if len(reference.split()) <= whole_words:
        return [reference]
    ref = _reference(reference)
    n = len(ref.sentences)
    stems = _analyse(str(claim)).stems
    bigrams = _analyse(str(claim)).bigrams
    win_sets, win_bi, _ = _windows(reference, window)
    score = np.array([_recall(stems, win_sets[i]) + 0.01 * (len(bigrams & win_bi[i]) / len(bigrams) if bigrams else 0.0)
                      for i in range(n)])
    order = np.argsort(-score, kind="stable")[: max(1, k)]
    return [" ".join(ref.sentences[i : min(n, i + window)]) for i in order]


@lru_cache(maxsize=4)
def _base(path: str) -> tuple[Any, Any, dict[str, Any]]:
    """The bundled MiniLM's tokenizer, frozen word embeddings and config (once per process)."""
    import tokenizers
    from safetensors.torch import load_file

    p = Path(path)
    tok = tokenizers.Tokenizer.from_file(str(p / "tokenizer.json"))
    w = load_file(str(p / "model.safetensors"))
    frozen = {k: w[f"bert.{k}" if f"bert.{k}" in w else k] for k in FROZEN}
    return tok, frozen, json.loads((p / "config.json").read_text())


def base_path() -> str:
    from ragsweep.corpus.embeddings import minilm_path

    return minilm_path()


def build_model(base: str | None = None, weights: dict[str, Any] | None = None, dropout: float = 0.0) -> Any:
    """The cross-encoder module: the bundled MiniLM's weights (a fresh head) or, with ``weights``,
    a trained state (``FROZEN`` tensors always from the bundled model)."""
    import torch
    from safetensors.torch import load_file

    class CrossEncoder(torch.nn.Module):
        def __init__(self, state: dict[str, Any], config: dict[str, Any], frozen: dict[str, Any]) -> None:
            super().__init__()
            self.heads = int(config["num_attention_heads"])
            self.layers = int(config["num_hidden_layers"])
            self.eps = float(config["layer_norm_eps"])
            self.dropout = dropout
            self.names = sorted(k for k in state if not k.startswith("head."))
            self.params = torch.nn.ParameterList([torch.nn.Parameter(state[k].float().clone()) for k in self.names])
            for k, v in frozen.items():
                self.register_buffer(k.replace(".", "__"), v.float().clone(), persistent=False)
            self.frozen_names = list(frozen)
            dim = int(config["hidden_size"])
            self.head = torch.nn.Linear(dim, 1)
            self.linear: Any = None  # int8 inference: quantize_int8 sets it
            if "head.weight" in state:
                self.head.weight.data.copy_(state["head.weight"].float())
                self.head.bias.data.copy_(state["head.bias"].float())
            else:
                torch.nn.init.normal_(self.head.weight, std=0.02)
                torch.nn.init.zeros_(self.head.bias)

        def weights(self) -> dict[str, Any]:
            w = dict(zip(self.names, self.params))
            w.update({k: getattr(self, k.replace(".", "__")) for k in self.frozen_names})
            return w

        def forward(self, ids: Any, types: Any, mask: Any) -> Any:
            from ragsweep.corpus.bert_encoder import bert_layers

            x = bert_layers(self.weights(), ids, mask, heads=self.heads, layers=self.layers, eps=self.eps,
                            type_ids=types, dropout=self.dropout if self.training else 0.0, linear=self.linear)
            m = mask.unsqueeze(-1).to(x.dtype)
            pooled = (x * m).sum(dim=1) / torch.clamp(m.sum(dim=1), min=1e-9)
            pooled = torch.nn.functional.dropout(pooled, self.dropout, self.training)
            return self.head(pooled).squeeze(-1)

        def state(self) -> dict[str, Any]:
            out = {k: p.detach() for k, p in zip(self.names, self.params)}
            out["head.weight"] = self.head.weight.detach()
            out["head.bias"] = self.head.bias.detach()
            return out

    path = base or base_path()
    _, frozen, config = _base(path)
    if weights is None:
        raw = load_file(str(Path(path) / "model.safetensors"))
        weights = {k.removeprefix("bert."): v for k, v in raw.items() if k.removeprefix("bert.") not in FROZEN
                   and not k.startswith("pooler") and not k.removeprefix("bert.").startswith("pooler")}
    return CrossEncoder(weights, config, frozen)


def encode_pairs(tok: Any, pairs: Sequence[tuple[str, str]], max_length: int) -> list[Any]:
    """Token ids of (premise, claim) pairs, the premise cut first when the pair is too long."""
    tok.no_padding()
    tok.enable_truncation(max_length, strategy="only_first")
    out = []
    for prem, claim in pairs:
        try:
            out.append(tok.encode(str(prem), str(claim)))
        except Exception:  # noqa: BLE001 - the claim alone is longer than max_length: cut both
            tok.enable_truncation(max_length, strategy="longest_first")
            out.append(tok.encode(str(prem), str(claim)))
            tok.enable_truncation(max_length, strategy="only_first")
    return out


def collate(encs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    length = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), length), dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = e.ids
        types[r, : len(e.ids)] = e.type_ids
        mask[r, : len(e.ids)] = 1
    return ids, types, mask


class TrainedChecker:
    """P(entailed) from the trained cross-encoder over the claim's best-aligned windows."""

    @dataclass
    class Config:
        weights: str | None = None  # a safetensors file of train_checker.py; None: the shipped file
        threshold: float | None = None  # P >= this -> Entailment (retrieved context); None: the file's
        answer_threshold: float | None = None  # the same for an answer reference; None: the file's
        window: int = 3  # adjacent sentences in a window
        top_k_windows: int = 2  # best-aligned windows scored per pair (P = their max)
        whole_words: int = 150  # a reference of at most this many words is scored whole
        max_length: int = 256  # tokens of a (window, claim) pair
        batch_tokens: int = 4096  # padded tokens a batch holds at most (CPU)
        device: str = "cpu"
        precision: str = "auto"  # auto: bf16 where the hardware computes it natively, else fp32; int8 by name

        def __post_init__(self) -> None:
            if self.weights is not None:
                _validate(isinstance(self.weights, str) and bool(self.weights), "weights",
                          f"({self.weights!r}) must be null or a weights file")
            for name in ("threshold", "answer_threshold"):
                v = getattr(self, name)
                if v is not None:
                    _validate(isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= float(v) <= 1.0,
                              name, f"({v!r}) must be a number in [0, 1] or null")
                    setattr(self, name, float(v))
            for name, lo in (("window", 1), ("top_k_windows", 1), ("whole_words", 0), ("max_length", 16),
                             ("batch_tokens", 64)):
                v = getattr(self, name)
                _validate(isinstance(v, int) and not isinstance(v, bool) and v >= lo, name, f"({v!r}) must be an integer >= {lo}")
            _validate(self.max_length <= 512, "max_length", f"({self.max_length!r}) must be <= 512 (MiniLM's positions)")
            _validate(self.precision in PRECISIONS, "precision", f"({self.precision!r}) must be one of {', '.join(PRECISIONS)}")
            _validate(self.precision != "int8" or self.device.startswith("cpu"), "precision",
                      f"(int8) runs on the CPU only (device {self.device!r}): use bf16 on a GPU")
            _validate_device(self.device)

    name = "trained"
    reference_kinds = REFERENCE_KINDS

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.checker")
        self._model: Any = None
        self._meta: dict[str, Any] | None = None
        self.stats = {"pairs": 0, "windows": 0}

    def __repr__(self) -> str:
        return f"TrainedChecker({self.config})"

    @property
    def path(self) -> Path:
        return Path(self.config.weights) if self.config.weights else WEIGHTS_PATH

    def _missing(self) -> TrainedCheckerError:
        return TrainedCheckerError(
            f"evaluator.checker.weights: the trained checker's weights file {self.path} is missing; train one with "
            f"`{TRAIN_COMMAND}` and give evaluator.checker.weights=FILE, or use evaluator/checker=offline")

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            if not self.path.is_file():
                raise self._missing()
            from safetensors import safe_open

            try:
                with safe_open(str(self.path), framework="pt") as f:
                    self._meta = json.loads((f.metadata() or {}).get("ragsweep", "{}"))
            except Exception as exc:  # noqa: BLE001 - not a safetensors file
                raise TrainedCheckerError(f"evaluator.checker.weights: cannot read {self.path}: {exc}") from None
        return self._meta

    @property
    def cache_id(self) -> dict[str, Any]:
        import hashlib

        cfg = asdict(self.config)
        for k in ("device", "batch_tokens", "weights"):
            cfg.pop(k)
        cfg["precision"] = self.precision  # bf16 and fp32 differ in the last digits: not one cache
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16] if self.path.is_file() else None
        return {"checker": "trained", "config": cfg, "weights_sha256": digest}

    @property
    def precision(self) -> str:
        """The arithmetic the model runs in here (``precision: auto`` resolved for this machine)."""
        return resolve_precision(self.config.precision, self.config.device)

    def threshold_for(self, kind: str = "context") -> float:
        if kind not in REFERENCE_KINDS:
            raise ValueError(f"kind ({kind!r}) must be one of {', '.join(REFERENCE_KINDS)}")
        own = self.config.answer_threshold if kind == "answer" else self.config.threshold
        if own is not None:
            return own
        return float(self.meta.get(f"{kind}_threshold", self.meta.get("threshold", 0.5)))

    def load(self) -> Any:
        if self._model is None:
            from safetensors.torch import load_file

            meta = self.meta  # raises when missing
            state = load_file(str(self.path))
            model = build_model(weights=state)
            model.eval().to(self.config.device)
            if self.precision == "int8":
                quantize_int8(model)
            self._model = model
            self._tok = _base(base_path())[0]
            self._max_length = min(self.config.max_length, int(meta.get("max_length", self.config.max_length)))
            chosen = {k: meta[k] for k in ("window", "top_k_windows") if k in meta}
            differs = {k: v for k, v in chosen.items() if getattr(self.config, k) != v}
            if differs and (self.config.threshold is None or self.config.answer_threshold is None):
                log.warning("evaluator.checker: the thresholds in %s were chosen for %s; this run scores with %s: "
                            "give evaluator.checker.%s to match them, or thresholds of your own", self.path.name,
                            chosen, {k: getattr(self.config, k) for k in chosen},
                            " and evaluator.checker.".join(f"{k}={v}" for k, v in differs.items()))
        return self._model

    def score_windows(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(premise supports claim) of each (premise, claim) pair, as given (no window selection)."""
        import torch

        model = self.load()
        encs = encode_pairs(self._tok, pairs, self._max_length)
        out = np.zeros(len(encs), dtype=np.float64)
        from ragsweep.corpus.bert_encoder import BertEncoder

        budget = self.config.batch_tokens if self.config.device == "cpu" else 1 << 62
        bf16 = self.precision == "bf16"
        with torch.inference_mode(), torch.autocast(self.config.device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            for idx in BertEncoder._batches([len(e.ids) for e in encs], 256, budget):
                ids, types, mask = (torch.from_numpy(a).to(self.config.device) for a in collate([encs[i] for i in idx]))
                out[idx] = torch.sigmoid(model(ids, types, mask).float()).cpu().numpy()
        return out

    def score_pairs(self, pairs: Sequence[tuple[str, str]], cache: Any = None) -> list[float]:
        """P(entailed) for each (claim, reference): the max over the claim's best-aligned windows."""
        if not pairs:
            return []
        flat: list[tuple[str, str]] = []
        owner: list[tuple[int, int]] = []
        index: dict[tuple[str, str], int] = {}
        c = self.config
        for i, (claim, ref) in enumerate(pairs):
            if not str(ref).strip() or not str(claim).strip():
                continue
            for piece in select_windows(str(claim), str(ref), c.window, c.top_k_windows, c.whole_words):
                key = (piece, str(claim))
                if key not in index:
                    index[key] = len(flat)
                    flat.append(key)
                owner.append((i, index[key]))
        p = np.zeros(len(pairs))
        if flat:
            s = self.score_windows(flat)
            for i, j in owner:
                p[i] = max(p[i], s[j])
        self.stats["pairs"] += len(pairs)
        self.stats["windows"] += len(flat)
        return [float(v) for v in p]

    def check_pairs(self, pairs: Sequence[tuple[str, str]], cache: Any = None, kind: str = "context") -> list[str]:
        thr = self.threshold_for(kind)
        return [ENTAILMENT if v >= thr else NEUTRAL for v in self.score_pairs(pairs, cache)]

    def check(self, claims: Sequence[str], reference: str, cache: Any = None, kind: str = "context") -> list[str]:
        return self.check_pairs([(c, reference) for c in claims], cache, kind)


def save(model: Any, path: str | Path, meta: dict[str, Any], dtype: str = "float16") -> Path:
    """Write the model's trainable weights (``FROZEN`` excluded) as safetensors with ``meta``."""
    import torch
    from safetensors.torch import save_file

    dt = {"float16": torch.float16, "float32": torch.float32}[dtype]
    state = {k: v.to("cpu", dt).contiguous() for k, v in model.state().items()}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(p), metadata={"ragsweep": json.dumps(meta, sort_keys=True)})
    return p


__all__ = ["TrainedChecker", "TrainedCheckerError", "WEIGHTS_PATH", "resolve_precision", "build_model", "quantize_int8", "encode_pairs", "collate",
           "select_windows", "save"]
