"""Whether the installed faiss can search on a GPU, decided before any index moves there.

faiss's GPU code checks every CUDA call and calls ``abort()`` when one fails, e.g. when a kernel
has no code for the device ("no kernel image is available for execution on the device"). An abort
cannot be caught: the first search would kill ragsweep with SIGABRT, skipping its exit handlers
(a sweep's vLLM server would be left running). ``faiss.get_num_gpus()`` still counts the GPU.
So before an index moves to a GPU (:func:`unusable`):

1. what the installed GPU wheel was compiled for (``BUILDS``, read off the wheels with
   ``cuobjdump --list-elf`` / ``--list-ptx``) is checked against the GPU's compute capability
   (NVML, :mod:`ragsweep.rag.gpus`): a cubin for sm_XY runs on compute capability X.Y to X.9, PTX
   for compute_XY is compiled by the driver for any X.Y or newer;
2. one tiny search runs in a child process: where it aborts, only the child dies.

Either failing keeps the exact index on the CPU (same results, slower search), with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

#: the GPU wheel ragsweep recommends: compute capability 7.0-9.0 compiled, PTX for newer (Blackwell)
RECOMMENDED = "faiss-gpu>=1.15.1,<1.16"
#: every PyPI distribution that ships the ``faiss`` package (only one may be installed)
DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss-gpu-cu11")


@dataclass(frozen=True)
class Build:
    cubins: tuple[tuple[int, int], ...]  # sm_XY the wheel carries code for
    ptx: tuple[int, int] | None  # compute_XY the wheel carries PTX for (None: no PTX)

    def runs_on(self, cc: tuple[int, int]) -> bool:
        exact = any(cc[0] == major and cc[1] >= minor for major, minor in self.cubins)
        return exact or (self.ptx is not None and cc >= self.ptx)

    def describe(self) -> str:
        sms = ", ".join(f"sm_{a}{b}" for a, b in self.cubins)
        return sms + (f" + PTX compute_{self.ptx[0]}{self.ptx[1]}" if self.ptx else ", no PTX")


#: (distribution, major.minor version) -> what its Linux x86-64 wheel was compiled for, read with
#: cuobjdump 13 from the wheels on PyPI (faiss-gpu 1.15.1: 182 kernels x 6 architectures + PTX 8.5
#: for sm_90; faiss-gpu-cu12 1.14.1: 182 kernels x 2, no PTX, its page says "Compute Capability 7.0-8.9")
BUILDS: dict[tuple[str, str], Build] = {
    ("faiss-gpu", "1.15"): Build(((7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)), (9, 0)),
    ("faiss-gpu-cu12", "1.14"): Build(((7, 0), (8, 0)), None),
}

PROBE = """
import sys
import numpy as np
import faiss
res = faiss.StandardGpuResources()
index = faiss.index_cpu_to_gpu(res, int(sys.argv[1]), faiss.IndexFlatIP(8))
x = np.eye(8, dtype="float32")
index.add(x)
_, ids = index.search(x, 1)
assert ids[:, 0].tolist() == list(range(8)), ids
print("faiss GPU search ok")
"""
#: a first search may compile PTX for a new GPU (Blackwell): minutes, once (the driver caches it)
PROBE_TIMEOUT_S = 300.0

_probed: dict[tuple, str | None] = {}


def installed() -> dict[str, str]:
    """The faiss distributions installed here, with their versions."""
    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def build_of(dists: dict[str, str]) -> tuple[str, str, Build] | None:
    """(distribution, version, what it was compiled for) of the installed GPU wheel, when known."""
    for dist, version in dists.items():
        build = BUILDS.get((dist, ".".join(version.split(".")[:2])))
        if build is not None:
            return dist, version, build
    return None


def fix() -> str:
    drop = " ".join(installed()) or "faiss-cpu"
    return f"pip uninstall -y {drop} && pip install '{RECOMMENDED}' (docs/gpu.md)"


def capability_mismatch(device: int) -> str | None:
    """Why the installed wheel has no code for GPU ``cuda:device``, from its known build; None when
    it has, or when the build or the GPU's compute capability is not known."""
    from ragsweep.rag import gpus

    known = build_of(installed())
    if known is None:
        return None
    found, _ = gpus.inventory()
    gpu = gpus.cuda_device(device, found)
    if gpu is None or known[2].runs_on(gpu.capability):
        return None
    dist, version, build = known
    return (f"{dist} {version} carries GPU code for {build.describe()} only, and GPU {device} ({gpu.name}) has compute "
            f"capability {gpu.cc}: its first search would abort the process")


def probe(device: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """One tiny search on ``cuda:device`` in a child process: None when it worked, else how it ended."""
    from ragsweep.rag.generator.servers.process import describe_exit

    key = (device, os.environ.get("CUDA_VISIBLE_DEVICES"), tuple(sorted(installed().items())))
    if key in _probed:
        return _probed[key]
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, str(device)], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        why: str | None = f"a test search on GPU {device} in a child process took over {timeout_s:g}s"
    else:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        # faiss's own words before abort(): "Faiss assertion ... CUDA error 209 no kernel image ..."
        said = next((line for line in lines if "faiss assertion" in line.lower() or "cuda error" in line.lower()),
                    lines[-1] if lines else "")
        why = None if proc.returncode == 0 else (
            f"a test search on GPU {device} in a child process failed ({describe_exit(proc.returncode)})"
            + (f": {said[:400]}" if said else ""))
    _probed[key] = why
    return why


def unusable(device: int) -> str | None:
    """Why faiss must not search on ``cuda:device`` (the compute-capability check, then a child
    process's test search); None when it can."""
    return capability_mismatch(device) or probe(device)
