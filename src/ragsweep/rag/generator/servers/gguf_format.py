"""The weight format llama.cpp serves: a GGUF converted once with llama.cpp's own quantize API
(``llama_model_quantize``), cached under the cache directory, keyed by the source file's hash and
the target format.

Why: which format llama.cpp reads fastest depends on the CPU (docs/cpu_speed.md): on an
AVX2 CPU the packaged SmolLM2 file's Q4_1 has no fast prompt path and F16 reads prompts ~1.7x
faster; with AVX-512/AMX the 8- and 4-bit formats have their own kernels. ``auto`` therefore
measures the candidates once per machine (``ragsweep.rag.generator.servers.format_choice``).

    converted_model(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), "f16", Path(".ragsweep_cache"))
    -> .ragsweep_cache/gguf/SmolLM2-135M-Instruct.Q4_1-<sha256[:16]>.f16.gguf
       (or under $RAGSWEEP_GGUF_DIR when set)

The conversion runs in a child process (``python -m ragsweep.rag.generator.servers.gguf_format SRC
DST FORMAT``): a llama.cpp built for another CPU crashes there, not in the run, and is explained.
It writes to a temporary name and renames, so concurrent jobs of a sweep never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from ragsweep.errors import ConfigError

log = logging.getLogger(__name__)

#: what ``generator.server.model_format`` accepts -> llama.cpp's ``LLAMA_FTYPE_MOSTLY_*`` value
#: (``source``: serve the file as it is, no conversion; ``auto``: for the bundled SmolLM2 the format
#: this machine runs fastest, measured once (``format_choice``); a model file of the user's as it
#: is, since it may be large: F16 is 4x a Q4 file)
FORMATS: dict[str, int | None] = {"auto": None, "source": None, "f16": 1, "q8_0": 7, "q4_0": 2, "q4_1": 3, "bf16": 32}
DEFAULT_FORMAT = "auto"
AUTO_FORMAT = "f16"  # what auto serves when measuring fails (logged; measured again next time)
FIELD = "generator.server.model_format"


class ModelFormatError(ConfigError, ValueError):
    """A ``model_format`` that is not one of ``FORMATS`` (a ConfigError: the CLI prints one line)."""


def check_format(fmt: str | None) -> str:
    """The normalised format name, or a ``ModelFormatError`` naming the field and the choices."""
    name = str(fmt if fmt is not None else "source").strip().lower()
    if name not in FORMATS:
        raise ModelFormatError(
            f"{FIELD}={fmt!r} is not a weight format ragsweep converts to; use one of "
            f"{', '.join(FORMATS)} (e.g. {FIELD}={AUTO_FORMAT}; 'source' serves the file as it is, 'auto' "
            f"serves the bundled SmolLM2 in the format this machine runs fastest, measured once, and other "
            f"files as they are)"
        )
    return name


def default_cache_dir() -> Path:
    """The run's cache directory when none is passed: ``RAGSWEEP_CACHE_DIR`` or ``.ragsweep_cache``
    (the same default as ``cache_dir`` in conf/config.yaml)."""
    return Path(os.environ.get("RAGSWEEP_CACHE_DIR") or ".ragsweep_cache")


def conversions_dir(cache_dir: Path) -> Path:
    """``<cache_dir>/gguf``, or ``RAGSWEEP_GGUF_DIR`` when set (one store for many cache
    directories: the test suite's runs, each with its own cache, convert the model once)."""
    return Path(os.environ.get("RAGSWEEP_GGUF_DIR") or Path(cache_dir) / "gguf")


def file_sha256(path: Path) -> str:
    """The file's sha256, remembered beside the converted files by (path, size, mtime): a 100 MB
    file takes ~0.3 s to hash, so a sweep of many jobs hashes it once."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_hash(path: Path, store: Path) -> str:
    st = path.stat()
    ident = hashlib.sha256(json.dumps([str(path.resolve()), st.st_size, st.st_mtime_ns]).encode()).hexdigest()[:16]
    memo = store / "hashes" / f"{ident}.txt"
    try:
        value = memo.read_text().strip()
        if len(value) == 64:
            return value
    except OSError:
        pass
    value = file_sha256(path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(value + "\n")
        os.replace(tmp, memo)
    except OSError:
        pass
    return value


def converted_path(source: Path, fmt: str, cache_dir: Path, source_hash: str | None = None) -> Path:
    """Where the ``fmt`` conversion of ``source`` lives: keyed by the source's content hash and the
    format (never by its name alone: another file with the same name gets its own conversion)."""
    store = conversions_dir(cache_dir)
    digest = source_hash or _source_hash(source, store)
    return store / f"{source.stem}-{digest[:16]}.{fmt}.gguf"


def converted_model(source: Path, fmt: str, cache_dir: Path | None = None, timeout_s: float = 600) -> tuple[Path, bool]:
    """The file that serves ``source`` in format ``fmt``: ``(path, converted_now)``.

    ``source`` format -> the source itself. Otherwise the cached conversion, made now (with
    llama.cpp's ``llama_model_quantize``, ``allow_requantize``) if it is not there yet."""
    fmt = check_format(fmt)
    source = Path(source)
    if FORMATS[fmt] is None:  # source (auto is resolved by the server: it knows which model this is)
        return source, False
    target = converted_path(source, fmt, Path(cache_dir) if cache_dir else default_cache_dir())
    if target.is_file() and target.stat().st_size > 0:
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", __name__, str(source), str(tmp), fmt]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"converting {source.name} to {fmt} took over {timeout_s:g}s") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        from ragsweep.rag.generator.servers.llama_build import CPU_CRASH_SIGNALS, cpu_crash_hint
        from ragsweep.rag.generator.servers.process import describe_exit, exit_signal

        last = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
        hint = cpu_crash_hint() if exit_signal(proc.returncode) in CPU_CRASH_SIGNALS else (
            f"or serve the file as it is: {FIELD}=source")
        raise RuntimeError(
            f"converting {source} to {fmt} with llama.cpp's quantize failed ({describe_exit(proc.returncode)})"
            + (f":\n{last}" if last else "") + f"\n{hint}"
        )
    os.replace(tmp, target)
    log.info("converted %s to %s in %.1fs: %s", source.name, fmt, time.perf_counter() - t0, target)
    return target, True


def quantize(source: str, dest: str, fmt: str, nthread: int = 0) -> None:
    """llama.cpp's own conversion (``llama_model_quantize``), in this process."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FORMATS[check_format(fmt)]
    params.allow_requantize = True
    params.nthread = nthread
    rc = llama_cpp.llama_model_quantize(source.encode(), dest.encode(), params)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize returned {rc}")


if __name__ == "__main__":
    quantize(sys.argv[1], sys.argv[2], sys.argv[3])
