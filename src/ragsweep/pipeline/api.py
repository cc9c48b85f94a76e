"""ragsweep from Python: one system (:func:`run`) and a sweep (:func:`sweep`), on the same configs,
overrides and MLflow store as the ``ragsweep`` command. Reached as ``ragsweep.run`` and
``ragsweep.sweep``; ``ragsweep.results`` and ``ragsweep.compare`` read what they logged
(:mod:`ragsweep.analysis.results`). docs/python.md is the guide.

Why a sweep runs the CLI in a child process: Hydra's compose API (what :func:`run` uses) builds
one config and cannot launch a multirun, and Hydra's own multirun entry (``hydra.main`` with
``-m``) takes over the calling process: it installs its job logging on the root logger, changes
the working directory where configured, registers ``atexit`` handlers, and ragsweep's sweep
callback sets environment variables and signal handlers for the sweep's shared model server. In a
notebook that state would outlive the sweep. A child ``python -m ragsweep.pipeline.cli -m ...``
is exactly the command line's sweep, with the launcher and sweeper plugins (joblib, Ray,
submitit, Optuna, halving) chosen by the same overrides, and leaves the caller as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ragsweep.errors import ConfigError, RagsweepError
from ragsweep.pipeline.sweep import RESULT_ENV  # where the sweep callback says which parent run it made


def as_overrides(overrides: str | Sequence[str] | Mapping[str, Any] | None) -> list[str]:
    """Hydra overrides from what a Python user writes: ``"retriever=bm25 retriever.top_k=4"``, a
    list of ``key=value`` strings, or a mapping ``{"retriever": "bm25", "retriever.top_k": 4}``
    (a list or tuple value is a swept choice: ``{"retriever": ["bm25", "tfidf"]}``)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        return overrides.split()
    if isinstance(overrides, Mapping):
        out = []
        for key, value in overrides.items():
            if isinstance(value, (list, tuple)):
                value = ",".join(_text(v) for v in value)
            out.append(f"{key}={_text(value)}")
        return out
    bad = [o for o in overrides if not isinstance(o, str) or "=" not in o.lstrip("~")]
    if bad:
        raise ConfigError(f"overrides: {bad[0]!r} is not a Hydra override; write key=value (e.g. 'retriever.top_k=4')")
    return list(overrides)


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Run:
    """One system's run: what :func:`run` returns.

    - ``metrics``: a DataFrame indexed by metric name, columns ``mean``, ``ci_low``, ``ci_high``
      (the 95% bootstrap interval over questions) and ``n`` (questions the metric is defined for);
    - ``questions``: one row per question (:func:`ragsweep.analysis.results.question_frame`): the
      question, the answer, every per-question metric, ``failure`` / ``failed``;
    - ``values``: every number the run logged (counters and seconds too), as a dict;
    - ``run_id``, ``experiment``, ``tracking_uri``: where MLflow has it (None with ``mlflow.enabled=false``);
    - ``records_path``: the records file (RAGChecker's schema) among the run's artifacts.
    """

    name: str
    run_id: str | None
    experiment: str | None
    tracking_uri: str | None
    records_path: str | None
    values: dict[str, float]
    records: list[dict[str, Any]] = field(repr=False, default_factory=list)
    skipped: bool = False

    @property
    def metrics(self):
        from ragsweep.analysis.results import interval_frame

        return interval_frame(self.values)

    @property
    def questions(self):
        from ragsweep.analysis.results import question_frame

        return question_frame(self.records)

    def __getitem__(self, metric: str) -> float:
        """``run["ragchecker/overall/f1"]``: the metric's mean."""
        return self.values[metric]

    def _repr_html_(self) -> str:  # a notebook shows the run and its metrics with their intervals
        import html

        head = f"<p><b>{html.escape(self.name)}</b>: MLflow run <code>{self.run_id}</code> in experiment " \
               f"<code>{html.escape(str(self.experiment))}</code></p>"
        return head + self.metrics.to_html(float_format=lambda x: f"{x:.4g}")


@contextmanager
def _quiet(progress: bool) -> Iterator[None]:
    from ragsweep.pipeline.summary import silenced

    if progress:
        yield
        return
    with silenced():
        yield


def compose(overrides: str | Sequence[str] | Mapping[str, Any] | None = None):
    """The config ``ragsweep OVERRIDES`` would run (Hydra's compose API over the packaged config
    tree), without running it. A swept value (``a,b``) is an error here: that is :func:`sweep`."""
    from ragsweep.conf import compose as compose_tree

    ovs = as_overrides(overrides)
    swept = [o for o in ovs if "," in o.partition("=")[2] and not o.partition("=")[2].startswith(("[", "{", "'", '"'))]
    if swept:
        raise ConfigError(f"{swept[0]!r} sweeps several values: ragsweep.run runs one system; use ragsweep.sweep")
    return compose_tree(ovs)


def run(overrides: str | Sequence[str] | Mapping[str, Any] | None = None, *, progress: bool = True) -> Run:
    """Run one RAG system, as ``ragsweep OVERRIDES`` does, and return its :class:`Run`.

    ``overrides``: Hydra overrides, as on the command line (``"retriever=tfidf retriever.top_k=2"``),
    as a list, or as a mapping (:func:`as_overrides`). The run is logged to MLflow exactly like the
    command's (``mlflow.tracking_uri``, ``experiment_name``), through the same shared cache.
    ``progress=False``: no progress bars (like ``ragsweep -q``). Raises
    :class:`ragsweep.errors.RagsweepError` (a :class:`~ragsweep.errors.ConfigError` for a bad
    override) with the message the command would print.

    >>> r = ragsweep.run("generator=none dataset.limit=5")      # doctest: +SKIP
    >>> r.metrics.loc["retrieval/recall_at_k"]                    # doctest: +SKIP
    """
    from ragsweep.pipeline.cli import _quiet_libraries
    from ragsweep.pipeline.system import run_system

    cfg = compose(overrides)
    _quiet_libraries()
    with _quiet(progress):
        res = run_system(cfg)
    return Run(name=res.name, run_id=res.run_id, experiment=res.experiment_name, tracking_uri=res.tracking_uri,
               records_path=res.records_uri, values={k: float(v) for k, v in res.items() if _number(v)},
               records=list(res.records), skipped=res.skipped)


def _number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return not isinstance(v, bool)


@dataclass
class Sweep:
    """A finished sweep: its MLflow parent run, its experiment and store, and what it printed.
    ``results()`` is :func:`ragsweep.results` for this sweep (one row per system x question)."""

    parent_run_id: str | None
    experiment: str
    tracking_uri: str
    output: str = field(repr=False, default="")

    def results(self):
        from ragsweep.analysis.results import results

        return results(self.experiment, run=self.parent_run_id, tracking_uri=self.tracking_uri)

    def runs(self):
        """One row per system: its run id, name, short params and every metric (the report's frame)."""
        from ragsweep.analysis.results import sweep_runs

        return sweep_runs(self.experiment, self.parent_run_id, self.tracking_uri)


def sweep(overrides: str | Sequence[str] | Mapping[str, Any] | None = None, *, launcher: str | None = None,
          sweeper: str | None = None, cwd: str | os.PathLike | None = None, timeout: float | None = None,
          echo: bool = True) -> Sweep:
    """Run a sweep, as ``ragsweep -m OVERRIDES`` does (the same Hydra launcher, sweeper, MLflow
    parent run with one child per system, shared model server, resume after a kill), and return
    its :class:`Sweep` once every job ended.

    ``overrides``: as for :func:`run`, with swept values (``"retriever=bm25,tfidf"``, or
    ``{"retriever": ["bm25", "tfidf"]}``) or ``+experiment=NAME``. ``launcher`` / ``sweeper``:
    Hydra's plugin names (``launcher="joblib"`` is ``hydra/launcher=joblib``). The sweep runs in a
    child process (see the module doc for why) in ``cwd`` (default: the current directory, where
    the default store ``mlruns/`` is); ``echo``: print its summary table. Raises
    :class:`ragsweep.errors.RagsweepError` with the end of its output when it fails.
    """
    ovs = as_overrides(overrides)
    ovs += [f"hydra/launcher={launcher}"] if launcher else []
    ovs += [f"hydra/sweeper={sweeper}"] if sweeper else []
    src = str(Path(__file__).resolve().parents[2])  # the ragsweep this process runs, not another install
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "sweep.json"
        env = {**os.environ, RESULT_ENV: str(result),
               "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        cmd = [sys.executable, "-m", "ragsweep.pipeline.cli", "-q", "-m", *ovs]
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise RagsweepError(f"ragsweep.sweep: the sweep ran past timeout={timeout}s and was stopped") from exc
        output = proc.stdout + ("\n" + proc.stderr if proc.stderr.strip() else "")
        if proc.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise RagsweepError(f"ragsweep.sweep: `ragsweep -m {' '.join(ovs)}` failed (exit {proc.returncode}):\n{tail}")
        info = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
        if not info.get("parent_run_id"):
            raise RagsweepError("ragsweep.sweep: the sweep logged no MLflow parent run, so there is nothing to read back "
                                "(mlflow.enabled=false?); its output:\n" + output.strip()[-2000:])
    if echo and proc.stdout.strip():
        print(proc.stdout.strip())
    uri = info["tracking_uri"]
    if uri.startswith("sqlite:///") and not os.path.isabs(uri[len("sqlite:///"):]):  # relative to the sweep's cwd
        uri = "sqlite:///" + str(Path(cwd or ".").resolve() / uri[len("sqlite:///"):])
    return Sweep(info.get("parent_run_id"), info["experiment"], uri, output)

