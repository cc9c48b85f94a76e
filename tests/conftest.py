from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAGSWEEP_MLFLOW_TRACES", "sync")  # traces written in the run: no background sender outlives a test

CONF_DIR = str(Path(__file__).resolve().parents[1] / "src" / "ragsweep" / "conf")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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
