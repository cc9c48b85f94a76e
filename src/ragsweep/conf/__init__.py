"""Hydra config tree of ragsweep (also reachable as conf/ at the repository root), and what it holds:
its component groups, read from the folders themselves, so a new group is a new folder."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import OmegaConf

#: the packaged config tree (``conf/`` at the repository root links here)
CONF_DIR = Path(__file__).resolve().parent
#: component groups a run may leave out (``~evaluator``: generate only; ``~reranker``: as reranker=none)
OPTIONAL_GROUPS = ("evaluator", "reranker")


def _is_global(yaml: Path) -> bool:
    """An option merged at the top level (``# @package _global_``, e.g. experiment/) is no component."""
    with open(yaml, encoding="utf-8") as fh:
        return any(line.strip().replace(" ", "") == "#@package_global_" for line, _ in zip(fh, range(5)))


def _nested_groups(conf_dir: Path) -> set[str]:
    """Groups other options pull in under their own key (``- /server@server: llamacpp`` in
    generator/*.yaml): parts of a component, not components of the run."""
    found: set[str] = set()
    for yaml in conf_dir.rglob("*.yaml"):
        found |= set(re.findall(r"^\s*-\s*/(\w+)@", yaml.read_text(encoding="utf-8"), re.M))
    return found


def config_groups(conf_dir: Path = CONF_DIR) -> tuple[str, ...]:
    """The component groups: every folder of ``conf/`` holding option YAMLs, ``_global_`` ones
    (experiment/) and groups only pulled in under another component's key (server/) aside, in
    the order of ``config.yaml``'s defaults, then alphabetically. A new group is a new folder;
    nothing here to edit."""
    nested = _nested_groups(conf_dir) - set(default_groups(conf_dir))
    found = [d.name for d in sorted(conf_dir.iterdir()) if d.is_dir() and not d.name.startswith(("_", "."))
             and d.name not in nested
             and any(True for _ in d.glob("*.yaml")) and not all(_is_global(y) for y in d.glob("*.yaml"))]
    order = default_groups(conf_dir)
    return tuple(sorted(found, key=lambda g: (order.index(g) if g in order else len(order), g)))


def default_groups(conf_dir: Path = CONF_DIR) -> list[str]:
    """The groups ``config.yaml``'s defaults list selects, in its order."""
    defaults = OmegaConf.to_container(OmegaConf.load(conf_dir / "config.yaml").get("defaults") or [])
    return [str(next(iter(e))).lstrip("+~/") for e in defaults if isinstance(e, dict)]


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The option names of a group: its YAML files' stems (``retriever`` -> bm25, dense, tfidf ...)."""
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


COMPONENT_GROUPS = config_groups()
#: a run must choose these: the component groups config.yaml selects by default, optional ones aside
REQUIRED_GROUPS = tuple(g for g in COMPONENT_GROUPS if g in default_groups() and g not in OPTIONAL_GROUPS)


def compose(overrides: list[str] | tuple[str, ...] = ()):
    """The config ``ragsweep OVERRIDES`` would run, from the packaged tree (Hydra's compose API),
    without running it; :class:`ragsweep.errors.ConfigError` for an override Hydra refuses."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ragsweep.errors import ConfigError

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"overrides {' '.join(overrides)}: {exc}") from None
