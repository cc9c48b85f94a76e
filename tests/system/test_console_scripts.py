"""Every ``[project.scripts]`` entry of pyproject.toml works as installed (issue 51, part 0).

``ragsweep-score`` once pointed at a module that had moved (``ragsweep.pipeline.system.score_cli``)
and no test noticed: the tests imported the module by its new name, the user ran the command. Here
each entry is checked three ways:

- its target resolves (module imported, function found), from pyproject.toml itself, so a bad
  target fails even before anyone reinstalls;
- the installed package declares the same entries (an install older than pyproject.toml is
  reported with the command that refreshes it);
- the installed command runs as a user runs it: ``--help``, then one real, cheap, offline call.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import FIXTURES, ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
REINSTALL = f"pip install -e {ROOT} --no-deps"
GOLDEN = json.loads((FIXTURES / "ragchecker" / "examples_checking_outputs.json").read_text(encoding="utf-8"))


def test_pyproject_declares_the_commands_the_docs_offer():
    assert set(SCRIPTS) == {"ragsweep", "ragsweep-score", "ragsweep-report", "ragsweep-doctor", "ragsweep-label",
                            "ragsweep-questions", "ragsweep-reproduce"}
    assert set(SCRIPTS) == set(REAL_CALLS), "a new console script needs its real call in REAL_CALLS below"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_entry_point_resolves_to_a_function(name):
    module, _, attr = SCRIPTS[name].partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        pytest.fail(f"pyproject.toml [project.scripts] {name} = {SCRIPTS[name]!r}: {exc} (did the module move?)")
    assert callable(getattr(mod, attr, None)), f"{name}: {module} has no function {attr!r}"


def test_the_installed_package_declares_the_same_entry_points():
    try:
        dist = md.distribution("ragsweep")
    except md.PackageNotFoundError:
        pytest.fail(f"ragsweep is not installed: {REINSTALL}")
    installed = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert installed == SCRIPTS, f"the installed ragsweep is older than pyproject.toml: {REINSTALL}"


def command(name: str) -> str:
    """The installed command: beside this Python (its venv's bin/), else on PATH."""
    here = Path(sys.executable).parent
    found = shutil.which(name, path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))
    if not found:
        pytest.fail(f"{name} is not installed (no {name} beside {sys.executable} or on PATH): {REINSTALL}")
    return found


def run(tmp_path, *args, timeout=240):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(list(args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help(tmp_path, name):
    proc = run(tmp_path, command(name), "--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert name in proc.stdout or "Powered by Hydra" in proc.stdout, proc.stdout[:2000]


# one real call per command: (arguments, check(proc, tmp_path)); each offline and a few seconds long

def _score(proc, tmp_path):
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads(proc.stdout)
    for group, values in GOLDEN["metrics"].items():  # RAGChecker's own example numbers
        for metric, expected in values.items():
            assert abs(metrics[group][metric] - expected) <= 0.1 + 1e-9, (group, metric, metrics[group][metric], expected)


def _one_error_line(prog, field):
    def check(proc, tmp_path):
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{prog}: error: ")]
        assert lines and field in lines[0], proc.stderr[-3000:]
    return check


def _doctor(proc, tmp_path):
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert re.search(r"^✓ Python 3\.\d+", proc.stdout, re.M), proc.stdout
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary in ("all checks passed", *(f"{n} check(s) failed" for n in range(1, 50))), proc.stdout
    assert proc.returncode == (0 if summary == "all checks passed" else 1)


def _ragsweep(proc, tmp_path):
    assert proc.returncode != 0 and "retriever" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def _reproduce_plan(proc, tmp_path):
    """The plan of the retriever-side diagnoses: every sweep with the commands that reproduce it."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("ragchecker_topk_retrieval", "ragchecker_chunk_size_retrieval", "ragchecker_overlap_retrieval"):
        assert f"ragsweep -m +experiment={name} dataset.limit=2" in proc.stdout, proc.stdout
        assert f"ragsweep-report --experiment {name}" in proc.stdout, proc.stdout
    assert "3 sweep(s), 18 systems" in proc.stdout


REAL_CALLS = {
    "ragsweep-score": ([str(FIXTURES / "ragchecker" / "examples_checking_outputs.json")], _score),
    # a store with no sweep in it yet: the one-line answer naming the store and the fix
    "ragsweep-report": (["--experiment", "nope", "--tracking-uri", "sqlite:///store/mlflow.db", "--no-log"],
                        _one_error_line("ragsweep-report", "no MLflow store at store/mlflow.db")),
    "ragsweep-label": (["sample", "--experiment", "nope", "--n", "5", "--tracking-uri", "sqlite:///store/mlflow.db"],
                       _one_error_line("ragsweep-label", "no MLflow store at store/mlflow.db")),
    "ragsweep-doctor": (["--gpu"], _doctor),
    "ragsweep-questions": (["dataset=files", "dataset.path=absent_folder"], _one_error_line("ragsweep-questions", "dataset.path")),
    "ragsweep": (["retriever=nonexistent"], _ragsweep),
    "ragsweep-reproduce": (["--dry-run", "--retrieval-only", "--limit", "2"], _reproduce_plan),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_one_real_call(tmp_path, name):
    (tmp_path / "store").mkdir()
    args, check = REAL_CALLS[name]
    proc = run(tmp_path, command(name), *args)
    check(proc, tmp_path)
