"""Config validation: every component group is checked against its dataclass schema before any
work starts.

A component's schema is the ``Config`` dataclass of the class its ``_target_`` names, so adding a
component is one module plus one YAML file, with no registry to edit. Unknown fields, values of
the wrong type and values the schema's ``__post_init__`` rejects all become a :class:`ConfigError`
whose message names the field (``chunker.overlap``) and what to do.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from ragsweep.conf import (  # noqa: F401 - re-exported: the config tree's groups, read here
    COMPONENT_GROUPS,
    CONF_DIR,
    OPTIONAL_GROUPS,
    REQUIRED_GROUPS,
    config_groups,
    default_groups,
    group_options,
)
from ragsweep.errors import ConfigError

SECRET_PATTERN = re.compile(r"(api[_-]?key|secret|password|passwd|token|authorization|bearer)(?!_env)", re.I)
REDACTED = "***"


@dataclass
class MlflowConfig:
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    enabled: bool = True


@dataclass
class SummaryConfig:
    """What the end-of-run summary on the terminal shows (every metric is logged to MLflow anyway)."""

    metrics: list[str] = field(default_factory=list)


@dataclass
class EstimateConfig:
    """The stated model of the cost estimate (``estimate.*``, docs/hosted.md)."""

    answer_tokens: int | None = None
    claims_per_answer: float = 4.0
    claims_range: list[float] = field(default_factory=lambda: [1.0, 10.0])

    def __post_init__(self) -> None:
        if self.answer_tokens is not None and self.answer_tokens < 1:
            raise ValueError(f"estimate.answer_tokens must be an integer >= 1 or null, got {self.answer_tokens}")
        low_high = list(self.claims_range)
        if len(low_high) != 2 or not 0 <= low_high[0] <= self.claims_per_answer <= low_high[1]:
            raise ValueError(
                f"estimate.claims_range must be [low, high] with 0 <= low <= estimate.claims_per_answer "
                f"({self.claims_per_answer:g}) <= high, got {low_high}")


def _usd(value: Any, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ValueError(f"{name} must be a number of USD >= 0 or null (no limit), got {value!r}")


@dataclass
class TopConfig:
    """Schema of the top-level keys of ``conf/config.yaml`` (component groups excluded)."""

    experiment_name: str = "default"
    run_name: str | None = None
    cache_dir: str = ".ragsweep_cache"
    seed: int = 0
    max_failure_rate: float = 0.1
    budget_usd: float | None = None
    estimate: EstimateConfig = field(default_factory=EstimateConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    sweep: dict[str, Any] = field(default_factory=dict)
    summary: SummaryConfig = field(default_factory=lambda: SummaryConfig())

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ValueError(f"max_failure_rate must be between 0 and 1, got {self.max_failure_rate}")
        _usd(self.budget_usd, "budget_usd")
        _usd(self.sweep.get("budget_usd"), "sweep.budget_usd")
        if not isinstance(self.sweep.get("dry_run", False), bool):
            raise ValueError(f"sweep.dry_run must be true or false, got {self.sweep.get('dry_run')!r}")


# Groups whose options are plain settings rather than one class: their schema by import path.
GROUP_SCHEMAS = {"generator": "ragsweep.rag.generator.GeneratorConfig"}


def _schema_for(group: str, node: DictConfig) -> type:
    target = node.get("_target_")
    if not target and group in GROUP_SCHEMAS:
        return get_class(GROUP_SCHEMAS[group])
    if not target:
        raise ConfigError(f"{group}: no _target_ given; every {group} option names its class with _target_")
    try:
        cls = get_class(target)
    except Exception as exc:  # noqa: BLE001 - hydra raises several kinds
        raise ConfigError(f"{group}._target_: cannot import '{target}' ({exc})") from None
    schema = getattr(cls, "Config", None)
    if schema is None or not is_dataclass(schema):
        raise ConfigError(f"{group}._target_: {target} has no Config dataclass schema")
    return schema


def check_node(prefix: str, schema: type, data: Any) -> Any:
    """Merge ``data`` into ``schema``; return the schema object or raise ConfigError."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), data)
        return OmegaConf.to_object(merged)
    except ConfigKeyError as exc:
        key = getattr(exc, "full_key", None) or getattr(exc, "key", None) or "?"
        valid = ", ".join(f.name for f in fields(schema))
        raise ConfigError(f"{prefix}.{key}: unknown field; valid fields of {prefix} are: {valid}") from None
    except ValidationError as exc:
        key = getattr(exc, "full_key", None) or "?"
        msg = str(exc).splitlines()[0]
        raise ConfigError(f"{prefix}.{key}: {msg}") from None
    except ValueError as exc:  # a schema's __post_init__
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(prefix) or "." in msg.split(" ")[0] else f"{prefix}: {msg}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{prefix}: {str(exc).splitlines()[0]}") from None


def validate(cfg: DictConfig) -> dict[str, Any]:
    """Check the whole composed config; returns the validated schema objects by group."""
    resolved: dict[str, Any] = {}
    for key in cfg.keys():
        if key == "hydra":
            continue
        try:
            node = cfg[key]
            resolved[key] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{key}: {str(exc).splitlines()[0]}") from None
    out: dict[str, Any] = {}
    missing = [g for g in REQUIRED_GROUPS if g not in resolved]
    if missing:
        raise ConfigError(f"config: missing group(s) {missing}; choose one, e.g. {missing[0]}=<option>")
    top = {k: v for k, v in resolved.items() if k not in COMPONENT_GROUPS}
    out["top"] = check_node("config", TopConfig, top)
    for group in COMPONENT_GROUPS:
        if group not in resolved:
            continue
        node = cfg[group]
        schema = _schema_for(group, node)
        data = {k: v for k, v in resolved[group].items() if k != "_target_"}
        out[group] = check_node(group, schema, data)
        for key, sub in data.items():  # nested components, e.g. generator.server
            if isinstance(sub, dict) and sub.get("_target_"):
                check_kwargs(f"{group}.{key}", sub)
    return out


def check_kwargs(prefix: str, node: dict[str, Any]) -> None:
    """Check a nested ``_target_`` node: its Config schema if it has one, else the signature."""
    try:
        cls = get_class(node["_target_"])
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"{prefix}._target_: cannot import '{node['_target_']}' ({exc})") from None
    data = {k: v for k, v in node.items() if k != "_target_"}
    schema = getattr(cls, "Config", None)
    if schema is not None and is_dataclass(schema):
        check_node(prefix, schema, data)
        return
    names: list[str] = []
    for klass in cls.__mro__:  # **kwargs passed on to a base class: accept the base's names too
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        names += [n for n, p in params.items() if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and n not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            break
    else:
        return  # open-ended signature: nothing to check against
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown field; valid fields of {prefix} are: {', '.join(names)}")


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts/lists into ``a.b.c`` keys, redacting secret-looking keys."""
    items: dict[str, Any] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if SECRET_PATTERN.search(str(k)) and v not in (None, ""):
                items[key] = REDACTED
            else:
                items.update(flatten(v, key))
    elif isinstance(data, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in data):
            items[prefix] = ",".join(map(str, data))
        else:
            for i, v in enumerate(data):
                items.update(flatten(v, f"{prefix}.{i}"))
    else:
        items[prefix] = data
    return items


def server_spec(node: Any) -> str:
    """Identity of a model server's config (a sweep's shared server is reused when it matches)."""
    from ragsweep.store.cache import content_hash

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return content_hash("server", dict(plain))
