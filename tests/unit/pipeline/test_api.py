"""The Python API's config side (issue 38): overrides as a Python user writes them, the same
config the command composes, the errors a notebook user sees, and a face that imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ragsweep
from ragsweep.errors import ConfigError, RagsweepError
from ragsweep.pipeline import api
from support import SRC


def test_overrides_as_a_string_a_list_or_a_mapping():
    assert api.as_overrides("retriever=bm25  retriever.top_k=4") == ["retriever=bm25", "retriever.top_k=4"]
    assert api.as_overrides(["+experiment=ci_check"]) == ["+experiment=ci_check"]
    assert api.as_overrides({"retriever": ["bm25", "tfidf"], "retriever.top_k": 4, "run_name": None,
                             "mlflow.enabled": False}) == [
        "retriever=bm25,tfidf", "retriever.top_k=4", "run_name=null", "mlflow.enabled=false"]
    assert api.as_overrides(None) == []
    with pytest.raises(ConfigError, match="'top_k' is not a Hydra override; write key=value"):
        api.as_overrides(["top_k"])


def test_compose_is_the_commands_config_and_refuses_a_sweep():
    cfg = api.compose({"retriever": "tfidf", "retriever.top_k": 3, "generator": "none"})
    assert cfg.retriever._target_.endswith("TfidfRetriever") and cfg.retriever.top_k == 3 and cfg.experiment_name == "default"
    with pytest.raises(ConfigError, match="sweeps several values: ragsweep.run runs one system; use ragsweep.sweep"):
        api.compose("retriever=bm25,tfidf")
    with pytest.raises(ConfigError, match="retriever=nope"):
        api.compose("retriever=nope")


def test_run_stops_on_a_bad_config_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RagsweepError, match="top_k"):
        ragsweep.run("generator=none retriever.top_k=0", progress=False)
    assert not (tmp_path / "mlruns").exists()  # nothing logged, nothing half-written


def test_import_ragsweep_loads_nothing_heavy_and_the_function_wins_over_the_old_module_path():
    code = ("import sys, ragsweep; heavy = [m for m in ('mlflow', 'pandas', 'hydra', 'torch', 'omegaconf') if m in sys.modules];"
            "print(heavy); from ragsweep import sweep; import ragsweep.pipeline.api as a;"
            "print(sweep is a.sweep, ragsweep.run is a.run, 'ragsweep.sweep' in ragsweep.MOVED)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True True False"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ragsweep.nope  # noqa: B018
    assert {"run", "sweep", "results", "compare", "mlflow_scorers"} <= set(dir(ragsweep))


def test_a_sweep_that_fails_raises_with_the_commands_message(tmp_path):
    with pytest.raises(RagsweepError, match=r"(?s)ragsweep -m retriever=bm25,nope.*failed \(exit"):
        ragsweep.sweep("retriever=bm25,nope generator=none", cwd=tmp_path, echo=False, timeout=300)
