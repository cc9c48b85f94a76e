"""Before vLLM starts: does each of its GPUs have the memory its share asks for?

vLLM refuses to start when a GPU's free memory is below ``total x gpu_memory_utilization``, after
loading for a while, with a message that does not say what holds the GPU. The registry
(:mod:`ragsweep.rag.generator.servers.gpu`) knows only the vLLM servers ragsweep started; the driver
(NVML, :mod:`ragsweep.rag.gpus`) knows every process: ragsweep's own CUDA contexts (a dense retriever
or an NLI checker on ``cuda``, a joblib worker's), another user's server, a notebook. So
:func:`check_free` compares free memory with ``share x total`` on each GPU before anything starts,
and stops with a ``GPUMemoryError`` that names every process holding the GPU and the fix. Without
NVML (no driver, no nvidia-ml-py) it checks nothing and vLLM's own check remains.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ragsweep.rag.generator.servers import process
from ragsweep.rag.generator.servers.errors import GPUMemoryError
from ragsweep.rag import gpus

GIB = gpus.GIB


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def owners(state_dir: Any = None) -> dict[int, str]:
    """What ragsweep knows of the processes that may hold a GPU: this one, and each registered
    server's process group (vLLM's memory sits in its EngineCore child, in the server's group)."""
    me = os.getpid()
    out = {me: "this ragsweep process: a dense retriever, reranker or NLI checker on cuda?"}
    groups = {int(e.get("pgid", e.get("pid", -1))): e for e in process.live_servers(state_dir)}
    for pid in _pids():
        group = _pgid(pid)
        if group in groups and pid != me:
            e = groups[group]
            out[pid] = f"ragsweep's {e.get('kind')} server for {e.get('model')!r}, pid {e.get('pid')}"
        elif group == _pgid(me) and pid != me:
            out[pid] = f"a process of this ragsweep run: {gpus.command_of(pid)}"
    return out


def _pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def _devices(ids: Sequence[str], found: Sequence[gpus.GPU]) -> list[tuple[str, gpus.GPU]]:
    return [(d, g) for d in ids if (g := gpus.physical(str(d), found)) is not None]


def holders_lines(ids: Sequence[str], state_dir: Any = None) -> list[str]:
    """One line per GPU of ``ids`` (NVML indices or UUIDs): its free memory and who holds the rest."""
    found, _ = gpus.inventory()
    mine = owners(state_dir) if found else {}
    out = []
    for d, g in _devices(ids, found):
        held = "; ".join(h.describe(mine) for h in g.holders) or "no process the driver lists (another container?)"
        out.append(f"GPU {d} ({g.name}) has {g.free / GIB:.1f} of {g.total / GIB:.1f} GiB free; held by: {held}")
    return out


def check_free(model: str, share: float, ids: Sequence[str], config_key: str = "generator.server",
               state_dir: Any = None) -> None:
    """Raise ``GPUMemoryError`` when a GPU of ``ids`` has less free memory than ``share x total``."""
    found, _ = gpus.inventory()
    short = [(d, g) for d, g in _devices(ids, found) if g.free < share * g.total]
    if not short:
        return
    mine = owners(state_dir)
    lines = [f"the vLLM server for {model!r} ({config_key}.gpu_memory_utilization {share:g}) cannot start: vLLM "
             "refuses to when a GPU's free memory is below total x gpu_memory_utilization"]
    for d, g in short:
        lines.append(f"GPU {d} ({g.name}): {g.free / GIB:.1f} of {g.total / GIB:.1f} GiB free, "
                     f"{share * g.total / GIB:.1f} GiB asked ({share:g} x {g.total / GIB:.1f})")
        lines += [f"  {h.describe(mine)}" for h in g.holders] or ["  (no process the driver lists holds it: another container?)"]
    most = min(g.free / g.total for _, g in short) - 0.02
    lines.append(
        "Fix: stop what holds the GPU (ragsweep's own: keep retriever.device=auto, which stays on the CPU beside "
        f"vLLM, or cpu), or lower {config_key}.gpu_memory_utilization"
        + (f" to at most {most:.2f}" if most > 0 else "") + ", or use another GPU (CUDA_VISIBLE_DEVICES)")
    raise GPUMemoryError("\n".join(lines))
