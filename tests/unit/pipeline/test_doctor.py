"""``ragsweep-doctor`` and the portable llama.cpp build it checks."""

import json
import os
import subprocess
import sys
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


def test_installed_llama_cpp_is_the_portable_build():
    """CI and the README's setup install llama-cpp-python through scripts/build_llama_cpp.py:
    compiled for AVX2 and nothing a build machine merely advertises (AVX-512, AMX)."""
    from ragsweep.rag.generator.servers.llamacpp import build_record_path

    record = build_record_path()
    assert record.is_file(), f"llama-cpp-python was not installed by scripts/build_llama_cpp.py (no {record})"
    built = json.loads(record.read_text())
    if not built["portable"]:
        pytest.skip(f"this environment opted into a custom llama.cpp build: {built['cmake_args']}")
    info, error = doctor.llama_system_info()
    assert info is not None, error
    features = doctor.compiled_features(info)
    assert {"AVX", "AVX2", "FMA", "F16C"} <= features, info
    assert features <= doctor.PORTABLE, f"compiled beyond AVX2: {sorted(features - doctor.PORTABLE)} ({info})"


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
    assert any(line.startswith("✓ llama.cpp build runs on this CPU") for line in lines), proc.stdout
    assert any(line.startswith("✓ llama.cpp serves SmolLM2-135M as F16") for line in lines), proc.stdout
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

    monkeypatch.delenv("RAGSWEEP_GGUF_DIR", raising=False)
    monkeypatch.setattr(gguf_format.subprocess, "run", quantize)
    first = doctor.check_model_format(str(tmp_path / "cache"))[0]
    assert first.ok is True and first.what.startswith("llama.cpp serves SmolLM2-135M as F16 (converted now in ")
    assert str(tmp_path / "cache" / "gguf") in first.what
    second = doctor.check_model_format(str(tmp_path / "cache"))[0]
    assert second.ok is True and "(cached conversion, llama.cpp's quantize API)" in second.what
    monkeypatch.setattr(gguf_format.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom"))
    bad = doctor.check_model_format(str(tmp_path / "other"))[0]
    assert bad.ok is False and "converting SmolLM2-135M-Instruct.Q4_1.gguf to f16 failed" in bad.what
    assert "generator.server.model_format=source" in bad.line()
