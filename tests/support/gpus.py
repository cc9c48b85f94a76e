"""Fake GPUs for the tests of the GPU path: NVML's answers (``tests/fixtures/fake_nvml``) in this
process and in the child processes it starts, and the paths of the fake vLLM and faiss packages."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from support import FIXTURES

FAKE_NVML = FIXTURES / "fake_nvml"
FAKE_VLLM = FIXTURES / "fake_vllm"
FAKE_FAISS_GPU = FIXTURES / "fake_faiss_gpu"
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5e1f0c2a-h100", "total_gib": 79.6, "cc": [9, 0]}
A100 = {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a100-0001", "total_gib": 79.3, "cc": [8, 0]}


def prepend_path(monkeypatch, *folders: Path) -> None:
    """``folders`` first on this process's sys.path and on PYTHONPATH of every child process."""
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*map(str, folders), *([old] if old else [])]))
    for folder in reversed(folders):
        monkeypatch.syspath_prepend(str(folder))


def use_fake_nvml(monkeypatch, tmp_path: Path, *gpus: dict, driver: str = "580.82.07") -> Path:
    """NVML reports ``gpus`` here and in child processes; returns the JSON file (rewrite it to change them)."""
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({"driver": driver, "cuda": 13000, "gpus": list(gpus)}))
    monkeypatch.setenv("FAKE_NVML", str(state))
    spec = importlib.util.spec_from_file_location("pynvml", FAKE_NVML / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    prepend_path(monkeypatch, FAKE_NVML)
    return state
