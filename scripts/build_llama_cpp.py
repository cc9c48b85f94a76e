"""Build and install llama-cpp-python for any x86-64 CPU, fast on each, never reusing a foreign wheel.

pip keys its wheel cache by package version only, so a wheel compiled with llama.cpp's default
``GGML_NATIVE=ON`` on one machine (AVX-512, AMX ...) is silently installed on the next machine,
where it dies with SIGILL/SIGSEGV. This script therefore:

* builds with explicit CMake flags (``DISPATCH_CMAKE_ARGS``): llama.cpp's CPU backend once per
  x86-64 level it offers (``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``: x64, SSE4.2, AVX,
  AVX2 "haswell", AVX-512 "skylakex"/"icelake"/"zen4"..., AMX "sapphirerapids"), each a
  ``libggml-cpu-<variant>.so`` beside ``libllama.so``; at run time the best one this CPU executes
  is loaded (``ragsweep.rag.generator.servers.cpu_backend``), so one wheel runs on any x86-64 CPU
  and uses AVX-512/AMX where they exist. llama.cpp's own ``llama-server`` (continuous batching)
  is built from the same source into the same folder. ``RAGSWEEP_LLAMA_CMAKE_ARGS`` replaces
  these flags (a native or CUDA/Metal build);
* compiles only what ragsweep runs (``TRIMS``, edits of llama.cpp's CMake files): the CPU variants
  of ``CPU_VARIANTS`` (llama.cpp offers 14; the ones left out run within 5% of the next lower one,
  experiments/results/cpu_speed.md), and of llama.cpp's tools only llama-server and the libraries it
  links (no llama-cli, llama-bench, quantize, mtmd CLIs ...);
* patches llama.cpp's CPU flash attention for decoding (``PATCHES``): ``llama_patches/
  flash_attn_rows.cpp`` inserted into ``ggml-cpu/ops.cpp`` (``RAGSWEEP_LLAMA_PATCHES=0`` builds
  that code as published, for comparisons);
* checks the source is the one the edits were written for: the sdist's sha256 (``SDIST_SHA256``)
  and, for a version not pinned there, a fingerprint of each function the patch replaces or calls
  into (``FINGERPRINTS``), so a version bump whose anchors still match but whose code changed
  stops the build instead of compiling a patch whose assumptions no longer hold;
* uses ccache when it is on PATH (a rebuild after a change of flags recompiles only what changed);
* always builds with ``--no-cache-dir`` (pip's cache never supplies the wheel);
* keeps the wheel it built under a directory named by a hash of (version, flags, patches, compiler,
  platform), so a later setup reuses it only when every one of those is the same;
* records what it installed in ``<venv>/share/ragsweep/llama_build.json`` for ``ragsweep-doctor``.

Standard library only: it runs before ragsweep is installed. Usage:

    python scripts/build_llama_cpp.py               # every CPU variant, the default
    python scripts/build_llama_cpp.py --wheel-only  # build (or find) the wheel, print its path
    RAGSWEEP_LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON" python scripts/build_llama_cpp.py   # this CPU only
    RAGSWEEP_LLAMA_CMAKE_ARGS="-DGGML_CUDA=on" python scripts/build_llama_cpp.py      # NVIDIA GPU
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Every flag a build machine could otherwise turn on by itself is set explicitly. The CPU
# backends are loadable modules, one per x86-64 level; they, llama-server and the libraries they
# link are installed into llama_cpp/lib (RPATH $ORIGIN), where the loader and llama-server look.
# No web UI (it would be downloaded), no HTTPS (loopback only); libmtmd (which llama-server links)
# comes from llama.cpp's tools (LLAVA_BUILD=OFF: llama-cpp-python would add the same folder a second
# time).
# -fno-dse: GCC 12's _tile_loadconfig (amxtileintrin.h) tells the compiler it reads 8 bytes of the
# 64-byte tile configuration, so GCC drops the stores that fill the rest and the AMX kernels of the
# sapphirerapids variant die with SIGILL on their first tile instruction (ggml-org/llama.cpp#26954
# fixes it in the source instead). Without dead-store elimination the stores stay; other code
# loses nothing measurable (experiments/results/cpu_speed.md). cpu_backend trusts that variant only
# in a build recorded with this flag.
DISPATCH_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON "
    "-DCMAKE_C_FLAGS=-fno-dse -DCMAKE_CXX_FLAGS=-fno-dse "
    "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DCMAKE_INSTALL_LIBDIR=llama_cpp/lib "
    "-DCMAKE_INSTALL_RPATH=$ORIGIN "
    "-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_TOOLS_INSTALL=ON "
    "-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAVA_BUILD=OFF"
)

# Decoding over a long context spends most of its attention time in llama.cpp's reference loop
# (ggml_compute_forward_flash_attn_ext_f16_one_chunk): per KV position and query head one
# dot-product call, one expf and an FP16 round trip of the accumulator. llama_patches/
# flash_attn_rows.cpp does the same sums for all the heads of a token at once, a block of positions
# at a time, with one vectorized exp and FP32 accumulators, on x86 CPUs with F16C and AVX2/AVX-512
# (other CPUs keep the reference loop). Each edit: (anchor that must occur once, its replacement,
# a file of llama_patches/ inserted before that replacement or None).
PATCH_DIR = Path(__file__).resolve().parent / "llama_patches"
OPS = "ggml/src/ggml-cpu/ops.cpp"
_ONE_CHUNK = "static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(\n"
_ROWS = "    int ith = params->ith;\n\n    for (int ir = ir0; ir < ir1; ++ir) {\n        // q indices\n"
_SPLIT = """            for (int64_t q_head = 0; q_head < neq2; q_head++) {
                ggml_compute_forward_flash_attn_ext_f16_one_chunk(
                    params, dst, q_head, q_head + 1, ic_start, ic_end,
                    chunk_partials, partial_stride);
            }"""
PATCHES = {
    "flash_attn_rows": [
        (_ONE_CHUNK, _ONE_CHUNK, "flash_attn_rows.cpp"),
        (_ROWS, """#ifdef RAGSWEEP_FA_VEC
    if (!params->use_ref && ggml_fa_vec_supported(q, k, v)) {
        ggml_fa_vec_rows(dst, ir0, ir1, ic_start, ic_end, partials, partial_stride);
        return;
    }
#endif
""" + _ROWS, None),
        # all heads in one call (row = head, its partials at row*partial_stride as before), so the
        # rows of one decoded token are computed together
        (_SPLIT, """            ggml_compute_forward_flash_attn_ext_f16_one_chunk(
                params, dst, 0, (int) neq2, ic_start, ic_end,
                chunk_partials, partial_stride);""", None),
    ],
}


#: the sdist of each llama-cpp-python version these edits were checked against (sha256 of the file
#: pip downloads): its vendored llama.cpp carries no commit id, so the archive's hash pins the source
#: byte for byte. 0.3.36 vendors llama.cpp as published on PyPI on the day the patch was written.
SDIST_SHA256 = {
    "0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
}
#: the functions of ops.cpp the patch replaces, writes the partial results of, or is called from,
#: each as sha256(its text)[:16] before any edit. For a version not in ``SDIST_SHA256`` (a bump of
#: the pin in pyproject.toml) every one must still match: an anchor can survive a change of meaning
#: (another layout of the partials, another use of the mask), a fingerprint cannot.
FINGERPRINTS = {
    "ggml_compute_forward_flash_attn_ext_f16_one_chunk": "568f1303154898e1",
    "ggml_flash_attn_ext_reduce_partials": "289a2e3336cedd42",
    "ggml_compute_forward_flash_attn_ext_f16": "21df6879ef2112c0",
}

#: the CPU variants built, of the 14 llama.cpp offers on x86-64 (GGML_CPU_ALL_VARIANTS); llama.cpp
#: loads the best one a CPU runs. Each left out runs within 5% of the next one down on a CPU of its
#: kind (forced on an AMD EPYC Zen 4, which runs all but alderlake and sapphirerapids;
#: experiments/results/cpu_speed.md, "Which CPU variants are built").
CPU_VARIANTS = ("x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex", "cascadelake",
                "icelake", "zen4", "alderlake", "sapphirerapids")
_TOOLS = """    add_subdirectory(batched-bench)
    add_subdirectory(gguf-split)
    add_subdirectory(imatrix)
    add_subdirectory(llama-bench)
    add_subdirectory(completion)
    add_subdirectory(perplexity)
    add_subdirectory(quantize)
    if (LLAMA_BUILD_SERVER)
        add_subdirectory(ui)
        add_subdirectory(cli)
        add_subdirectory(server)
    endif()
    add_subdirectory(tokenize)
    add_subdirectory(tts)
    add_subdirectory(mtmd)
    if (GGML_RPC)
        add_subdirectory(rpc)
    endif()
    if (NOT GGML_BACKEND_DL AND GGML_CPU)
        # these tools use backends directly (no dynamic loading) and depend on CPU backend symbols
        add_subdirectory(cvector-generator)
        add_subdirectory(export-lora)
    endif()
    add_subdirectory(fit-params)
    if (GGML_METAL)
        add_subdirectory(tuning)
    endif()
    add_subdirectory(results)
"""
_VARIANT_FN = "function(ggml_add_cpu_backend_variant tag_name)\n"
_VERSION_PROPS = """    VERSION ${LLAMA_VERSION_BASE}
    SOVERSION ${LLAMA_VERSION_MAJOR}
    MACHO_CURRENT_VERSION 0 # keep macOS linker from seeing oversized version number
)
"""


def _unity(target: str, batched: str, what: str) -> str:
    """CMake that compiles the sources of ``target`` whose path matches the regex ``batched`` 16 to
    a translation unit (CMake's unity build, as llama.cpp does for its own model files), every other
    source alone."""
    return (f"# ragsweep (scripts/build_llama_cpp.py, TRIMS): {what} compiled 16 to a unit, the rest alone\n"
            f"set_target_properties({target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)\n"
            f"get_target_property(_ragsweep_alone {target} SOURCES)\n"
            f"list(FILTER _ragsweep_alone EXCLUDE REGEX \"{batched}\")\n"
            f"set_source_files_properties(${{_ragsweep_alone}} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)\n")


#: edits of llama.cpp's CMake files that leave out what ragsweep never runs, applied to every build
#: from the sdist (patched or not): (file, anchor that must occur once, its replacement)
TRIMS = {
    "cpu_variants": [
        ("ggml/src/CMakeLists.txt", _VARIANT_FN, _VARIANT_FN + (
            "    # ragsweep (scripts/build_llama_cpp.py, CPU_VARIANTS): these x86-64 variants only\n"
            "    if (GGML_SYSTEM_ARCH STREQUAL \"x86\" AND NOT tag_name IN_LIST RAGSWEEP_CPU_VARIANTS)\n"
            "        return()\n"
            "    endif()\n")),
        ("ggml/src/CMakeLists.txt", "if (GGML_CPU_ALL_VARIANTS)\n",
         f"if (NOT DEFINED RAGSWEEP_CPU_VARIANTS)\n    set(RAGSWEEP_CPU_VARIANTS {' '.join(CPU_VARIANTS)})\n"
         "endif()\nif (GGML_CPU_ALL_VARIANTS)\n"),
    ],
    # the chat parsers (one small file per model family, 16 of them) and the vision/audio encoders of
    # libmtmd (one per model, 37): small files whose time goes into parsing the same headers; in
    # batches, as llama.cpp compiles its own model files. Their other sources stay apart (llama.cpp's
    # json.cpp and mtmd-helper.cpp do not compile inside a batch).
    "unity_batches": [
        ("common/CMakeLists.txt", "set_target_properties(${TARGET} PROPERTIES\n" + _VERSION_PROPS,
         "set_target_properties(${TARGET} PROPERTIES\n" + _VERSION_PROPS
         + _unity("${TARGET}", "/parsers/[^/]*$", "the chat parsers")),
        ("tools/mtmd/CMakeLists.txt", "set_target_properties(mtmd PROPERTIES\n" + _VERSION_PROPS,
         "set_target_properties(mtmd PROPERTIES\n" + _VERSION_PROPS
         + _unity("mtmd", "^models/", "the models' encoders")),
    ],
    # llama.cpp's common library, llama-server and libmtmd are not where the time of a run goes (that
    # is libllama and the CPU backends, left at the release build's -O3): compiled at -O1 they take
    # about half the compiler's time (experiments/results/cpu_speed.md, "Building the per-CPU wheel").
    # add_compile_options applies to the folders added after it: vendor (cpp-httplib, the image and
    # audio decoders of libmtmd), common, tools (server, ui, mtmd); src (libllama) and ggml come before
    "cold_code_O1": [
        ("CMakeLists.txt", "add_subdirectory(vendor)\n",
         "# ragsweep (scripts/build_llama_cpp.py, TRIMS): the code a run does not spend its time in, at -O1\n"
         "add_compile_options(-O1)\nadd_subdirectory(vendor)\n"),
    ],
    "server_only": [
        # llama-server, the web UI stub and libmtmd it links; no other tool, no mtmd command-line
        # programs (gated on LLAMA_BUILD_TOOLS, turned off for that folder alone)
        ("tools/CMakeLists.txt", _TOOLS, """    # ragsweep (scripts/build_llama_cpp.py, TRIMS): llama-server and what it links, nothing else
    if (LLAMA_BUILD_SERVER)
        add_subdirectory(ui)
        add_subdirectory(server)
    endif()
    set(LLAMA_BUILD_TOOLS OFF)
    add_compile_options(-O0)  # libmtmd only: linked, never run (no --mmproj), so compiled as fast as it can be
    add_subdirectory(mtmd)
    unset(LLAMA_BUILD_TOOLS)
"""),
    ],
}


def patches_enabled() -> bool:
    return os.environ.get("RAGSWEEP_LLAMA_PATCHES", "1").strip() not in ("0", "off", "no", "false")


def edits_id(patched: bool) -> str:
    """A hash of every edit (``TRIMS``, and ``PATCHES`` with its inserted files when ``patched``): part
    of the build key."""
    h = hashlib.sha256(json.dumps(TRIMS, sort_keys=True).encode())
    if patched:
        h.update(json.dumps(PATCHES, sort_keys=True).encode())
        for f in sorted(PATCH_DIR.glob("*.cpp")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:12]


def _edit(text: str, where: Path, name: str, edits: list[tuple[str, str]], fix: str) -> str:
    """``text`` (of file ``where``) with each (anchor, replacement) of edit ``name`` made; every anchor
    must occur exactly once (all checked before any is made), else the build stops naming the edit."""
    for i, (anchor, _) in enumerate(edits):
        n = text.count(anchor)
        if n != 1:
            sys.exit(f"build_llama_cpp: {name} edit {i + 1} expects its anchor once in {where}, found {n}: "
                     f"this llama.cpp differs from the one the edit was written for; {fix}")
    for anchor, replacement in edits:
        text = text.replace(anchor, replacement)
    return text


def apply_patches(llama_dir: Path) -> list[str]:
    """Apply ``PATCHES`` to a llama.cpp source tree; each anchor must occur exactly once, else the
    source is not the one these edits were written for and the build stops, naming the edit (and
    nothing is written)."""
    path = llama_dir / OPS
    fix = "update scripts/build_llama_cpp.py's PATCHES, or build unpatched with RAGSWEEP_LLAMA_PATCHES=0"
    text = path.read_text()
    for name, edits in PATCHES.items():
        pairs = [(anchor, ((PATCH_DIR / inserted).read_text() + "\n" if inserted else "") + replacement)
                 for anchor, replacement, inserted in edits]
        text = _edit(text, path, f"patch {name}", pairs, fix)
    path.write_text(text)
    return sorted(PATCHES)


def apply_trims(llama_dir: Path) -> list[str]:
    """Apply ``TRIMS`` (CMake edits: the CPU variants of ``CPU_VARIANTS``, llama-server as the one
    tool) to a llama.cpp source tree; nothing is written unless every anchor is found."""
    fix = "update scripts/build_llama_cpp.py's TRIMS (CPU_VARIANTS, _TOOLS) for this llama.cpp"
    texts: dict[Path, str] = {}
    for name, edits in TRIMS.items():
        for rel, anchor, replacement in edits:
            path = llama_dir / rel
            text = texts[path] if path in texts else path.read_text()
            texts[path] = _edit(text, path, f"trim {name}", [(anchor, replacement)], fix)
    for path, text in texts.items():
        path.write_text(text)
    return sorted(TRIMS)


def function_text(source: str, name: str) -> str | None:
    """The text of C/C++ function ``name`` in ``source`` (from ``static void name(`` or ``void
    name(`` at a line start to its closing brace at column 0), or None."""
    m = re.search(rf"^(?:static )?void {re.escape(name)}\(", source, re.M)
    if not m:
        return None
    end = source.find("\n}\n", m.start())
    return source[m.start(): end + 3] if end >= 0 else None


def check_source(llama_dir: Path, version: str, sdist: Path, patched: bool) -> None:
    """Stop unless the source is the one the edits were checked against: the pinned sdist hash, or,
    for a version without a pin, every function the patch depends on unchanged (``FINGERPRINTS``)."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    pinned = SDIST_SHA256.get(version)
    if pinned is not None:
        if digest != pinned:
            sys.exit(f"build_llama_cpp: {sdist.name} has sha256 {digest}, not the {pinned} pinned for "
                     f"llama-cpp-python {version} in scripts/build_llama_cpp.py's SDIST_SHA256: the package "
                     f"index served another file than the one the edits were checked against; do not build it")
        return
    if not patched:
        return
    ops = (llama_dir / OPS).read_text()
    changed = [name for name, want in FINGERPRINTS.items()
               if (text := function_text(ops, name)) is None or hashlib.sha256(text.encode()).hexdigest()[:16] != want]
    if changed:
        sys.exit(f"build_llama_cpp: llama-cpp-python {version} is not pinned in SDIST_SHA256 and these functions "
                 f"of its {OPS}, which the flash_attn_rows patch replaces or writes for, changed: {', '.join(changed)}. "
                 f"Re-check the patch against them (docs/cpu_speed.md, 'When llama.cpp is upgraded'), run "
                 f"python scripts/build_llama_cpp.py --test-backend-ops, then update FINGERPRINTS and "
                 f"SDIST_SHA256; or build unpatched with RAGSWEEP_LLAMA_PATCHES=0")
    print(f"build_llama_cpp: llama-cpp-python {version} is not pinned; the functions the patch depends on "
          f"are unchanged ({', '.join(FINGERPRINTS)}): add its sha256 {digest} to SDIST_SHA256 once "
          f"--test-backend-ops passes", flush=True)


def llama_requirement() -> str:
    """The exact llama-cpp-python pin, read from pyproject.toml (the one place it is written)."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"llama-cpp-python\[server\]==([0-9][^"]*)"', text)
    if not m:
        sys.exit("build_llama_cpp: pyproject.toml must pin llama-cpp-python[server]==VERSION")
    return m.group(1)


def compiler_id() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return cc


def build_key(version: str, cmake_args: str, edits: str) -> str:
    """The wheel's cache key: version, flags, edits (``edits_id``), compiler, platform, Python."""
    ident = [version, cmake_args, compiler_id(), platform.machine(), f"cp{sys.version_info[0]}{sys.version_info[1]}",
             edits]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def pip(*args: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def edited_source(version: str, where: Path, patched: bool) -> Path:
    """llama-cpp-python's sdist from the package index pip uses, unpacked under ``where``, checked
    (``check_source``), with ``TRIMS`` and, when ``patched``, ``PATCHES`` applied to its vendored
    llama.cpp: the folder to build."""
    where.mkdir(parents=True)
    pip("download", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python", "-d", str(where),
        f"llama-cpp-python=={version}")
    sdists = sorted(where.glob("llama_cpp_python-*.tar.gz")) + sorted(where.glob("llama-cpp-python-*.tar.gz"))
    if not sdists:
        sys.exit(f"build_llama_cpp: pip download gave no llama-cpp-python {version} sdist in {where}")
    with tarfile.open(sdists[0]) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.10.12: no links or paths out of ``where``
            tar.extractall(where, filter="data")
        else:
            tar.extractall(where)
    roots = [d for d in where.iterdir() if d.is_dir() and (d / "vendor" / "llama.cpp" / OPS).is_file()]
    if len(roots) != 1:
        sys.exit(f"build_llama_cpp: the sdist {sdists[0].name} has no vendor/llama.cpp/{OPS}")
    llama = roots[0] / "vendor" / "llama.cpp"
    check_source(llama, version, sdists[0], patched)
    names = apply_trims(llama)
    if patched:
        names += apply_patches(llama)
    print(f"build_llama_cpp: applied {', '.join(names)} to {llama}", flush=True)
    return roots[0]


def compiler_launcher() -> str:
    """``-DCMAKE_*_COMPILER_LAUNCHER=ccache`` where ccache is installed (not part of the key: it
    changes how long a build takes, not what it makes)."""
    if shutil.which("ccache") and not os.environ.get("RAGSWEEP_NO_CCACHE"):
        return " -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    return ""


def test_backend_ops(version: str, patched: bool, op: str = "FLASH_ATTN_EXT") -> int:
    """llama.cpp's own ``test-backend-ops`` for ``op``, built from the same edited source with the
    CPU variants this machine runs among ``haswell`` (AVX2) and the best one here, and run on each
    variant alone against llama.cpp's reference CPU code (``-b CPU``: the backend under test with
    every optimisation, its reference with ``use_ref``, which the patch leaves to the published loop).
    The build is kept under the cache folder (keyed like the wheel), so a second run only runs."""
    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.rag.generator.servers import cpu_backend  # noqa: E402 - standard library + this file

    flags = cpu_backend.cpu_flags()
    runnable = [v for v in CPU_VARIANTS if not cpu_backend.missing(v, flags)]
    best = cpu_backend.best_variant(flags, runnable, skip=True)
    variants = list(dict.fromkeys(v for v in ("haswell", best) if v in runnable))
    if not variants:
        sys.exit("build_llama_cpp: this CPU runs no variant with AVX2, where the patch's kernel applies")
    key = build_key(version, "test-backend-ops " + ";".join(variants), edits_id(patched))
    top = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsweep" / f"test-backend-ops-{key}"
    bin_dir = top / "build" / "bin"
    exe = bin_dir / "test-backend-ops"
    if not exe.is_file():
        shutil.rmtree(top, ignore_errors=True)
        source = edited_source(version, top / "src", patched) / "vendor" / "llama.cpp"
        args = ["cmake", "-S", str(source), "-B", str(top / "build"), "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON",
                f"-DRAGSWEEP_CPU_VARIANTS={';'.join(variants)}", "-DCMAKE_C_FLAGS=-fno-dse",
                "-DCMAKE_CXX_FLAGS=-fno-dse", "-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_BUILD_TOOLS=OFF",
                "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_OPENSSL=OFF",
                *compiler_launcher().split()]
        print("+", " ".join(args), flush=True)
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        targets = ["test-backend-ops", *(f"ggml-cpu-{v}" for v in variants)]
        build = ["cmake", "--build", str(top / "build"), "-j", str(os.cpu_count() or 2), "--target", *targets]
        print("+", " ".join(build), flush=True)
        subprocess.run(build, check=True)
    failed = 0
    for variant in variants:
        with tempfile.TemporaryDirectory() as tmp:  # the executable beside one CPU variant alone
            for f in bin_dir.iterdir():
                if f.name.startswith("libggml-cpu-") and f.name != f"libggml-cpu-{variant}.so":
                    continue
                (Path(tmp) / f.name).symlink_to(f.resolve())
            cmd = [str(Path(tmp) / exe.name), "test", "-o", op, "-b", "CPU"]
            print(f"build_llama_cpp: test-backend-ops {op} on the {variant} variant "
                  f"({'patched' if patched else 'unpatched'})", flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if "FAIL" in ln or "tests passed" in ln
                     or "Backend " in ln or "OK" == ln.strip()]
            print("\n".join(lines[-12:]) or proc.stdout[-2000:], flush=True)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                failed += 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unknown = [a for a in argv if a not in ("--wheel-only", "--test-backend-ops")]
    if unknown:
        sys.exit(f"build_llama_cpp: unknown argument(s) {unknown}; the options are --wheel-only and "
                 f"--test-backend-ops")
    version = llama_requirement()
    patched = patches_enabled()
    if "--test-backend-ops" in argv:
        return test_backend_ops(version, patched)
    cmake_args = os.environ.get("RAGSWEEP_LLAMA_CMAKE_ARGS", "").strip() or DISPATCH_CMAKE_ARGS
    portable = cmake_args == DISPATCH_CMAKE_ARGS
    key = build_key(version, cmake_args, edits_id(patched))
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsweep" / "wheels"
    wheel_dir = cache / f"llama-cpp-python-{version}-{key}"
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl")) if wheel_dir.is_dir() else []
    if wheels:
        print(f"build_llama_cpp: reusing {wheels[0]} (same version, flags, edits, compiler: key {key})")
    else:
        what = f"CPU variants {', '.join(CPU_VARIANTS)}" if portable else "custom flags"
        print(f"build_llama_cpp: compiling llama-cpp-python {version} and llama-server ({what}"
              f"{', patched: ' + ', '.join(sorted(PATCHES)) if patched else ', unpatched'}): "
              f"about 7 minutes on 2 idle cores (a Zen 4 EPYC), longer beside other work\n"
              f"  CMAKE_ARGS={cmake_args}", flush=True)
        with tempfile.TemporaryDirectory(dir=cache.parent if cache.parent.exists() else None) as tmp:
            env = dict(os.environ, CMAKE_ARGS=cmake_args + compiler_launcher(), FORCE_CMAKE="1")
            env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
            source = str(edited_source(version, Path(tmp) / "src", patched))
            pip("wheel", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python",
                "-w", tmp, source, env=env)
            built = sorted(Path(tmp).glob("llama_cpp_python-*.whl"))
            if not built:
                sys.exit("build_llama_cpp: pip wheel produced no llama_cpp_python wheel")
            wheel_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(str(built[0]), wheel_dir / built[0].name)
        wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
    wheel = wheels[0]
    if "--wheel-only" in argv:
        print(wheel)
        return 0
    # --force-reinstall --no-deps: replace whatever llama-cpp-python is installed (perhaps a wheel
    # from pip's cache built elsewhere); then its [server] dependencies the ordinary way.
    pip("install", "--no-cache-dir", "--force-reinstall", "--no-deps", str(wheel))
    pip("install", f"{wheel}[server]")
    record = {"version": version, "cmake_args": cmake_args, "portable": portable,
              "cpu_dispatch": "GGML_CPU_ALL_VARIANTS=ON" in cmake_args, "key": key,
              "patches": sorted(PATCHES) if patched else [], "trims": sorted(TRIMS),
              "cpu_variants": list(CPU_VARIANTS) if portable else [],
              "wheel": str(wheel), "compiler": compiler_id()}
    out = Path(sys.prefix) / "share" / "ragsweep" / "llama_build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"build_llama_cpp: installed {wheel.name}; build recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
