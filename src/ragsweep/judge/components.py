"""The two component kinds of the evaluator and how they are built: one contract each.

Checkers and extractors are Hydra config groups, ``conf/evaluator/checker/*.yaml`` and
``conf/evaluator/extractor/*.yaml``; each file is a ``_target_`` to a class implementing
:class:`Checker` or :class:`Extractor`. Adding one = one module + one YAML file.

    evaluator=nli evaluator.checker.model=...        # the group's options, as Hydra overrides
    evaluator=offline evaluator/checker=nli          # another member of the group

A spec is an object already built (Hydra builds nested ``_target_`` s), a mapping with a
``_target_``, or the NAME of a YAML file of the group (``"offline"``: the file
``conf/evaluator/checker/offline.yaml`` is loaded and instantiated - the spelling of
``ragsweep-score --checker NAME`` and the meta-evaluation's ``--checker NAME``). A component that
talks to the judge model has a ``judge`` attribute; the evaluator gives it its judge.
"""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from ragsweep.errors import ConfigError
from ragsweep.store.cache import class_key

CONF_DIR = Path(__file__).resolve().parent.parent / "conf" / "evaluator"
#: the component kinds: config group -> the method every member has
GROUPS = {"checker": "check_pairs", "extractor": "extract_many"}


@runtime_checkable
class Checker(Protocol):
    """Labels (claim, reference) pairs: ``"Entailment" | "Neutral" | "Contradiction"`` (the
    values of :class:`ragsweep.judge.labels.Label`) or None for a failed check, one per pair.

    ``cache``: the shared cache for the checker's own inputs (embeddings); ``kind``: the reference
    is retrieved ``"context"`` or an ``"answer"`` - passed only to a checker listing the kind in
    its ``reference_kinds``. Both parameters are optional in an implementation. A checker that
    has probabilities also offers ``score_pairs(pairs, cache=None) -> [P(entailed)]``. Its
    ``cache_id`` (else its class and config) names it in cache keys.
    """

    def check_pairs(self, pairs: Sequence[tuple[str, str]], cache: Any = None, kind: str = "context") -> list[str | None]:
        ...


@runtime_checkable
class Extractor(Protocol):
    """Texts -> claims: ``extract_many(texts, questions) -> [list of claims | None]`` (None: a
    failed extraction). A claim is a string or a ``[subject, predicate, object]`` triplet.
    ``uses_question``: the question is part of the input (and of the cache key)."""

    uses_question: bool

    def extract_many(self, texts: Sequence[str], questions: Sequence[str | None] | None = None) -> list[Any]:
        ...


class EvaluatorConfigError(ConfigError, ValueError):
    """An extractor/checker/annotator spec that cannot be built (e.g. an LLM part without a judge)."""


def component_id(component: Any) -> Any:
    """What names an extractor or checker in cache keys: its ``cache_id``, else its class and
    config."""
    cid = getattr(component, "cache_id", None)
    if cid is not None:
        return cid
    cls = type(component)
    config = getattr(component, "config", None)
    try:
        config = asdict(config) if config is not None else None
    except TypeError:
        config = repr(config)
    return {"class": class_key(cls), "config": config}


def plain(value: Any) -> Any:
    """DictConfig/ListConfig (possibly holding objects Hydra instantiated) -> dict/list."""
    try:
        from omegaconf import DictConfig, ListConfig
    except ImportError:  # pragma: no cover
        return value
    if isinstance(value, DictConfig):
        return {str(k): plain(value[k]) for k in value}
    if isinstance(value, ListConfig):
        return [plain(v) for v in value]
    return value


# -- the config groups --------------------------------------------------------------------------
def names(group: str) -> list[str]:
    """The members of ``evaluator/<group>``: the names of its YAML files."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def group_spec(group: str, name: str, **overrides: Any) -> dict[str, Any]:
    """The YAML ``conf/evaluator/<group>/<name>.yaml`` as a dict, with ``overrides`` applied."""
    from omegaconf import OmegaConf

    path = CONF_DIR / group / f"{name}.yaml"
    if not path.is_file():
        raise EvaluatorConfigError(f"evaluator.{group}: no {group} {name!r}; known: {', '.join(names(group))}")
    spec = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    unknown = sorted(set(overrides) - set(spec))
    if unknown:
        raise EvaluatorConfigError(f"evaluator.{group} {name}: no option {', '.join(unknown)}")
    return {**spec, **overrides}


def _target_class(spec: Mapping[str, Any], prefix: str) -> type:
    from hydra.utils import get_class

    target = spec["_target_"]
    try:
        return get_class(str(target))
    except Exception as exc:  # noqa: BLE001 - hydra raises several kinds
        raise EvaluatorConfigError(f"{prefix}._target_: cannot import {target!r} ({exc})") from None


def _as_spec(group: str, spec: Any) -> Any:
    spec = plain(spec)
    if isinstance(spec, str):
        return group_spec(group, spec)
    if isinstance(spec, Mapping):
        if "_target_" not in spec:
            raise EvaluatorConfigError(
                f"evaluator.{group} needs a _target_ (or a name: {', '.join(names(group))}), got {dict(spec)!r}"
            )
        return dict(spec)
    if spec is None:
        raise EvaluatorConfigError(f"evaluator.{group} is not set (one of {', '.join(names(group))})")
    if not hasattr(spec, GROUPS[group]):
        raise EvaluatorConfigError(f"a {group} needs {GROUPS[group]}(), got {type(spec).__name__}")
    return spec


def needs_judge(group: str, spec: Any) -> bool:
    """Whether the component talks to the judge model (has a ``judge`` it was not given)."""
    spec = _as_spec(group, spec)
    if isinstance(spec, dict):
        cls = _target_class(spec, f"evaluator.{group}")
        return "judge" in inspect.signature(cls).parameters and spec.get("judge") is None
    return hasattr(spec, "judge") and spec.judge is None


def validate(group: str, spec: Any) -> None:
    """Check a spec before any work starts: its class imports, its options fit its ``Config``."""
    spec = _as_spec(group, spec)
    if isinstance(spec, dict):
        from ragsweep.errors import build_config

        schema = getattr(_target_class(spec, f"evaluator.{group}"), "Config", None)
        if schema is not None:
            opts = {k: v for k, v in spec.items() if not str(k).startswith("_") and k != "judge"}
            build_config(schema, opts, f"evaluator.{group}")


class JudgeComponent:
    """What an extractor or checker that asks the judge model shares: ``Config`` built from its
    options (reported under ``config_prefix``), the ``judge`` the evaluator gives it, ``stats``."""

    Config: type
    config_prefix: str

    def __init__(self, judge: Any = None, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, self.config_prefix)
        self.judge = judge
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config}, judge={self.judge!r})"

    def need_judge(self) -> Any:
        """The judge; a RuntimeError where none was given."""
        if self.judge is None:
            raise RuntimeError(f"{type(self).__name__} needs a judge (evaluator.judge)")
        return self.judge


def build(group: str, spec: Any, judge: Any = None) -> Any:
    """The component of ``spec``; one that needs a judge gets ``judge`` (a copy is made of an
    object passed in, so that it keeps no judge that is closed after this evaluation)."""
    spec = _as_spec(group, spec)
    if isinstance(spec, dict):
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        obj = instantiate(OmegaConf.create(spec), _convert_="all")
    else:
        obj = spec
    if hasattr(obj, "judge") and obj.judge is None:
        if judge is None:
            raise EvaluatorConfigError(f"evaluator.{group} {type(obj).__name__} needs a judge: set evaluator.judge")
        obj = copy.copy(obj)
        obj.judge = judge
    return obj


__all__ = [
    "CONF_DIR",
    "Checker",
    "EvaluatorConfigError",
    "Extractor",
    "JudgeComponent",
    "build",
    "component_id",
    "group_spec",
    "names",
    "needs_judge",
    "validate",
]
