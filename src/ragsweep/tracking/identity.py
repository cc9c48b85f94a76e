"""How a run is named and identified: the run name, the short params, the system key.

No MLflow here: the pipeline names a run before any store is opened, and the report identifies a
run it read back with the same rules.

- ``system_name(cfg)``: a short run name that says what the system is (``bm25-k4-c300o0.2-long_cot-smollm2``);
- ``short_params(cfg)``: short, pivotable names for the knobs users sweep, one per component group
  (the chosen option's name, e.g. ``retriever=bm25``) plus a few numeric knobs (``top_k`` ...);
- ``system_key(resolved)``: the identity of one system, its resolved config without run
  bookkeeping, logged as the run's tag ``ragsweep.system_key``; ``run_system_key(run)`` reads it
  back (or, for a run logged without the tag, derives it from the run's logged params).
"""

from __future__ import annotations

import re

from typing import Any, Mapping, Sequence

from omegaconf import DictConfig

from ragsweep.store.cache import content_hash
from ragsweep.conf import COMPONENT_GROUPS

#: numeric knobs logged under a short name: short name -> (group, field)
SHORT_KNOBS = {
    "limit": ("dataset", "limit"),
    "top_k": ("retriever", "top_k"),
    "chunk_size": ("chunker", "size"),
    "chunk_overlap": ("chunker", "overlap"),
}
#: groups whose chosen option the run name and short params do not repeat (none: the chunker's
#: strategy is a short param, ``chunker=recursive``, beside its size and overlap)
UNNAMED_GROUPS: tuple[str, ...] = ()


def _short_params_order() -> tuple[str, ...]:
    out: list[str] = []
    for group in COMPONENT_GROUPS:
        if group not in UNNAMED_GROUPS:
            out.append(group)
        out += [k for k, (g, _) in SHORT_KNOBS.items() if g == group]
    return tuple(out)


#: the short params every run logs, in the order of the config groups
SHORT_PARAMS = _short_params_order()

#: resolved-config keys that are run bookkeeping, not the system
BOOKKEEPING_KEYS = ("hydra", "run_name", "mlflow", "cache_dir", "budget_usd", "estimate")
#: keys of the ``sweep`` node that say how much a command may spend, not what a system is
SPENDING_SWEEP_KEYS = ("dry_run", "budget_usd")
#: logged params that may differ between two runs of the same system
VOLATILE_PARAM_PREFIXES = ("run_name", "mlflow.", "cache_dir", "hydra.", "sweep.")
SYSTEM_KEY_TAG = "ragsweep.system_key"
SYSTEM_TAG = "ragsweep.system"
ROLE_TAG = "ragsweep.role"
PARENT_TAG = "mlflow.parentRunId"
SIGNATURE_TAG = "ragsweep.sweep_signature"


def component_name(node: Any) -> str | None:
    """A component's short name: its ``name`` field, else its class's ``name`` attribute."""
    if node is None or not hasattr(node, "get"):
        return None
    if node.get("name"):
        return str(node.get("name"))
    target = node.get("_target_")
    if target:
        from hydra.utils import get_class

        return getattr(get_class(target), "name", None)
    return None


def chunk_label(c: Any) -> str:
    """The chunker in a run name: ``c300o0.2`` for token windows, ``recursive300o0.2`` for the
    other strategies (:mod:`ragsweep.corpus.chunking`)."""
    name = component_name(c)
    return f"{'c' if name in (None, 'tokens') else name}{c.size}o{c.overlap}"


def system_name(cfg: DictConfig) -> str:
    """A short run name that says what the system is: ``bm25-k4-c300o0.2-long_cot-smollm2``."""
    r, c = cfg.retriever, cfg.chunker
    rr = component_name(cfg.reranker) if cfg.get("reranker") is not None else None
    rerank = f"+{rr}" if rr and rr != "none" else ""
    return f"{component_name(r)}{rerank}-k{r.top_k}-{chunk_label(c)}-{component_name(cfg.prompt)}-{component_name(cfg.generator)}"


def short_params(cfg: DictConfig) -> dict[str, Any]:
    """Short, pivotable names for the knobs users sweep (see :data:`SHORT_PARAMS`)."""
    out: dict[str, Any] = {}
    for name in SHORT_PARAMS:
        if name in SHORT_KNOBS:
            group, key = SHORT_KNOBS[name]
            out[name] = cfg[group].get(key) if group in cfg else None
        else:
            out[name] = component_name(cfg[name]) if name in cfg else None
    return out


def system_key(resolved: Mapping[str, Any]) -> str:
    """Identity of one system: its resolved config without run bookkeeping."""
    ident = _without_cache_dirs({k: v for k, v in resolved.items() if k not in BOOKKEEPING_KEYS})
    sweep = ident.get("sweep")
    if isinstance(sweep, Mapping):  # a budget or a dry run does not change the system (nor its key)
        sweep = {k: v for k, v in sweep.items() if k not in SPENDING_SWEEP_KEYS}
        ident = {k: v for k, v in ident.items() if k != "sweep"} | ({"sweep": sweep} if sweep else {})
    judge = (ident.get("evaluator") or {}).get("judge") if isinstance(ident.get("evaluator"), Mapping) else None
    if isinstance(judge, Mapping) and "price_per_1k_tokens" in judge:  # nor what the judge's tokens cost
        judge = {k: v for k, v in judge.items() if k != "price_per_1k_tokens"}
        ident = {**ident, "evaluator": {**ident["evaluator"], "judge": judge}}
    return content_hash("system", ident)


def _without_cache_dirs(node: Any) -> Any:
    """``node`` without any ``cache_dir`` key at any depth (a server's weight-conversion cache, say):
    where work is cached never changes what a system is."""
    if isinstance(node, Mapping):
        return {k: _without_cache_dirs(v) for k, v in node.items() if k != "cache_dir"}
    if isinstance(node, list):
        return [_without_cache_dirs(v) for v in node]
    return node


def system_param(key: str) -> bool:
    """Whether a logged param says what the system is: not run bookkeeping
    (:data:`VOLATILE_PARAM_PREFIXES`) and not where work is cached (``*.cache_dir``)."""
    return not key.startswith(VOLATILE_PARAM_PREFIXES) and not key.endswith(".cache_dir")


def differing_params(runs: Sequence[Any]) -> list[str]:
    """The logged params beyond the short ones whose value differs between MLflow ``runs``,
    bookkeeping aside (:func:`system_param`), sorted."""
    keys = sorted({k for r in runs for k in r.data.params})
    return [k for k in keys if k not in SHORT_PARAMS and system_param(k)
            and len({r.data.params.get(k) for r in runs}) > 1]


def params_key(params: Mapping[str, Any], run_name: str | None = None) -> str:
    """A system key from a run's logged params (volatile ones aside), for runs logged without the tag."""
    items = sorted((k, str(v)) for k, v in params.items() if system_param(k))
    return content_hash("system-params", items or [("run_name", run_name)])


def run_system_key(tags: Mapping[str, str], params: Mapping[str, Any], run_name: str | None = None) -> str:
    """The system a logged run ran: its ``ragsweep.system_key`` tag, else derived from its params."""
    return tags.get(SYSTEM_KEY_TAG) or params_key(params, run_name)


#: the tag that marks a retrieval-only run (``generator=none``: nothing generated, no server)
MODE_TAG = "ragsweep.mode"
MODE = "retrieval_only"


def retrieval_only_tags() -> dict[str, str]:
    return {MODE_TAG: MODE}


def is_retrieval_only(run: Any) -> bool:
    """Whether an MLflow run was retrieval-only (its ``ragsweep.mode`` tag)."""
    return run.data.tags.get(MODE_TAG) == MODE


_BAD_CHARS = re.compile(r"[^0-9A-Za-z_\-. /:]")


def metric_name(name: str) -> str:
    """A metric's name as MLflow takes it: letters, digits, ``_ - . space / :``; ``recall@4`` becomes ``recall_at_4``."""
    return _BAD_CHARS.sub("_", name.replace("@", "_at_"))
