"""Which of llama.cpp's per-CPU backends a CPU gets: the choice by flags (as llama.cpp scores its
variants), the variant named from the features the loaded backend reports, and a forced variant
that is not built or that the CPU cannot run refused with the fix. The installed build's own
choice on this machine is checked in tests/system/test_cpu_dispatch.py."""

from __future__ import annotations

import json

import pytest

from ragsweep.rag.generator.servers import cpu_backend

AVX2_ONLY = set("fpu sse2 pni ssse3 sse4_1 sse4_2 fma avx f16c avx2 bmi2".split())  # an AMD EPYC (Zen 2/3)
SAPPHIRE_RAPIDS = AVX2_ONLY | set("avx_vnni avx512f avx512dq avx512cd avx512bw avx512vl avx512vbmi avx512_vnni "
                                  "avx512_bf16 amx_tile amx_int8 amx_bf16".split())
ZEN4 = AVX2_ONLY | set("avx512f avx512dq avx512cd avx512bw avx512vl avx512vbmi avx512_vnni avx512_bf16".split())
ALL = list(cpu_backend.VARIANTS)


@pytest.mark.parametrize("flags, want", [
    (AVX2_ONLY, "haswell"),
    (SAPPHIRE_RAPIDS, "sapphirerapids"),
    (ZEN4, "zen4"),
    (AVX2_ONLY | {"avx_vnni"}, "alderlake"),
    (AVX2_ONLY - {"avx2", "bmi2"}, "piledriver"),  # FMA but no AVX2
    (set("fpu sse2 pni ssse3 sse4_1 sse4_2 avx".split()), "sandybridge"),
    ({"fpu", "sse2"}, "x64"),
])
def test_the_best_variant_a_cpu_runs(flags, want):
    assert cpu_backend.best_variant(flags, ALL) == want
    assert cpu_backend.missing(want, flags) == []


def test_avx512_needs_all_five_of_its_flags():
    """llama.cpp's AVX512 variant is compiled with -mavx512f/cd/vl/dq/bw: a CPU with only some
    of them (Xeon Phi: F and CD, no VL/DQ/BW) gets the AVX2 code."""
    phi = AVX2_ONLY | {"avx512f", "avx512cd"}
    assert cpu_backend.best_variant(phi, ALL) == "haswell"
    assert cpu_backend.missing("skylakex", phi) == ["AVX512"]


def test_only_built_variants_are_chosen():
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ["x64", "haswell", "skylakex"]) == "skylakex"
    assert cpu_backend.best_variant(AVX2_ONLY, ["skylakex", "sapphirerapids"]) is None


def test_the_amx_variant_is_chosen_only_from_a_build_that_keeps_its_tile_configuration(tmp_path, monkeypatch):
    """GCC 12 without -fno-dse compiles AMX kernels that die with SIGILL: such a build (or one with
    no record of its flags) gets the next best variant; a build recorded with the flag gets AMX."""
    from ragsweep.rag.generator.servers import llama_build

    old = {"cmake_args": "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"}
    fixed = {"cmake_args": old["cmake_args"] + " -DCMAKE_C_FLAGS=-fno-dse -DCMAKE_CXX_FLAGS=-fno-dse"}
    assert list(cpu_backend.skipped(old)) == ["sapphirerapids"] == list(cpu_backend.skipped({}))
    assert cpu_backend.skipped(fixed) == {}
    record = tmp_path / "llama_build.json"
    monkeypatch.setattr(llama_build, "build_record_path", lambda: record)
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ALL, skip=True) == "zen4"  # no record
    record.write_text(json.dumps(old))
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ALL, skip=True) == "zen4"
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ALL) == "sapphirerapids"  # llama.cpp's own pick
    record.write_text(json.dumps(fixed))
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ALL, skip=True) == "sapphirerapids"
    record.write_text("{not json")
    assert cpu_backend.best_variant(SAPPHIRE_RAPIDS, ALL, skip=True) == "zen4"


def test_variant_named_from_the_loaded_backends_features():
    info = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
            "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
            "OPENMP = 1 | REPACK = 1 |")
    # llama.cpp builds sapphirerapids without AVX_VNNI (the VEX form): a report with it names no variant
    assert cpu_backend.variant_of(cpu_backend.reported_features(info)) is None
    spr = info.replace("AVX_VNNI = 1 | ", "")
    assert cpu_backend.variant_of(cpu_backend.reported_features(spr)) == "sapphirerapids"
    haswell = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | OPENMP = 1 | REPACK = 1 |"
    assert cpu_backend.variant_of(cpu_backend.reported_features(haswell)) == "haswell"
    assert cpu_backend.variant_of(cpu_backend.reported_features("CPU : OPENMP = 1 |")) == "x64"
    for name in ALL:  # every variant's report names it back
        feats = set().union(*[cpu_backend._REPORTED.get(f, {f}) for f in cpu_backend.VARIANTS[name]])
        assert cpu_backend.variant_of(feats | {"OPENMP", "LLAMAFILE"}) == name


@pytest.fixture
def fake_lib(tmp_path, monkeypatch):
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    for v in ("x64", "haswell", "skylakex"):
        (lib / f"libggml-cpu-{v}.so").write_bytes(b"")
    (lib / "libggml-base.so").write_bytes(b"")
    monkeypatch.setattr(cpu_backend, "lib_dir", lambda: lib)
    monkeypatch.setattr(cpu_backend, "_done", False)
    return lib


def test_available_lists_the_built_variants_lowest_first(fake_lib):
    assert cpu_backend.available(fake_lib) == ["x64", "haswell", "skylakex"]
    assert cpu_backend.available(fake_lib.parent / "nowhere") == []


def test_forcing_a_variant_that_is_not_built_names_the_built_ones(fake_lib, monkeypatch):
    monkeypatch.setenv(cpu_backend.ENV, "zen4")
    with pytest.raises(cpu_backend.CpuBackendError, match=r"RAGSWEEP_LLAMA_CPU_VARIANT='zen4'.*x64, haswell, skylakex"):
        cpu_backend.load()


def test_forcing_a_variant_this_cpu_cannot_run_is_refused(fake_lib, monkeypatch):
    monkeypatch.setattr(cpu_backend, "cpu_flags", lambda cpuinfo=None: set(AVX2_ONLY))
    with pytest.raises(cpu_backend.CpuBackendError, match=r"skylakex: this CPU lacks AVX512.*use haswell"):
        cpu_backend.load("skylakex")


def test_forcing_a_variant_without_variant_files_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_backend, "lib_dir", lambda: tmp_path)
    monkeypatch.setattr(cpu_backend, "_done", False)
    with pytest.raises(cpu_backend.CpuBackendError, match="no CPU variant files"):
        cpu_backend.load("haswell")
    assert cpu_backend.load() is None  # nothing to load: the CPU code is linked in


def test_variant_named_in_a_server_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("# python -m ragsweep.rag.generator.servers.cpu_backend llama_cpp.server ...\n"
                   "llama.cpp CPU backend: haswell (AVX2, AVX, SSE42; forced by RAGSWEEP_LLAMA_CPU_VARIANT)\n")
    assert cpu_backend.variant_in_log(log) == "haswell"
    assert cpu_backend.variant_in_log(tmp_path / "missing.log") is None
    assert cpu_backend.variant_in_log(None) is None


def test_cpu_flags_from_cpuinfo():
    text = "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_int8\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_backend.cpu_flags(text) == {"fpu", "avx2", "amx_int8"}


def test_the_forced_variants_program_folder_is_made_once_by_jobs_racing_in_threads(tmp_path, monkeypatch):
    """Several jobs of one process (a Ray worker runs them in threads) ask for the folder from which
    llama-server loads a forced variant at once: each gets the same finished folder, none fails."""
    import threading

    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("libllama.so", "libggml-base.so", "libggml-cpu-haswell.so", "libggml-cpu-zen4.so"):
        (lib / name).write_bytes(b"\x7fELF")
    (lib / "llama-server").write_bytes(b"#!/bin/sh\n")
    (lib / "llama-server").chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu_backend, "lib_dir", lambda: lib)
    monkeypatch.setattr(cpu_backend, "planned_variant", lambda: "haswell")
    monkeypatch.setattr(cpu_backend, "best_variant", lambda flags, available: "zen4")
    got, errors = [], []

    def ask():
        try:
            got.append(cpu_backend.binary_dir())
        except Exception as exc:  # noqa: BLE001 - the failure is what the test reports
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(got)) == 1
    out = got[0]
    assert (out / ".done").read_text() == "haswell\n"
    assert sorted(p.name for p in out.iterdir()) == [".done", "libggml-base.so", "libggml-cpu-haswell.so",
                                                    "libllama.so", "llama-server"]
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # no leftovers
