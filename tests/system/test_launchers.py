"""A 2-job sweep under each Hydra launcher: one MLflow parent, two FINISHED children, one shared
llama.cpp server that every job talks to and that is gone afterwards.

Each test runs ``python -m ragsweep.pipeline.cli -m ...`` in a scratch directory with its own cache, its
own MLflow store and its own server registry (``RAGSWEEP_STATE_DIR``), on a 3-document corpus.
The submitit and Ray tests skip when their Hydra plugin is not installed (``.[slurm]``,
``.[ray]``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from support import SRC, answered_requests
from support.processes import descendants
from support.ray_cluster import local_cluster
from ragsweep.rag.generator.server import LlamaCppServer, pid_alive

PY = sys.executable


# -- helpers shared with test_sweep_resume.py ---------------------------------------------------
def tiny_dataset(tmp_path: Path, n_queries: int = 2) -> list[str]:
    corpus = tmp_path / "corpus.jsonl"
    docs = [
        ("d1", "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair."),
        ("d2", "Mount Everest is the highest mountain above sea level, in the Himalayas."),
        ("d3", "The Nile is a major north-flowing river in northeastern Africa."),
    ]
    corpus.write_text("\n".join(json.dumps({"doc_id": d, "text": t}) for d, t in docs) + "\n")
    qs = [
        {"query_id": "q1", "query": "When was the Eiffel Tower completed?", "gt_answer": "In 1889.", "relevant_doc_ids": ["d1"]},
        {"query_id": "q2", "query": "What is the highest mountain?", "gt_answer": "Mount Everest.", "relevant_doc_ids": ["d2"]},
        {"query_id": "q3", "query": "Where does the Nile flow?", "gt_answer": "North, in Africa.", "relevant_doc_ids": ["d3"]},
        {"query_id": "q4", "query": "Where is the Eiffel Tower?", "gt_answer": "In Paris.", "relevant_doc_ids": ["d1"]},
    ][:n_queries]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in qs) + "\n")
    return ["dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={queries}"]


def sweep_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache"),
        "RAGSWEEP_STATE_DIR": str(tmp_path / "state"),  # this test's own server registry
        **extra,
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAGSWEEP_SWEEP_FILE", None)
    return env


def sweep_cmd(*args: str) -> list[str]:
    return [PY, "-m", "ragsweep.pipeline.cli", "-m", *args]


def mlflow_runs(tmp_path: Path, experiment: str = "default"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"], max_results=1000)


def parents_and_children(runs):
    parents = [r for r in runs if r.data.tags.get("ragsweep.role") == "parent"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def llama_server_pids(port: int | None = None) -> list[int]:
    """Live llama.cpp server processes, ``llama_cpp.server`` or llama.cpp's own ``llama-server``
    (on ``port`` when given)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        argv = [a.decode("utf-8", "replace") for a in argv if a]
        if "llama_cpp.server" not in argv and not (argv and argv[0].endswith("/llama-server")):
            continue
        if port is not None and not any(a == str(port) and b == "--port" for b, a in zip(argv, argv[1:])):
            continue
        if pid_alive(int(d)):
            found.append(int(d))
    return found


def registry_entries(state_dir: Path) -> list[dict]:
    out = []
    for f in sorted((state_dir / "servers").glob("*.json")):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            pass
    return out


def listening_addresses(pids: set[int]) -> set[str]:
    """Local addresses of the TCP sockets in LISTEN state owned by ``pids`` (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    addrs = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A = LISTEN
                continue
            hexip, hexport = f[1].split(":")
            raw = bytes.fromhex(hexip)
            if v6:  # four little-endian 32-bit words
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                import ipaddress

                ip = ipaddress.IPv6Address(raw)
                ip_s = str(ip.ipv4_mapped) if ip.ipv4_mapped else str(ip)
            else:
                ip_s = ".".join(str(b) for b in raw[::-1])
            addrs.add(f"{ip_s}:{int(hexport, 16)}")
    return addrs


def is_loopback(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0]
    return host.startswith("127.") or host == "::1"


def check_one_shared_server(tmp_path: Path, sweep_dir: Path, launcher_pid: int, n_requests: int) -> None:
    """One llama.cpp server for the sweep (its processes: generator.server.replicas), started by the
    launching process, used by every job, gone."""
    info = json.loads((sweep_dir / ".ragsweep_sweep.json").read_text())
    server = info["server"]
    pid = int(server["pid"])
    ports = sorted(urlsplit(u).port for u in server["base_urls"])
    assert urlsplit(server["base_url"]).port in ports and len(ports) == LlamaCppServer().replicas
    logs = sorted((tmp_path / "state" / "servers" / "logs").glob("*.log"))
    # ManagedServer names its log <kind>-<stamp>-<owner pid>-<port>.log: exactly the sweep's server
    # processes were started under this test's registry, by the launching process, on the ports the
    # jobs were given
    names = [re.fullmatch(r"llamacpp-\d{8}-\d{6}-(\d+)-(\d+)\.log", p.name) for p in logs]
    assert all(names) and {int(m.group(1)) for m in names} == {launcher_pid}, [p.name for p in logs]
    assert sorted(int(m.group(2)) for m in names) == ports, [p.name for p in logs]
    # every generation of every job went to those processes
    assert sum(answered_requests(p.read_text(errors="replace")) for p in logs) == n_requests
    assert not pid_alive(pid), f"the sweep's server pid {pid} is still running"
    assert all(llama_server_pids(port) == [] for port in ports)
    assert registry_entries(tmp_path / "state") == []


def check_parent_and_children(tmp_path: Path, n_children: int, key: str, values: set[str]):
    parents, children = parents_and_children(mlflow_runs(tmp_path))
    assert len(parents) == 1, [(r.info.run_id, r.info.status) for r in parents]
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert len(children) == n_children
    assert all(c.info.status == "FINISHED" for c in children), [c.info.status for c in children]
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(c.data.tags.get("ragsweep.role") == "child" for c in children)
    assert {c.data.params[key] for c in children} == values
    assert len({c.data.tags["ragsweep.system_key"] for c in children}) == n_children
    return parent, children


LAUNCHERS = {
    "joblib": (
        "hydra_plugins.hydra_joblib_launcher",
        ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        {},
    ),
    "submitit_local": (
        "hydra_plugins.hydra_submitit_launcher",
        ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
        {},
    ),
    "ray": (
        "hydra_plugins.hydra_ray_launcher",
        [
            "hydra/launcher=ray",
            "hydra.launcher.ray.init.address=null",  # start a local instance, never join a cluster
            "+hydra.launcher.ray.init.include_dashboard=false",
            "+hydra.launcher.ray.init.num_cpus=2",
        ],
        # Ray resolves a node IP of 127.0.0.1 to the machine's routable address and then listens
        # on all interfaces; with this it keeps the node on loopback (every gRPC server on 127.0.0.1)
        {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    ),
}


def _plugin_or_skip(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[slurm]' / '.[ray]')")
    if module.endswith("ray_launcher") and importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install -e '.[ray]')")


@pytest.mark.slow
@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_two_job_sweep_shares_one_server(tmp_path, launcher):
    module, launcher_args, extra_env = LAUNCHERS[launcher]
    _plugin_or_skip(module)
    sweep_dir = tmp_path / "multirun"
    cmd = sweep_cmd(
        *tiny_dataset(tmp_path),
        "retriever.top_k=1,2",
        "generator.max_tokens=8",
        "evaluator=none",  # evaluation is not what this test is about (and costs a model load per job)
        f"hydra.sweep.dir={sweep_dir}",
        *launcher_args,
    )
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=sweep_env(tmp_path, **extra_env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    seen: set[int] = set()
    listening: set[str] = set()
    deadline = time.monotonic() + 400
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"the {launcher} sweep did not finish in time")
            if launcher == "ray":  # everything the sweep (Ray included) listens on
                tree = descendants(proc.pid)
                seen |= tree
                listening |= listening_addresses(tree)
            time.sleep(0.5)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out[-4000:]

    _, children = check_parent_and_children(tmp_path, 2, "top_k", {"1", "2"})
    # the terminal: the sweep's table at the end, one row per system (and, in-process, one line per job)
    table = out[out.index("\nsweep "):]
    assert "system" in table and "status" in table and "recall_at_k" in table, out[-3000:]
    for c in children:
        assert f"{c.info.run_name}  FINISHED" in table, table
        if launcher == "basic":
            assert f"ragsweep: {c.info.run_name}  FINISHED" in out
    # an empty cache: each job generated its 2 answers itself, through the shared server
    assert [c.data.metrics["generator/calls"] for c in children] == [2, 2]
    check_one_shared_server(tmp_path, sweep_dir, proc.pid, n_requests=4)

    if launcher == "ray":
        assert listening, "saw no listening socket of the Ray instance"
        assert all(is_loopback(a) for a in listening), sorted(listening)
        left = [p for p in seen if p != proc.pid and pid_alive(p)]
        deadline = time.monotonic() + 20  # Ray's daemons exit right after ray.shutdown
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = [p for p in left if pid_alive(p)]
        assert not left, f"processes of the Ray instance still running: {left}"


def test_jobs_on_another_node_do_not_attach_to_the_sweeps_loopback_server(tmp_path, monkeypatch):
    """SLURM / a Ray cluster: the sweep's server listens on the launching node's 127.0.0.1."""
    import socket

    from ragsweep.pipeline import sweep

    info = {"parent_run_id": "p", "server": {"spec": "s", "base_url": "http://127.0.0.1:1/v1", "model_name": "m"}}
    path = tmp_path / ".ragsweep_sweep.json"
    monkeypatch.setenv(sweep.ENV_SWEEP_FILE, str(path))
    for host, attached in ((socket.gethostname(), True), ("another-node", False), (None, True)):
        server = {**info["server"], **({"host": host} if host else {})}
        path.write_text(json.dumps({**info, "server": server}))
        got = sweep.current()
        assert got["parent_run_id"] == "p"
        assert (got["server"] is not None) is attached, host


def test_no_shared_server_when_jobs_run_on_other_machines():
    from omegaconf import OmegaConf

    from ragsweep.pipeline.sweep import runs_remotely

    def cfg(launcher):
        return OmegaConf.create({"hydra": {"launcher": launcher}})

    assert runs_remotely(cfg({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"}))
    assert runs_remotely(cfg({"_target_": "hydra_plugins.hydra_ray_launcher.ray_local_launcher.RayLocalLauncher", "ray": {"init": {"address": "auto"}}}))
    assert not runs_remotely(cfg({"_target_": "hydra_plugins.hydra_ray_launcher.ray_local_launcher.RayLocalLauncher", "ray": {"init": {"address": None}}}))
    assert not runs_remotely(cfg({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"}))
    assert not runs_remotely(cfg({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}))


def test_llm_judge_attaches_to_the_sweeps_shared_server(compose_cfg):
    """evaluator=llm whose judge server equals the sweep's generator server: no second server."""
    from hydra.utils import instantiate

    from ragsweep.judge.llm_judge import Judge
    from ragsweep.pipeline.judging import share_judge_server
    from ragsweep.pipeline.sweep import AttachedServer, server_spec

    cfg = compose_cfg("evaluator=llm")
    shared = AttachedServer({"spec": server_spec(cfg.generator.server), "base_url": "http://127.0.0.1:9/v1", "model_name": "smollm2"})
    evaluator = instantiate(cfg.evaluator)
    assert share_judge_server(cfg, evaluator, shared)
    assert isinstance(evaluator.config.judge, Judge) and evaluator.config.judge.server is shared
    # a judge on another server (or no sweep server) keeps its own
    other = AttachedServer({"spec": "something-else", "base_url": "http://127.0.0.1:9/v1", "model_name": "x"})
    evaluator = instantiate(cfg.evaluator)
    assert not share_judge_server(cfg, evaluator, other) and not share_judge_server(cfg, evaluator, None)


# -- a real (local) Ray cluster: a head and a worker process on 127.0.0.1 ---------------------------
@pytest.mark.slow
def test_sweep_on_a_local_ray_cluster_head_and_worker(tmp_path):
    """``ray start --head`` + ``ray start --address`` (two nodes of one CPU each, 127.0.0.1), then a
    2-system sweep through ``hydra/launcher=ray`` joining that cluster: the two jobs run at the same
    time (one per node), share the cache on a shared path, log to one MLflow parent; the test stops
    exactly the cluster's processes (found by its own port and temp dir), never ``ray stop``."""
    _plugin_or_skip("hydra_plugins.hydra_ray_launcher")
    src = str(SRC)
    env = sweep_env(tmp_path, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    # a ~/.ray/auth_token left by an earlier local ray.init (another test) makes the worker's join
    # fail with InvalidAuthToken: this cluster gets a home of its own
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir(exist_ok=True)
    # started in tmp_path: the jobs' working directory (relative paths resolve there too)
    with local_cluster(tmp_path, env) as address:
        sweep_dir = tmp_path / "multirun"
        cmd = sweep_cmd(
            *tiny_dataset(tmp_path),
            "retriever.top_k=1,2",
            "generator.max_tokens=8",
            "evaluator=none",
            f"hydra.sweep.dir={sweep_dir}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlruns/mlflow.db",  # one store for every node's jobs
            f"mlflow.artifact_location={tmp_path}/mlruns/artifacts",
            "hydra/launcher=ray",
            f"hydra.launcher.ray.init.address={address}",
            # hydra-ray-launcher 1.2.2 sets object_store_memory, which ray.init refuses when joining a cluster
            "+hydra.launcher.ray.init.object_store_memory=null",
        )
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        _, children = check_parent_and_children(tmp_path, 2, "top_k", {"1", "2"})
        # jobs on a cluster serve their own model (the sweep's loopback server is not theirs): each
        # generated its 2 answers itself, into the one cache on the shared path
        assert [c.data.metrics["generator/calls"] for c in children] == [2, 2]
        assert (tmp_path / "cache").is_dir()
        a, b = sorted(children, key=lambda c: c.info.start_time)
        assert b.info.start_time < a.info.end_time, "the two jobs did not run at the same time on the two nodes"
