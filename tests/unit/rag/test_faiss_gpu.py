"""Which faiss GPU wheel runs on which GPU (issue 35, item 1): the compute capabilities each wheel
was compiled for, checked against the GPU's before an index moves there, and a child process's
test search that survives faiss's abort()."""

from __future__ import annotations

import pytest

from support.gpus import A100, FAKE_FAISS_GPU, H100, prepend_path, use_fake_nvml
from ragsweep.rag.retriever import faiss_gpu

B200 = {"name": "NVIDIA B200", "uuid": "GPU-b200-0001", "total_gib": 178.4, "cc": [10, 0]}
RTX_5090 = {"name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-5090-0001", "total_gib": 31.4, "cc": [12, 0]}
L4 = {"name": "NVIDIA L4", "uuid": "GPU-l4-0001", "total_gib": 22.0, "cc": [8, 9]}


@pytest.mark.parametrize("dist, cc, runs", [
    ("faiss-gpu-cu12", (8, 0), True),  # A100: its sm_80 code
    ("faiss-gpu-cu12", (8, 9), True),  # L4 / Ada: sm_80 code runs on 8.x
    ("faiss-gpu-cu12", (7, 5), True),  # T4: sm_70 code runs on 7.x
    ("faiss-gpu-cu12", (9, 0), False),  # H100: no sm_90 code, no PTX
    ("faiss-gpu-cu12", (10, 0), False),  # B200
    ("faiss-gpu", (9, 0), True),  # H100: sm_90 code
    ("faiss-gpu", (10, 0), True),  # B200: PTX for compute_90, compiled by the driver
    ("faiss-gpu", (12, 0), True),  # RTX 50xx: the same PTX
    ("faiss-gpu", (6, 1), False),  # Pascal: older than anything it carries
])
def test_what_each_wheel_runs_on(dist, cc, runs):
    version = {"faiss-gpu": "1.15.1", "faiss-gpu-cu12": "1.14.1"}[dist]
    assert faiss_gpu.build_of({dist: version})[2].runs_on(cc) is runs


def test_an_h100_with_faiss_gpu_cu12_is_refused_before_anything_runs(monkeypatch, tmp_path):
    use_fake_nvml(monkeypatch, tmp_path, A100, H100)
    monkeypatch.setattr(faiss_gpu, "installed", lambda: {"faiss-gpu-cu12": "1.14.1"})
    monkeypatch.setattr(faiss_gpu, "probe", lambda device, **kw: pytest.fail("no child process needed"))
    assert faiss_gpu.capability_mismatch(0) is None  # the A100 runs its sm_80 code
    why = faiss_gpu.unusable(1)
    assert why == ("faiss-gpu-cu12 1.14.1 carries GPU code for sm_70, sm_80, no PTX only, and GPU 1 "
                   "(NVIDIA H100 80GB HBM3) has compute capability 9.0: its first search would abort the process")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # cuda:0 is then the H100
    assert "H100" in faiss_gpu.unusable(0)
    assert faiss_gpu.fix() == ("pip uninstall -y faiss-gpu-cu12 && pip install 'faiss-gpu>=1.15.1,<1.16' "
                               "(docs/gpu.md)")


def test_blackwell_with_faiss_gpu_goes_on_to_the_test_search(monkeypatch, tmp_path):
    use_fake_nvml(monkeypatch, tmp_path, B200)
    monkeypatch.setattr(faiss_gpu, "installed", lambda: {"faiss-gpu": "1.15.1"})
    monkeypatch.setattr(faiss_gpu, "probe", lambda device, **kw: None)
    assert faiss_gpu.unusable(0) is None


def test_the_test_search_reports_an_abort_in_the_child(monkeypatch):
    """Unknown build, unknown GPU (no NVML here): the child's search decides, and its abort() is a
    finding, not the end of this process."""
    prepend_path(monkeypatch, FAKE_FAISS_GPU)
    monkeypatch.setenv("FAKE_FAISS_DEVICE_CC", "9.0")
    faiss_gpu._probed.clear()
    why = faiss_gpu.probe(0)
    assert why.startswith("a test search on GPU 0 in a child process failed (killed by SIGABRT (signal 6)): "
                          "Faiss assertion 'err__ == cudaSuccess' failed"), why
    assert "no kernel image is available" in why
    monkeypatch.setenv("FAKE_FAISS_DEVICE_CC", "8.6")
    faiss_gpu._probed.clear()
    assert faiss_gpu.probe(0) is None
