"""The GPU path on first use (issue 27), without a GPU: vLLM servers that start, share a GPU and
stop, against a fake vLLM (``tests/fixtures/fake_vllm``) that behaves like vLLM where ragsweep
depends on it: it is started as ``python -m vllm.entrypoints.cli.main serve``, requires the API key
of ``VLLM_API_KEY`` on ``/v1/*`` (``/health`` open), refuses to start when a shared budget file's
free memory is below ``total x gpu_memory_utilization``, and runs a worker child process; the
faiss index a ``device: cuda`` dense run uses; ``generator.stop`` against the real llama.cpp server.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from support.processes import wait_gone
from support import TESTS
from ragsweep.rag.generator import ChatClient, ChatRequest, VLLMServer, build_client, find_orphans, stop_orphans
from ragsweep.rag.generator.server import pid_alive
from ragsweep.rag.generator.servers.errors import GPUMemoryError, ServerStartupError

FAKE_VLLM = TESTS / "fixtures" / "fake_vllm"
KEY = "sk-vllm-test-4a7c"


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """The fake vLLM importable here and in child processes, one 80 GiB "GPU" (a budget file)
    shared by every server the test starts, and a registry of its own."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_VLLM), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    budget = tmp_path / "gpu.json"
    budget.write_text(json.dumps({"total_gib": 80}))
    monkeypatch.setenv("FAKE_VLLM_GPU", str(budget))
    monkeypatch.setenv("RAGSWEEP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    started: list[VLLMServer] = []
    yield started
    for srv in started:
        srv.stop()


def claims(budget: str) -> dict:
    path = Path(budget).with_suffix(".claims.json")
    return json.loads(path.read_text()) if path.exists() else {}


# -- 1: VLLM_API_KEY in the environment --------------------------------------------------------------
def test_vllm_key_in_the_environment_starts_fast_and_is_sent(fake_vllm, monkeypatch, tmp_path):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    srv = VLLMServer(model="fake/generator", startup_timeout_s=20)
    fake_vllm.append(srv)
    t0 = time.monotonic()
    srv.start()  # the old readiness check polled /v1/models, which answers 401 until the timeout
    assert time.monotonic() - t0 < 10
    assert srv.api_key == KEY
    client = build_client({"server": {"_target_": "ragsweep.rag.generator.server.VLLMServer"}, "max_retries": 0}, srv,
                          progress=False)
    r = client.chat(ChatRequest.user("hello", max_tokens=8))
    assert r.ok, r.error
    # a client without the key is refused: the fake really guards /v1/*
    bad = ChatClient(srv.base_url, srv.model_name, max_retries=0, progress=False).chat(ChatRequest.user("x"))
    assert not bad.ok and "401" in str(bad.error)
    # a sweep's job reaches the same server through the variable's name, never the key itself
    from ragsweep.pipeline.sweep import AttachedServer

    info = {"base_url": srv.base_url, "model_name": srv.model_name, "kind": "vllm", "api_key_env": srv.api_key_env}
    assert AttachedServer(info).api_key == KEY and KEY not in json.dumps(info)
    # the key is in no log, registry entry or description
    entries = list((tmp_path / "state" / "servers").glob("*.json"))
    assert entries and all(KEY not in e.read_text() for e in entries)
    srv.stop()
    assert KEY not in Path(srv.log_path).read_text() and KEY not in json.dumps(srv.describe())


def test_vllm_api_key_in_extra_args_is_refused():
    from ragsweep.errors import ConfigError

    with pytest.raises(ConfigError, match="VLLM_API_KEY"):
        VLLMServer(model="m", extra_args=["--api-key", "secret"])


# -- 2: two vLLM servers on one GPU ------------------------------------------------------------------
def vllm_pair(compose_cfg, *extra: str):
    return compose_cfg(
        "generator=vllm", "generator.server.model=fake/generator", "generator.server.startup_timeout_s=30",
        "evaluator=llm", "server@evaluator.judge.server=vllm", "evaluator.judge.server.model=fake/judge",
        "evaluator.judge.server.startup_timeout_s=30", *extra,
    )


def test_sweep_generator_and_vllm_judge_share_one_gpu(fake_vllm, compose_cfg):
    from ragsweep.judge.llm_judge import Judge
    from ragsweep.pipeline.sweep import SweepCallback

    cfg = vllm_pair(compose_cfg)
    sweep = SweepCallback()
    info = sweep._start_server(cfg)  # the generator's server, for the whole sweep
    fake_vllm.append(sweep.server)
    judge = Judge.from_spec(cfg.evaluator.judge)
    try:
        judge.start()  # a job's judge: another vLLM server on the same GPU (the old code: 0.9 + 0.9)
        fake_vllm.append(judge.server)
        assert sweep.server.gpu_memory_utilization == 0.45 and judge.server.gpu_memory_utilization == 0.45
        assert sorted(c["model"] for c in claims(os.environ["FAKE_VLLM_GPU"]).values()) == ["fake/generator", "fake/judge"]
        assert info["kind"] == "vllm" and judge.server.running and sweep.server.running
        assert info["api_key_env"] == "VLLM_API_KEY"  # the jobs read the key, if any, from their environment
    finally:
        judge.close()
        sweep.server.stop()


def test_explicit_shares_that_cannot_fit_name_both_servers(fake_vllm, compose_cfg, caplog):
    from ragsweep.pipeline.sweep import SweepCallback

    cfg = vllm_pair(compose_cfg, "generator.server.gpu_memory_utilization=0.9",
                    "evaluator.judge.server.gpu_memory_utilization=0.9")
    sweep = SweepCallback()
    with caplog.at_level(logging.WARNING):
        # no server for the sweep: each job starts its generator's and stops it before its judge's
        assert sweep._start_server(cfg) is None and sweep.server is None
    msg = caplog.text
    assert "'fake/generator'" in msg and "'fake/judge'" in msg and "0.9" in msg and "1.80" in msg
    assert "generator.server.gpu_memory_utilization" in msg and "evaluator.judge.server.gpu_memory_utilization" in msg
    assert "each job starts it and stops it before its judge's server starts" in msg

    # the same at start, for servers started apart (parallel jobs): the second names the first
    first = VLLMServer(model="fake/generator", gpu_memory_utilization=0.9, startup_timeout_s=20)
    fake_vllm.append(first)
    first.start()
    second = VLLMServer(model="fake/judge", gpu_memory_utilization=0.9, startup_timeout_s=20)
    fake_vllm.append(second)
    t0 = time.monotonic()
    with pytest.raises(GPUMemoryError) as err:
        second.start()
    msg = str(err.value)
    assert time.monotonic() - t0 < 2 and second.pid is None  # refused before anything started
    assert "'fake/generator'" in msg and "'fake/judge'" in msg and f"pid {first.pid}" in msg
    assert "gpu_memory_utilization 0.9" in msg and "1.80" in msg and "Fix:" in msg
    # left to ragsweep (null), it takes what is left... when something is
    third = VLLMServer(model="fake/judge", startup_timeout_s=20)
    fake_vllm.append(third)
    with pytest.raises(GPUMemoryError, match="fake/generator"):
        third.start()


def test_parallel_starts_take_their_shares_one_after_the_other(fake_vllm):
    """Two jobs starting a vLLM server at the same instant: the second sees the first's share
    (the registry lock) and fails with ragsweep's error naming it, not with vLLM's own."""
    import threading

    servers = [VLLMServer(model=f"fake/job{i}", gpu_memory_utilization=0.6, startup_timeout_s=20) for i in range(2)]
    fake_vllm.extend(servers)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def start(srv):
        barrier.wait()
        try:
            srv.start()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(errors) == 1 and isinstance(errors[0], GPUMemoryError), errors
    running = [s for s in servers if s.running]
    assert len(running) == 1 and f"'{running[0].model}'" in str(errors[0])


def test_fake_vllm_refuses_like_vllm_when_memory_is_short(fake_vllm):
    """The fake's check is real: a share ragsweep does not know about (another user's server)
    still fails, with vLLM's message in the startup error."""
    budget = Path(os.environ["FAKE_VLLM_GPU"])
    budget.with_suffix(".claims.json").write_text(json.dumps({str(os.getpid()): {"gib": 60, "model": "other"}}))
    srv = VLLMServer(model="fake/generator", startup_timeout_s=20)
    fake_vllm.append(srv)
    with pytest.raises(ServerStartupError, match="less than desired GPU memory utilization"):
        srv.start()


# -- issue 35: vLLM's root cause on screen, its start on the terminal, the GPU's free memory -------
def test_a_failed_vllm_start_names_its_root_cause_and_fix_not_the_tail(fake_vllm):
    """vLLM's error sits in its EngineCore's lines, ~40 lines above the log's tail (the API
    server's traceback "See root cause above"): the error message names it and the fix."""
    budget = Path(os.environ["FAKE_VLLM_GPU"])
    budget.with_suffix(".claims.json").write_text(json.dumps({str(os.getpid()): {"gib": 60, "model": "other"}}))
    srv = VLLMServer(model="fake/generator", startup_timeout_s=20)
    fake_vllm.append(srv)
    with pytest.raises(ServerStartupError) as err:
        srv.start()
    lines = str(err.value).splitlines()
    assert lines[0].startswith("the vllm server (pid ") and "ended during startup" in lines[0]
    assert lines[1].startswith("root cause (line ") and lines[1].endswith(
        "ValueError: Free memory on device cuda:0 (20.00/80.00 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 72.00 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    assert lines[2] == ("fix: the GPU has 20 of 80 GiB free, less than vLLM's share of it: free the GPU (what holds it "
                        "is listed below), or lower generator.server.gpu_memory_utilization to at most 0.23")
    shown_tail = str(err.value).split("last lines of its log:")[1]
    assert "See root cause above" in shown_tail and "Free memory" not in shown_tail  # the tail alone says nothing


def test_the_judges_server_is_named_by_its_own_config_keys(fake_vllm, compose_cfg, monkeypatch):
    from ragsweep.judge.llm_judge import Judge

    judge_cfg = vllm_pair(compose_cfg).evaluator.judge
    monkeypatch.setenv("FAKE_VLLM_FAIL", "kv_cache")
    judge = Judge.from_spec(judge_cfg)
    with pytest.raises(ServerStartupError) as err:
        judge.start()
    fake_vllm.append(judge.server)
    assert "fix: the KV cache left beside the weights cannot hold one request of the model's full length (32768 " \
           "tokens): set evaluator.judge.server.max_model_len=9824 or lower" in str(err.value)
    # a start that takes longer than its timeout names the key to raise
    monkeypatch.delenv("FAKE_VLLM_FAIL")
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "30")
    judge = Judge.from_spec(OmegaConf.merge(judge_cfg, {"server": {"startup_timeout_s": 1}}))
    with pytest.raises(ServerStartupError, match=r"raise evaluator\.judge\.server\.startup_timeout_s if it is just slow"):
        judge.start()
    fake_vllm.append(judge.server)
    srv = VLLMServer(model="fake/generator", startup_timeout_s=1)
    fake_vllm.append(srv)
    with pytest.raises(ServerStartupError, match=r"raise generator\.server\.startup_timeout_s if it is just slow"):
        srv.start()


def test_a_slow_vllm_start_shows_model_log_and_seconds_on_the_terminal(fake_vllm, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "3.5")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    srv = VLLMServer(model="fake/generator", startup_timeout_s=30)
    fake_vllm.append(srv)
    srv.start()
    err = capfd.readouterr().err.splitlines()
    status = [line for line in err if line.startswith("starting the vllm server for fake/generator: ")]
    assert status and f"(log: {srv.log_path})" in status[0], err
    assert any(line.startswith("the vllm server for fake/generator is up after ") for line in err), err


def test_vllm_does_not_start_when_the_gpu_is_not_free_and_says_what_holds_it(fake_vllm, monkeypatch, tmp_path):
    """The driver (a fake NVML) says 40 GiB of the 80 GiB H100 are held by another process:
    a 0.9 share cannot fit; nothing starts, and the error names the process and the fix."""
    from support.gpus import H100, use_fake_nvml

    from ragsweep.rag.gpus import command_of

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)  # not ours
    deadline = time.monotonic() + 10
    while "sleep" not in command_of(holder.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        use_fake_nvml(monkeypatch, tmp_path, {**H100, "total_gib": 80, "processes": [{"pid": holder.pid, "used_gib": 40}]})
        srv = VLLMServer(model="fake/generator", startup_timeout_s=20)
        fake_vllm.append(srv)
        with pytest.raises(GPUMemoryError) as err:
            srv.start()
        assert srv.pid is None  # refused before anything started
        msg = str(err.value)
        assert "the vLLM server for 'fake/generator' (generator.server.gpu_memory_utilization 0.9) cannot start" in msg
        assert "GPU 0 (NVIDIA H100 80GB HBM3): 40.0 of 80.0 GiB free, 72.0 GiB asked (0.9 x 80.0)" in msg
        assert f"pid {holder.pid} (python -c import time; time.sleep(60)) holds 40.0 GiB" in msg
        assert "lower generator.server.gpu_memory_utilization to at most 0.48" in msg
        # a share that fits starts
        ok = VLLMServer(model="fake/generator", gpu_memory_utilization=0.45, startup_timeout_s=20)
        fake_vllm.append(ok)
        ok.start()
        assert ok.running
    finally:
        holder.kill()
        holder.wait()


def test_device_auto_stays_on_the_cpu_beside_a_vllm_server_of_the_run(compose_cfg, monkeypatch, caplog):
    import torch

    from ragsweep.rag import devices
    from ragsweep.rag.retriever.dense import DenseRetriever

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    devices._said.clear()
    try:
        assert devices.plan(compose_cfg("generator=vllm")) is not None
        with caplog.at_level(logging.WARNING, logger="ragsweep.rag.devices"):
            assert DenseRetriever(model="minilm", device="auto").device == "cpu"
            assert DenseRetriever(model="minilm", device="cuda").device == "cuda"  # asked for: kept
        assert [r.getMessage() for r in caplog.records] == [
            "retriever.device=auto runs on the CPU: the vLLM server of generator.server shares that GPU (its memory "
            "would count against vLLM's share): set device=cuda (e.g. retriever.device=cuda) to put it there anyway, "
            "beside a lower generator.server.gpu_memory_utilization"]
        assert devices.plan(compose_cfg("evaluator=llm", "server@evaluator.judge.server=vllm")) is not None
        # a vLLM server on another GPU, or none: auto follows torch
        assert devices.plan(compose_cfg("generator=vllm", "+generator.server.env={CUDA_VISIBLE_DEVICES: '1'}")) is None
        assert devices.plan(compose_cfg()) is None
        assert DenseRetriever(model="minilm", device="auto").device == "cuda"
    finally:
        devices._beside = None


# -- 3: a vLLM left by a killed sweep ----------------------------------------------------------------
ORPHAN_CHILD = textwrap.dedent("""
    import os, signal, sys
    from ragsweep.rag.generator.server import VLLMServer
    srv = VLLMServer(model="fake/orphan", executable=sys.argv[1] or None, startup_timeout_s=30)
    srv.start()
    print(srv.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a killed sweep: nothing stops its server
""")


@pytest.mark.parametrize("how", ["module", "console_script"])
def test_vllm_left_by_a_killed_sweep_is_found_and_stopped_with_its_worker(fake_vllm, tmp_path, how):
    exe = ""
    if how == "console_script":  # what pip's `vllm` script is: the interpreter runs it (its cmdline)
        script = tmp_path / "bin" / "vllm"
        script.parent.mkdir()
        script.write_text(f"#!{sys.executable}\nfrom vllm.entrypoints.cli.main import main\nmain()\n")
        script.chmod(0o755)
        exe = str(script)
    child = subprocess.run([sys.executable, "-c", ORPHAN_CHILD, exe], capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    server_pid = int(child.stdout.split()[0])
    workers = [int(p) for p in claims(os.environ["FAKE_VLLM_GPU"])]
    try:
        assert pid_alive(server_pid) and len(workers) == 1 and pid_alive(workers[0])
        assert [o["pid"] for o in find_orphans()] == [server_pid]
        assert stop_orphans(grace_s=5) == [server_pid]
        assert wait_gone(server_pid) and wait_gone(workers[0])  # the worker that holds the GPU too
        assert find_orphans() == []
    finally:
        for pid in [server_pid, *workers]:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_registry_ignores_a_reused_pid(tmp_path):
    from ragsweep.rag.generator.servers import process

    entry = {"pid": os.getpid(), "pgid": os.getpid(), "owner_pid": 999999999, "argv": [sys.executable],
             "start_time": (process.start_time(os.getpid()) or 0) + 1}
    (tmp_path / "servers").mkdir()
    (tmp_path / "servers" / "1.json").write_text(json.dumps(entry))
    assert find_orphans(tmp_path) == [] and not list((tmp_path / "servers").glob("*.json"))
    # another node's entry (a registry in a shared home) is neither judged nor deleted
    other = {**entry, "start_time": process.start_time(os.getpid()), "host": "another-node"}
    (tmp_path / "servers" / "2.json").write_text(json.dumps(other))
    assert find_orphans(tmp_path) == [] and (tmp_path / "servers" / "2.json").exists()
    (tmp_path / "servers" / "2.json").write_text(json.dumps({**other, "host": process.hostname()}))
    assert [o["pid"] for o in find_orphans(tmp_path)] == [os.getpid()]  # its owner pid is gone


def test_vllm_command_line(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    srv = VLLMServer(model="Qwen/Qwen2.5-7B-Instruct", tensor_parallel_size=2, gpu_memory_utilization=0.8,
                     max_model_len=16384, extra_args=["--enforce-eager"])
    assert srv.command(8123) == [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "Qwen/Qwen2.5-7B-Instruct",
        "--host", "127.0.0.1", "--port", "8123", "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.8",
        "--dtype", "auto", "--max-model-len", "16384", "--generation-config", "vllm", "--enforce-eager",
    ]
    assert srv.health_path == "/health" and srv.devices == ["0", "1"]
    assert VLLMServer(model="m", executable="/opt/vllm/bin/vllm").command(1)[:2] == ["/opt/vllm/bin/vllm", "serve"]


# -- 4: faiss-cpu and faiss-gpu ---------------------------------------------------------------------
def test_no_extra_installs_faiss_gpu_beside_faiss_cpu():
    import tomllib

    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("faiss-cpu") for d in project["dependencies"])
    for name, deps in project["optional-dependencies"].items():
        assert not any(d.startswith("faiss-gpu") for d in deps), f"extra {name!r} installs faiss-gpu beside faiss-cpu"
    assert project["optional-dependencies"]["vllm"] == ["vllm>=0.27.1,<0.33"]


def test_the_gpu_page_installs_what_runs_on_ampere_hopper_and_blackwell():
    """The GPU install of docs/gpu.md is the faiss wheel ragsweep recommends (faiss-gpu-cu12 has no
    code for Hopper or Blackwell), says vLLM 0.32 needs Python 3.11 and what the cu128 torch rules
    out, and its vLLM range is the extra's (which the doctor reads)."""
    import tomllib

    from ragsweep.pipeline import doctor
    from ragsweep.rag.retriever import faiss_gpu

    gpu = (TESTS.parent / "docs" / "gpu.md").read_text()
    assert faiss_gpu.fix().endswith("(docs/gpu.md)")  # where the fix of a wrong faiss wheel points
    at = gpu.index("**Install**")
    install = gpu[at:gpu.index("ragsweep-doctor --gpu", at)]
    assert f"pip install '{faiss_gpu.RECOMMENDED}'" in install and "faiss-gpu-cu12" not in install
    assert "Python 3.11 or\nnewer for vLLM 0.32" in gpu and "**means no vLLM**" in gpu
    assert "`numba==0.65.0`" in gpu and "`transformers>=5.16.1,<5.20`" in gpu and "HF_TOKEN" in gpu and "tmux" in gpu
    for generation in ("Ampere", "Hopper", "Blackwell"):
        row = next(line for line in gpu.splitlines() if line.startswith(f"| {generation}"))
        assert "faiss-gpu 1.15.1" in row, row
    extra = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    assert extra == [f"vllm{doctor.VLLM_RANGE}"] and f"vllm{doctor.VLLM_RANGE}" in gpu


def test_dense_on_cuda_says_once_at_warning_which_index_it_uses(caplog, tmp_path):
    from ragsweep.rag.retriever import faiss_index
    from ragsweep.rag.retriever.dense import DenseRetriever
    from ragsweep.types import Chunk

    faiss_index._said.clear()
    chunks = [Chunk(chunk_id=f"d{i}:0", doc_id=f"d{i}", text=f"text {i}", start=0, end=6) for i in range(5)]
    rng = np.random.default_rng(0)

    def build():
        r = DenseRetriever(model="minilm", device="cuda")
        r.embed = lambda texts, cache, desc="", **kw: rng.standard_normal((len(texts), 8)).astype(np.float32)
        r._build(chunks, None)
        return r

    with caplog.at_level(logging.INFO, logger="ragsweep.rag.retriever.dense"):
        r = build()
        build()
    said = [rec for rec in caplog.records if "dense index" in rec.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    msg = said[0].getMessage()
    assert "retriever.device=cuda" in msg and "IndexFlatIP on the CPU" in msg  # faiss-cpu here
    assert "pip uninstall -y faiss-cpu" in msg
    assert r._index.ntotal == 5


DENSE_ON_CUDA = textwrap.dedent("""
    import logging, sys
    import numpy as np
    from ragsweep.rag.retriever.dense import DenseRetriever
    from ragsweep.types import Chunk, Query

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
    rng = np.random.default_rng(0)
    chunks = [Chunk(chunk_id=f"d{i}:0", doc_id=f"d{i}", text=f"text {i}", start=0, end=6) for i in range(5)]
    r = DenseRetriever(model="minilm", device="cuda")
    r.embed = lambda texts, cache, desc="", **kw: rng.standard_normal((len(texts), 8)).astype(np.float32)
    r._build(chunks, None)
    hits = r._search(["text 1"], 2, None)
    print(type(r._index).__name__, len(hits[0][0]), flush=True)
""")


def test_a_faiss_gpu_build_without_code_for_the_gpu_falls_back_to_the_cpu(monkeypatch):
    """A faiss GPU wheel whose kernels were not compiled for this GPU (faiss-gpu-cu12 on an H100)
    abort()s the process at its first search. The run must keep the index on the CPU and say why
    once, not die by SIGABRT."""
    from support.gpus import FAKE_FAISS_GPU, prepend_path

    prepend_path(monkeypatch, FAKE_FAISS_GPU)
    monkeypatch.setenv("FAKE_FAISS_DEVICE_CC", "9.0")
    monkeypatch.setenv("FAKE_FAISS_ARCHS", "7.0,8.0")
    proc = subprocess.run([sys.executable, "-c", DENSE_ON_CUDA], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"rc={proc.returncode}: {proc.stderr[-3000:]}"
    assert proc.stdout.split() == ["IndexFlatIP", "2"]
    said = [line for line in proc.stderr.splitlines() if "dense index" in line]
    assert len(said) == 1 and said[0].startswith("WARNING retriever.device=cuda: the dense index is IndexFlatIP on the CPU")
    assert "killed by SIGABRT" in said[0] and "no kernel image is available" in said[0]
    assert "pip install 'faiss-gpu>=1.15.1,<1.16'" in said[0]
    # the same fake on a GPU its code covers: the index moves to the GPU
    monkeypatch.setenv("FAKE_FAISS_DEVICE_CC", "8.6")
    proc = subprocess.run([sys.executable, "-c", DENSE_ON_CUDA], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["GpuIndexFlatIP", "2"], proc.stderr[-3000:]
    assert "is GpuIndexFlatIP on GPU 0" in proc.stderr


# -- 5: generator.stop, against the real llama.cpp server --------------------------------------------
@pytest.mark.slow
def test_generator_stop_reaches_the_real_llamacpp_server(compose_cfg, tmp_path):
    from ragsweep.pipeline.system import run_system

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in [
        {"doc_id": "d1", "text": "Paris is the capital of France. It lies on the Seine."},
        {"doc_id": "d2", "text": "Berlin is the capital of Germany. It lies on the Spree."},
    ]))
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in [
        {"query_id": "q1", "query": "What is the capital of France, and which river runs through it?",
         "gt_answer": "Paris, on the Seine"},
        {"query_id": "q2", "query": "What is the capital of Germany, and which river runs through it?",
         "gt_answer": "Berlin, on the Spree"},
    ]))
    cfg = compose_cfg(
        "dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={queries}", "retriever=bm25",
        "evaluator=none", "generator.max_tokens=48", "generator.stop=[' ']", "generator.server.n_ctx=2048",
        "generator.concurrency=1", "generator.timeout_s=120",
        f"cache_dir={tmp_path / 'cache'}", "mlflow.enabled=false",
    )
    result = run_system(cfg)
    records = result.records
    assert len(records) == 2
    for rec in records:
        raw = rec.get("raw_response", rec["response"])
        assert "error" not in rec, rec.get("error")
        # the old code never sent stop: SmolLM2 answers in sentences, with spaces
        assert " " not in raw.strip() and rec["generation"]["finish_reason"] == "stop", rec


# -- 6: client defaults follow the server kind -----------------------------------------------------
def test_client_defaults_follow_vllm_whichever_way_it_is_selected(compose_cfg, fake_vllm):
    from ragsweep.judge.llm_judge import Judge
    from ragsweep.rag.generator.servers.defaults import client_defaults

    swapped = compose_cfg("server@generator.server=vllm", "generator.server.model=fake/generator")
    srv = VLLMServer(model="fake/generator", startup_timeout_s=20)
    fake_vllm.append(srv)
    srv.start()
    client = build_client(swapped.generator, srv, progress=False)
    assert (client.concurrency, client.timeout_s) == (32, 300.0)
    judge = Judge.from_spec(compose_cfg("evaluator=llm", "server@evaluator.judge.server=vllm").evaluator.judge)
    judge._server = srv  # the judge's own server would be another vLLM: the client is what counts here
    judge.start()
    try:
        assert judge._client.concurrency == 32
    finally:
        judge._client.close()
        judge._client = None
    # llama.cpp keeps one request at a time; a number in the config still wins
    assert client_defaults(type("S", (), {"kind": "llamacpp"})()) == {"concurrency": 1, "timeout_s": 120.0}
    mine = compose_cfg("server@generator.server=vllm", "generator.concurrency=4")
    assert build_client(mine.generator, srv, progress=False).concurrency == 4
