"""What the browser tests need: the system Chromium and Playwright (why a test skips when they are
missing), and the experiments/ui_checks/ scripts that drive the MLflow UI, loaded as modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from support import ROOT

CHROMIUM = "/usr/bin/chromium"
#: why a browser test cannot run here (empty: it can)
MISSING = ([] if Path(CHROMIUM).exists() else [f"{CHROMIUM} not installed (apt-get install chromium)"]) + (
    [] if importlib.util.find_spec("playwright") else ["playwright not installed (pip install -e .[dev])"])


def load_script(name: str) -> ModuleType:
    """experiments/ui_checks/<name>.py as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / "ui_checks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    return mod
