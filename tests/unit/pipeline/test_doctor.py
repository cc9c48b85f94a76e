"""``ragsweep-doctor`` and the portable llama.cpp build it checks."""

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragsweep.pipeline import doctor

AMX_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 |"
EPYC_FLAGS = "processor\t: 0\nflags\t\t: fpu sse2 pni ssse3 fma avx f16c avx2 bmi2\n"


def test_compiled_features_are_read_from_system_info():
    assert doctor.compiled_features(AMX_BUILD) == {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "AVX512", "AMX_INT8"}
    assert doctor.compiled_features("CPU : AVX = 0 | AVX2 = 1 | OPENMP = 1 |") == {"AVX2"}


def test_a_build_for_another_cpu_is_named_feature_by_feature():
    flags = doctor.cpu_flags(EPYC_FLAGS)
    assert doctor.unsupported(doctor.compiled_features(AMX_BUILD), flags) == ["AMX_INT8", "AVX512"]
    assert doctor.unsupported(doctor.PORTABLE, flags) == []


def test_installed_llama_cpp_is_the_dispatch_build():
    """CI and the README's setup install llama-cpp-python through scripts/build_llama_cpp.py: one
    CPU backend per x86-64 level (AVX2 up to AMX), and the one loaded runs on this CPU (the choice
    itself and the forced AVX2 backend: tests/system/test_cpu_dispatch.py)."""
    from ragsweep.rag.generator.servers.llamacpp import build_record_path
    from ragsweep.rag.generator.servers import cpu_backend

    record = build_record_path()
    assert record.is_file(), f"llama-cpp-python was not installed by scripts/build_llama_cpp.py (no {record})"
    built = json.loads(record.read_text())
    if not built["portable"]:
        pytest.skip(f"this environment opted into a custom llama.cpp build: {built['cmake_args']}")
    assert built.get("cpu_dispatch"), f"an older build without per-CPU variants ({record}): python scripts/build_llama_cpp.py"
    assert {"x64", "haswell", "skylakex", "sapphirerapids"} <= set(cpu_backend.available())
    info, error = doctor.llama_system_info()
    assert info is not None, error
    features = doctor.compiled_features(info)
    assert {"AVX", "AVX2", "FMA", "F16C"} <= features or "avx2" not in doctor.cpu_flags(), info
    assert doctor.unsupported(features, doctor.cpu_flags()) == [], info
    # built with the script's patches (scripts/llama_patches/), unless this environment opted out
    # (RAGSWEEP_LLAMA_PATCHES=0, as scripts/build_llama_cpp.py reads it), and the doctor says which
    opted_out = os.environ.get("RAGSWEEP_LLAMA_PATCHES", "1").strip() in ("0", "off", "no", "false")
    line = doctor.check_llama_build()[0]
    if opted_out:
        assert built.get("patches") == [], f"RAGSWEEP_LLAMA_PATCHES=0 but {record} records patches: rebuild with it set"
        assert line.ok and "unpatched" in line.what, line
    else:
        assert built.get("patches") == ["flash_attn_rows"], f"an unpatched build ({record}): python scripts/build_llama_cpp.py"
        assert line.ok and "patched: flash_attn_rows" in line.what, line


def run_doctor(tmp_path, *args, timeout=120):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAGSWEEP_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "ragsweep.pipeline.doctor", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_doctor_names_the_fix_of_what_fails(tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    proc = run_doctor(tmp_path, "--no-server", "--cache-dir", str(tmp_path / "afile" / "cache"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    bad = [line for line in proc.stdout.splitlines() if line.startswith("✗")]
    assert len(bad) == 1 and "cache directory" in bad[0], proc.stdout
    assert "fix: set cache_dir=" in proc.stdout
    assert "1 check(s) failed" in proc.stdout


@pytest.mark.slow
def test_doctor_passes_on_a_working_install(tmp_path):
    proc = run_doctor(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("✓ llama.cpp build runs on this CPU: CPU backend ") for line in lines), proc.stdout
    # the weight formats: remembered from an earlier measurement, or measured in the background
    # while the doctor goes on (not waited for: the doctor answers in seconds)
    from ragsweep.rag.generator.servers import format_choice
    from ragsweep.rag.generator.servers.llamacpp import SMOLLM2, resolve_model_path

    fmt = [line for line in lines if "SmolLM2-135M" in line and "model_format auto" in line]
    assert len(fmt) == 1, proc.stdout
    if fmt[0].startswith("ℹ"):
        assert "measured in the background once these checks are done" in fmt[0], fmt[0]
        now = [line for line in lines if "weight formats in the background now (pid " in line]
        assert len(now) == 1 and lines.index(now[0]) > lines.index(fmt[0]), proc.stdout  # after the checks
        pid = int(re.search(r"pid (\d+)", now[0]).group(1))
        deadline = time.monotonic() + 600
        while format_choice.running(resolve_model_path(SMOLLM2)) is not None and time.monotonic() < deadline:
            time.sleep(1)
        assert format_choice.remembered(resolve_model_path(SMOLLM2)) is not None, f"pid {pid} left no choice"
    else:
        assert re.match(r"✓ llama.cpp serves SmolLM2-135M(-Instruct.Q4_1.gguf)? as .*the fastest here", fmt[0]), fmt[0]
    assert any(line.startswith("✓ llama.cpp server") and "16-token generation" in line for line in lines), proc.stdout
    assert any(line.startswith("✓ MLflow store sqlite:///mlruns/mlflow.db writable") for line in lines), proc.stdout
    assert any(line.startswith("ℹ model hub not contacted") for line in lines), proc.stdout
    assert not [line for line in lines if line.startswith("✗")]
    assert "all checks passed" in proc.stdout
    # the doctor's test run was deleted: the store holds no live run
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragsweep-doctor")
    assert exp is not None and client.search_runs([exp.experiment_id]) == []


def test_doctor_line_for_the_served_weight_format(tmp_path, monkeypatch):
    """The doctor converts the default model as a run would and says which file serves it; a failed
    conversion is a ✗ with the fix."""
    from ragsweep.rag.generator.servers import gguf_format

    def quantize(cmd, **kw):
        src, dst, fmt = cmd[-3:]
        Path(dst).write_bytes(b"GGUF" + fmt.encode())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    from ragsweep.rag.generator.servers import format_choice

    monkeypatch.delenv("RAGSWEEP_GGUF_DIR", raising=False)
    monkeypatch.setattr(gguf_format.subprocess, "run", quantize)
    monkeypatch.setattr(format_choice, "choose", lambda source, cache_dir=None: "f16")  # this machine measured F16 fastest
    monkeypatch.setattr(format_choice, "remembered", lambda source: None)  # not measured yet
    started = []
    monkeypatch.setattr(format_choice, "start_background", lambda source, cache_dir=None: started.append(cache_dir)
                        or {"pid": 4242, "started": "now", "log": "/x/formats.log"})
    monkeypatch.setattr(format_choice, "running", lambda source: None)
    monkeypatch.setattr(format_choice, "_PENDING", [])
    # the doctor does not wait for the measurement: it leaves it for the background, after its checks
    first = doctor.check_model_format(str(tmp_path / "cache"), measure=True)[0]
    assert first.ok is None and started == [], first.what
    assert "measured in the background once these checks are done" in first.what
    assert "the first run serves the fastest" in first.what
    out = io.StringIO()
    doctor.start_pending(out)
    assert started == [tmp_path / "cache"] and format_choice._PENDING == []
    assert "ℹ measuring SmolLM2-135M-Instruct.Q4_1.gguf's weight formats in the background now (pid 4242, " \
           "log /x/formats.log)" in out.getvalue()
    quiet = doctor.check_model_format(str(tmp_path / "cache"), measure=False)[0]  # --no-server: not even that
    assert quiet.ok is None and "not measured on this machine yet" in quiet.what and format_choice._PENDING == []
    monkeypatch.setattr(format_choice, "remembered", lambda source: {"choice": "f16", "measured_at": "2026-11-26 18:54:22"})
    converted = doctor.check_model_format(str(tmp_path / "cache"))[0]
    assert converted.ok is True and "converted now in " in converted.what and str(tmp_path / "cache" / "gguf") in converted.what
    second = doctor.check_model_format(str(tmp_path / "cache"))[0]
    assert second.ok is True and "cached conversion, llama.cpp's quantize API)" in second.what
    assert "(model_format auto, remembered from 2026-11-26 18:54:22)" in second.what  # not "measured in 0.0s"
    monkeypatch.setattr(format_choice, "choose", lambda source, cache_dir=None: "source")
    packaged = doctor.check_model_format(str(tmp_path / "cache"))[0]
    assert packaged.ok is True and "serves SmolLM2-135M-Instruct.Q4_1.gguf as it is (the fastest here" in packaged.what
    assert packaged.what.endswith("remembered from 2026-11-26 18:54:22))"), packaged.what  # no dangling ", )"
    monkeypatch.setattr(format_choice, "choose", lambda source, cache_dir=None: "f16")
    monkeypatch.setattr(gguf_format.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom"))
    bad = doctor.check_model_format(str(tmp_path / "other"))[0]
    assert bad.ok is False and "converting SmolLM2-135M-Instruct.Q4_1.gguf to f16 failed" in bad.what
    assert "generator.server.model_format=source" in bad.line()


# -- the GPU lines (issue 35, item 2), printed with a fake NVML (an H100), faiss and vLLM ------------
def test_doctor_accepts_a_gpu_faiss_in_place_of_faiss_cpu(monkeypatch):
    """After the GPU steps of docs/gpu.md faiss-cpu is gone and faiss-gpu is there: no ✗ for it."""
    import importlib.metadata as md

    real = md.version

    def version(name):
        if name == "faiss-cpu":
            raise md.PackageNotFoundError(name)
        return "1.15.1" if name == "faiss-gpu" else real(name)

    monkeypatch.setattr(md, "version", version)
    results = doctor.check_python()
    assert not [r for r in results if r.ok is False], [r.line() for r in results]
    assert any(r.ok and r.what == "faiss: faiss-gpu 1.15.1" for r in results)
    both = doctor.check_faiss({"faiss-cpu": "1.15.1", "faiss-gpu": "1.15.1"})[0]
    assert both.ok is False and "installed together" in both.what and "pip uninstall -y faiss-cpu faiss-gpu" in both.fix


@pytest.fixture
def h100(monkeypatch, tmp_path):
    """One H100 as NVML, torch (a CUDA 13 build that sees it) and faiss (a GPU build) report it."""
    import faiss
    import torch

    from support.gpus import FAKE_FAISS_GPU, FAKE_VLLM, H100, prepend_path, use_fake_nvml

    use_fake_nvml(monkeypatch, tmp_path, {**H100, "processes": [{"pid": 999999, "used_gib": 0.5}]})
    prepend_path(monkeypatch, FAKE_FAISS_GPU, FAKE_VLLM)  # the test search and `import vllm` run in children
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch, "__version__", "2.13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1, raising=False)
    from ragsweep.rag.retriever import faiss_gpu

    faiss_gpu._probed.clear()
    return faiss_gpu


def gpu_lines(capsys) -> list[str]:
    out = capsys.readouterr().out
    return [line for line in out.splitlines() if not line.startswith(("✓ Python", "✓ ragsweep "))]


def test_doctor_gpu_lines_on_an_h100_with_the_wrong_faiss_wheel(h100, monkeypatch, capsys):
    monkeypatch.setattr(h100, "installed", lambda: {"faiss-gpu-cu12": "1.14.1"})
    assert doctor.main(["--gpu"]) == 1
    assert gpu_lines(capsys) == [
        "✓ faiss: faiss-gpu-cu12 1.14.1",
        "ℹ NVIDIA driver 580.82.07 (supports CUDA up to 13.0)",
        "ℹ GPU 0: NVIDIA H100 80GB HBM3, 79.6 GiB (79.1 GiB free), compute capability 9.0",
        "✓ torch 2.13.0 built for CUDA 13.0; it sees 1 GPU(s)",
        "✗ faiss (faiss-gpu-cu12 1.14.1) cannot search on GPU 0: faiss-gpu-cu12 1.14.1 carries GPU code for "
        "sm_70, sm_80, no PTX only, and GPU 0 (NVIDIA H100 80GB HBM3) has compute capability 9.0: its first search "
        "would abort the process",
        "    fix: pip uninstall -y faiss-gpu-cu12 && pip install 'faiss-gpu>=1.15.1,<1.16' (docs/gpu.md)",
        "✓ vLLM 0.32.0 imports (ragsweep supports vllm<0.33,>=0.27.1)",
        "",
        "1 check(s) failed",
    ]


def test_doctor_gpu_lines_on_an_h100_with_faiss_gpu(h100, monkeypatch, capsys):
    monkeypatch.setattr(h100, "installed", lambda: {"faiss-gpu": "1.15.1"})
    monkeypatch.setenv("FAKE_FAISS_ARCHS", "7.0,7.5,8.0,8.6,8.9,9.0")  # what the real wheel carries
    assert doctor.main(["--gpu"]) == 0
    lines = gpu_lines(capsys)
    assert "✓ faiss (faiss-gpu 1.15.1) can search on GPU 0 (a test search in a child process)" in lines
    assert lines[-1] == "all checks passed"
