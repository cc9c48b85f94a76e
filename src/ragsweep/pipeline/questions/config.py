"""The settings of ``ragsweep-questions`` (conf/questions.yaml), checked before any work starts: the
top-level keys of its own here, everything it shares with ``ragsweep`` (dataset, generator,
evaluator, mlflow, cache_dir, seed) by :func:`ragsweep.pipeline.config.validate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragsweep.corpus.sampling import KINDS, SamplingConfig
from ragsweep.errors import ConfigError
from ragsweep.pipeline.config import check_node, validate

PROMPT_KEYS = ("system", *KINDS, "closed_book")


@dataclass
class PromptsConfig:
    """conf/questions/<name>.yaml: one template per kind, the system message, the closed-book prompt."""

    name: str = "default"
    system: str = ""
    single: str = ""
    multi_hop: str = ""
    comparison: str = ""
    unanswerable: str = ""
    closed_book: str = ""

    def check(self) -> None:
        """Every template there, with the placeholders its text goes into (called by the
        command's config: the empty defaults of this schema are no prompts)."""
        for key in PROMPT_KEYS:
            if key != "system" and not str(getattr(self, key)).strip():
                raise ValueError(f"questions.{key}: the prompt is empty; every kind and closed_book needs one "
                                 "(see conf/questions/default.yaml)")
        needs = {"single": ("{passage}",), "unanswerable": ("{passage}",), "multi_hop": ("{passage_a}", "{passage_b}"),
                 "comparison": ("{passage_a}", "{passage_b}"), "closed_book": ("{question}",)}
        for key, marks in needs.items():
            for mark in marks:
                if mark not in getattr(self, key):
                    raise ValueError(f"questions.{key}: the prompt has no {mark}; where should the text go?")


@dataclass
class FiltersConfig:
    match: float = 0.8
    min_quote_words: int = 4
    entailment: float = 1.0
    duplicate_cosine: float = 0.9
    copy_overlap: float = 0.6
    closed_book: bool = True

    def __post_init__(self) -> None:
        for name in ("match", "duplicate_cosine", "copy_overlap"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"filters.{name} ({v}) must be in (0, 1]")
        if not 0 <= self.entailment <= 1:
            raise ValueError(f"filters.entailment ({self.entailment}) must be in [0, 1] (0: not checked)")
        if self.min_quote_words < 1:
            raise ValueError(f"filters.min_quote_words ({self.min_quote_words}) must be >= 1")


@dataclass
class QuestionsConfig:
    """The keys conf/questions.yaml adds to conf/config.yaml."""

    n: int = 100  # questions wanted (at most this many kept)
    oversample: float = 2.0
    out: Any = None  # str | None
    kinds: dict[str, float] = field(default_factory=lambda: {"single": 1.0})
    per_doc: Any = None  # int | None
    window_chars: int = 1200
    min_chars: int = 200
    min_distance: int = 3000
    parse_retries: int = 2
    max_tokens: int = 384  # completion budget of a draft (the JSON with its quotes)
    filters: FiltersConfig = field(default_factory=FiltersConfig)
    questions: PromptsConfig = field(default_factory=PromptsConfig)

    def __post_init__(self) -> None:
        if not self.oversample >= 1:
            raise ValueError(f"oversample ({self.oversample}) must be >= 1: n x oversample candidates are generated")
        if self.max_tokens < 32:
            raise ValueError(f"max_tokens ({self.max_tokens}) must be >= 32: a draft is a JSON object with quotes")
        if self.parse_retries < 0:
            raise ValueError(f"parse_retries ({self.parse_retries}) must be >= 0")
        if self.per_doc is not None and (isinstance(self.per_doc, bool) or not isinstance(self.per_doc, int)):
            raise ValueError(f"per_doc ({self.per_doc!r}) must be a whole number or null")
        self.sampling(0)  # n, kinds, the window sizes and per_doc: checked where they are used
        self.questions.check()

    @property
    def candidates(self) -> int:
        return max(self.n, int(round(self.n * self.oversample)))

    def sampling(self, seed: int) -> SamplingConfig:
        return SamplingConfig(n=self.candidates, kinds=dict(self.kinds), seed=seed,
                              window_chars=self.window_chars, min_chars=self.min_chars, per_doc=self.per_doc,
                              min_distance=self.min_distance)


OWN_KEYS = tuple(f.name for f in QuestionsConfig.__dataclass_fields__.values())


def check(cfg: DictConfig) -> tuple[QuestionsConfig, dict[str, Any]]:
    """This command's settings and the shared ones (validated); a ConfigError names the field."""
    if cfg.get("generator") is None or cfg.generator.get("name") == "none" or cfg.generator.get("server") is None:
        raise ConfigError("generator: ragsweep-questions needs a model to write questions: generator=llamacpp (the "
                          "embedded model, the default), generator=vllm or generator=external (any OpenAI-compatible "
                          "endpoint), not generator=none")
    own = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
           for k in OWN_KEYS if k in cfg}
    if isinstance(own.get("n"), int) and not isinstance(own.get("n"), bool) and own["n"] < 1:
        raise ConfigError(f"n ({own['n']}): ask for at least one question, e.g. n=100")
    q = check_node("ragsweep-questions", QuestionsConfig, own)
    shared = validate(OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k not in OWN_KEYS]))
    return q, shared


__all__ = ["FiltersConfig", "OWN_KEYS", "PROMPT_KEYS", "PromptsConfig", "QuestionsConfig", "check"]
