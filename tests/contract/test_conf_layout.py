"""The shipped config groups are reachable from the repository root (``conf/``) and from a wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from support import ROOT
PKG_CONF = ROOT / "src" / "ragsweep" / "conf"


def _shipped() -> list[str]:
    """Paths of the shipped YAMLs relative to the config root: config.yaml and every group's."""
    return sorted(p.relative_to(PKG_CONF).as_posix() for p in PKG_CONF.rglob("*.yaml"))


def test_groups_exist():
    groups = [p.name for p in PKG_CONF.iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert {"dataset", "chunker", "retriever", "prompt", "generator", "evaluator", "experiment"} <= set(groups)


def test_conf_at_repo_root_resolves():
    conf = ROOT / "conf"
    assert conf.is_dir(), "conf/ must be a browsable directory (a symlink that resolves)"
    assert conf.resolve() == PKG_CONF.resolve()
    assert (conf / "config.yaml").is_file()
    for rel in _shipped():
        assert (conf / rel).is_file(), rel


@pytest.mark.slow
def test_wheel_ships_every_config(tmp_path):
    """A wheel built from a copy of the tree carries config.yaml and every group's YAMLs."""
    src = tmp_path / "src_copy"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "mlruns", "outputs", "multirun", ".ragsweep_cache", "__pycache__", "reports"))
    out = tmp_path / "whl"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = out.glob("ragsweep-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    missing = [rel for rel in _shipped() if f"ragsweep/conf/{rel}" not in names]
    assert not missing, missing
    assert "ragsweep/conf/config.yaml" in names


def test_groups_and_options_come_from_the_folders(tmp_path):
    """A new group or option is a new folder or YAML: config.py reads them, no list to edit."""
    from ragsweep.pipeline.config import COMPONENT_GROUPS, REQUIRED_GROUPS, config_groups, group_options

    assert COMPONENT_GROUPS == ("dataset", "chunker", "retriever", "reranker", "prompt", "generator", "evaluator")
    assert "evaluator" not in REQUIRED_GROUPS and "retriever" in REQUIRED_GROUPS
    assert {"bm25", "dense", "tfidf"} <= set(group_options("retriever"))

    conf = tmp_path / "conf"
    shutil.copytree(PKG_CONF, conf)
    (conf / "retriever" / "hybrid.yaml").write_text("_target_: x.Hybrid\ntop_k: 4\n")
    (conf / "reranker" / "cross.yaml").write_text("_target_: x.Cross\n")
    assert "hybrid" in group_options("retriever", conf)
    groups = config_groups(conf)
    assert groups[:7] == COMPONENT_GROUPS and "reranker" in groups and "experiment" not in groups
    assert "cross" in group_options("reranker", conf)
