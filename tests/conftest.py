from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAGSWEEP_MLFLOW_TRACES", "sync")  # traces written in the run: no background sender outlives a test
# the llama.cpp model's F16 conversion (keyed by the source's sha256 + format), made once for every
# test's cache directory instead of once per test
os.environ.setdefault("RAGSWEEP_GGUF_DIR", str(Path(tempfile.gettempdir()) / f"ragsweep-tests-gguf-{os.getuid()}"))
# model_format auto's measured choice (per machine and llama.cpp build), made once for the test runs
os.environ.setdefault("RAGSWEEP_FORMAT_CHOICE_DIR", str(Path(tempfile.gettempdir()) / f"ragsweep-tests-formats-{os.getuid()}"))

# pytest puts this folder (tests/) on sys.path when it loads this file, so every test file, in any
# subfolder, imports the shared paths and helpers from tests/support/ and the fake servers from here
from support import CONF, FIXTURES, ROOT  # noqa: E402

CONF_DIR = str(CONF)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """tests/fixtures: the small data files the tests ship."""
    return FIXTURES


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def compose_cfg():
    """Compose the app's config with overrides, as the CLI would (no run)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    def _compose(*overrides: str):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session")
def ci_check_sweep(tmp_path_factory):
    """``ragsweep -q -m +experiment=ci_check`` run once for the session (2 systems x 4 questions,
    the real llama.cpp server and offline judge), in its own store, cache and sweep directory.

    The expected-results test checks its numbers and the MLflow UI test browses it: one real sweep
    serves both, so the suite pays for it once."""
    import subprocess
    import sys
    from types import SimpleNamespace

    root = tmp_path_factory.mktemp("ci_check")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    env = {**os.environ, "RAGSWEEP_CACHE_DIR": str(root / "cache"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_MLFLOW_TRACES": "sync", "RAGSWEEP_STATE_DIR": str(root / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ragsweep.pipeline.cli", "-q", "-m", "+experiment=ci_check", f"mlflow.tracking_uri={uri}",
         f"mlflow.artifact_location={root / 'art'}", f"hydra.sweep.dir={root / 'multirun'}"],
        cwd=root, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return SimpleNamespace(root=root, uri=uri, env=env, experiment="ci_check", systems=2, questions=4)
