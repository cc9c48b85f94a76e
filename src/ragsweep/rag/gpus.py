"""The machine's NVIDIA GPUs as the driver reports them: name, memory, compute capability and the
processes that hold memory on each, read through NVML (the ``nvidia-ml-py`` package, ``pynvml``).

Asking creates no CUDA context (torch is not imported), so the process that is about to start vLLM
holds nothing on the GPU by asking. Where there is no NVIDIA driver (a CPU machine, a container
without the GPU), :func:`inventory` returns no GPU and says why.

GPU numbers: a ``cuda:N`` device (torch, faiss) counts the GPUs that ``CUDA_VISIBLE_DEVICES``
leaves, in its order; NVML counts every GPU in PCI bus order. :func:`cuda_device` maps one to the
other (entries of ``CUDA_VISIBLE_DEVICES`` are NVML indices or ``GPU-`` UUIDs). CUDA's own default
order puts the fastest GPU first; on a machine whose GPUs are all one model the two orders agree,
elsewhere set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (vLLM and torch then agree with NVML).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

GIB = 2**30


@dataclass(frozen=True)
class Holder:
    """A process with memory on a GPU (``used`` None: the driver does not say, e.g. in a container)."""

    pid: int
    used: int | None
    command: str

    def describe(self, own: Mapping[int, str] | None = None) -> str:
        amount = f"{self.used / GIB:.1f} GiB" if self.used is not None else "an unknown amount"
        what = (own or {}).get(self.pid) or self.command or "a process not visible from here (another container or user?)"
        return f"pid {self.pid} ({what}) holds {amount}"


@dataclass(frozen=True)
class GPU:
    index: int  # NVML's (PCI bus order)
    uuid: str
    name: str
    total: int  # bytes
    free: int
    capability: tuple[int, int]
    holders: tuple[Holder, ...] = field(default=())

    @property
    def cc(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"

    def line(self) -> str:
        return (f"GPU {self.index}: {self.name}, {self.total / GIB:.1f} GiB ({self.free / GIB:.1f} GiB free), "
                f"compute capability {self.cc}")


def command_of(pid: int) -> str:
    """The process's command line (shortened), "" when it is not visible from here."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return ""
    text = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(args))
    return text if len(text) <= 120 else text[:117] + "..."


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def inventory() -> tuple[list[GPU], str | None]:
    """Every GPU NVML sees, and None; or ``[]`` and why none can be read (no driver, no GPU)."""
    try:
        import pynvml
    except ImportError:
        return [], "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], f"no NVIDIA driver answers ({exc})"
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            except pynvml.NVMLError:
                procs = []
            holders = tuple(Holder(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory),
                                   command_of(int(p.pid))) for p in procs)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            out.append(GPU(i, _text(pynvml.nvmlDeviceGetUUID(h)), _text(pynvml.nvmlDeviceGetName(h)),
                           int(mem.total), int(mem.free), (int(major), int(minor)), holders))
        return out, None if out else "the NVIDIA driver sees no GPU"
    except pynvml.NVMLError as exc:
        return [], f"NVML failed: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def driver() -> tuple[str, str] | None:
    """(driver version, the highest CUDA version it supports, e.g. "13.0"), None without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except (ImportError, Exception):  # noqa: BLE001 - no package or no driver: nothing to say
        return None
    try:
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        return _text(pynvml.nvmlSystemGetDriverVersion()), f"{cuda // 1000}.{cuda % 1000 // 10}"
    finally:
        pynvml.nvmlShutdown()


def cuda_device(n: int, gpus: Sequence[GPU], env: Mapping[str, str] | None = None) -> GPU | None:
    """The GPU that ``cuda:n`` names in a process with ``env`` (its ``CUDA_VISIBLE_DEVICES``)."""
    ids = visible_ids(env)
    if ids is None:
        return physical(str(n), gpus)
    return physical(ids[n], gpus) if n < len(ids) else None


def visible_ids(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (None when it is not set)."""
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if value is None or not value.strip():
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def physical(device_id: str, gpus: Sequence[GPU]) -> GPU | None:
    """The GPU an NVML index (``"0"``) or a UUID (``"GPU-..."``, a prefix of it too) names."""
    for g in gpus:
        if device_id.isdigit() and g.index == int(device_id):
            return g
        if device_id.startswith("GPU-") and g.uuid.startswith(device_id):
            return g
    return None
