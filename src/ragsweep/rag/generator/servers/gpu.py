"""How the vLLM servers of one GPU share its memory.

vLLM refuses to start when the GPU's free memory is below ``total x gpu_memory_utilization``,
and a running vLLM server holds its whole share for as long as it lives. A sweep keeps the
generator's server for the whole sweep while each job's LLM judge (another model) starts its own,
and parallel jobs may each start one; with vLLM's default 0.9 each, the second never starts.

The rule: **the vLLM servers that ragsweep starts on one GPU share at most** ``TOTAL`` (0.9)
**of its memory.**

- ``gpu_memory_utilization: null`` (the default) takes ``TOTAL`` minus what the other live vLLM
  servers of the registry hold on its GPUs (``resolve``), at least ``MIN_SHARE``;
- a sweep whose generator and LLM judge are both managed vLLM servers with different settings
  starts the generator with half of ``TOTAL`` (``sweep_share``), so the judge's server of every
  job fits beside it (it takes the other half); when explicit shares cannot fit side by side,
  the sweep keeps no generator server and each job runs its generator's server and then its
  judge's, one after the other (slower; a WARNING names both servers and the fix);
- an explicit value is kept, but the shares on a GPU may add up to at most ``LIMIT``: otherwise
  the start fails with a ``GPUMemoryError`` that names every server involved, its share and the fix.

Servers that ragsweep did not start (another user's, a notebook's) are not in the registry: vLLM's
own memory check still reports them. Servers started at the same instant (parallel jobs) take
their shares one after the other (``registry_lock``), so the second sees the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from typing import Any, Iterator, Mapping, Sequence

from ragsweep.rag.generator.servers import process
from ragsweep.rag.generator.servers.errors import GPUMemoryError

log = logging.getLogger(__name__)

#: what the vLLM servers of one GPU share when their utilisation is left to ragsweep (vLLM's
#: default for a server alone)
TOTAL = 0.9
#: the most that explicit shares on one GPU may add up to: TOTAL too. Each process also holds a CUDA
#: context (~0.5 GiB) outside its share, and ragsweep's own processes may hold more (a model on
#: cuda); vLLM checks free memory >= total x share at its start (so does ``gpu_memory.check_free``)
LIMIT = TOTAL
#: the smallest share ragsweep picks by itself: below it a model's weights rarely fit
MIN_SHARE = 0.1

FIX = (
    "give the servers shares that add up to at most {limit} (e.g. generator.server.gpu_memory_utilization=0.45 "
    "evaluator.judge.server.gpu_memory_utilization=0.45), or leave them null so ragsweep splits {total} between "
    "them, or put them on different GPUs (CUDA_VISIBLE_DEVICES, tensor_parallel_size), or run fewer jobs at once"
)


@contextlib.contextmanager
def registry_lock(state_dir: Any) -> Iterator[None]:
    """Held from reading the registry until the new server's entry is written: two vLLM servers
    started at once (parallel jobs) then never both see the GPU free."""
    folder = process.registry_dir(state_dir) / "servers"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".gpu.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def devices(env: Mapping[str, str] | None, tensor_parallel_size: int = 1) -> list[str]:
    """The GPUs a server started with ``env`` uses: the first ``tensor_parallel_size`` of
    ``CUDA_VISIBLE_DEVICES``, or ``0..tp-1`` when it is not set."""
    visible = (env or {}).get("CUDA_VISIBLE_DEVICES")
    tp = max(1, int(tensor_parallel_size))
    if visible is None or not visible.strip():
        return [str(i) for i in range(tp)]
    return [d.strip() for d in visible.split(",") if d.strip()][:tp]


def describe(entry: Mapping[str, Any]) -> str:
    owner = int(entry.get("owner_pid", -1))
    whose = f"started by pid {owner}" if process.pid_alive(owner) else (
        f"left behind by pid {owner}, which is gone: stop it with `kill -TERM -{entry.get('pgid', entry.get('pid'))}`"
    )
    return (f"the vLLM server for {entry.get('model')!r} (pid {entry.get('pid')}, gpu_memory_utilization "
            f"{entry.get('gpu_memory_utilization')}, GPU {','.join(entry.get('devices') or ['?'])}, {whose})")


def others_on(gpus: Sequence[str], state_dir: Any = None, exclude_pid: int | None = None) -> list[dict]:
    """The live vLLM servers of the registry that use any of ``gpus``."""
    out = []
    for e in process.live_servers(state_dir):
        if e.get("kind") != "vllm" or e.get("gpu_memory_utilization") is None or e.get("pid") == exclude_pid:
            continue
        if set(map(str, e.get("devices") or ["0"])) & set(gpus):
            out.append(e)
    return out


def resolve(model: str, requested: float | None, gpus: Sequence[str], state_dir: Any = None) -> float:
    """The share of GPU memory a vLLM server for ``model`` starts with (``requested``, or the
    rest of ``TOTAL`` when None); a ``GPUMemoryError`` naming every server when it cannot fit."""
    others = others_on(gpus, state_dir)
    held = max((sum(float(e["gpu_memory_utilization"]) for e in others
                    if str(g) in map(str, e.get("devices") or ["0"])) for g in gpus), default=0.0)
    if requested is None:
        share = round(TOTAL - held, 2)
        if share >= MIN_SHARE:
            return share
        want, why = "null", f"which leaves {max(share, 0):g} of {TOTAL}, less than the {MIN_SHARE} ragsweep gives a server at least"
    else:
        share = float(requested)
        if held + share <= LIMIT + 1e-9 or not others:  # alone on its GPUs, any share is the user's call
            return share
        want, why = f"{share:g}", f"so together they would ask for {held + share:.2f} of the GPU's memory, more than {LIMIT}"
    raise GPUMemoryError(
        f"the vLLM server for {model!r} (gpu_memory_utilization {want}) cannot start on GPU {','.join(gpus)}: "
        + "; ".join(describe(e) for e in others)
        + (" already holds" if len(others) == 1 else "; together they already hold")
        + f" {held:g} of it, {why} (vLLM refuses to start when free memory is "
        f"below total x gpu_memory_utilization). Fix: " + FIX.format(limit=LIMIT, total=TOTAL)
    )


def _is_vllm(node: Any) -> bool:
    try:
        target = str(node.get("_target_") or "")
    except AttributeError:
        return False
    return target.rsplit(".", 1)[-1] == "VLLMServer"


def _plain(node: Any) -> dict:
    from omegaconf import OmegaConf

    return dict(OmegaConf.to_container(node, resolve=True)) if OmegaConf.is_config(node) else dict(node)


def sweep_share(config: Any) -> dict[str, float] | None:
    """The keyword arguments the sweep's generator server is built with so that each job's vLLM
    judge fits beside it on the same GPU: ``{"gpu_memory_utilization": TOTAL / 2}`` when the
    generator and the judge are managed vLLM servers with different settings (a judge with the
    generator's very settings talks to the generator's server) and the generator's share is null;
    ``{}`` otherwise.

    None when explicit shares cannot fit together: the sweep then keeps no server of its own, and
    each job starts the generator's server and stops it before its judge's starts (a run does so),
    which works but loads the model once per job; a WARNING names both servers, their shares and
    the fix."""
    try:
        return _sweep_share(config)
    except GPUMemoryError as exc:
        log.warning("%s\nSo the sweep keeps no generator server: each job starts it and stops it before its "
                    "judge's server starts (slower: the model loads once per job).", exc)
        return None


def _sweep_share(config: Any) -> dict[str, float]:
    gen = config.generator.get("server") if "generator" in config else None
    ev = config.get("evaluator") or {}
    judge = (ev.get("judge") or {}).get("server") if hasattr(ev, "get") else None
    if not (_is_vllm(gen) and _is_vllm(judge)):
        return {}
    g, j = _plain(gen), _plain(judge)
    if g == j:
        return {}
    env = dict(os.environ)
    gpus_g = devices({**env, **(g.get("env") or {})}, g.get("tensor_parallel_size", 1))
    gpus_j = devices({**env, **(j.get("env") or {})}, j.get("tensor_parallel_size", 1))
    if not set(gpus_g) & set(gpus_j):
        return {}
    gu, ju = g.get("gpu_memory_utilization"), j.get("gpu_memory_utilization")
    gen_share = round(TOTAL / 2, 2) if gu is None else float(gu)
    judge_share = round(TOTAL - gen_share, 2) if ju is None else float(ju)
    if (ju is None and judge_share < MIN_SHARE) or gen_share + judge_share > LIMIT + 1e-9:
        raise GPUMemoryError(
            f"the sweep's generator server, vLLM for {g.get('model')!r} (generator.server.gpu_memory_utilization "
            f"{gu if gu is not None else 'null'}: {gen_share:g}), lives for the whole sweep and each job's LLM judge "
            f"starts another on the same GPU, vLLM for {j.get('model')!r} (evaluator.judge.server."
            f"gpu_memory_utilization {ju if ju is not None else 'null'}: {judge_share:g}): together "
            f"{gen_share + judge_share:.2f} of the GPU's memory (more than {LIMIT}): the judge's server could not start "
            f"beside the generator's. Fix: "
            + FIX.format(limit=LIMIT, total=TOTAL)
        )
    return {"gpu_memory_utilization": gen_share} if gu is None else {}
