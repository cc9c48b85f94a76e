"""``ragsweep-reproduce``: every diagnosis of both papers in one command, resumable, on one page.

    ragsweep-reproduce [--only NAME,...] [--retrieval-only] [--limit N] [--generation-limit N] [--dry-run] [--out DIR]
                       [--cache-dir DIR] [--store DIR] [OVERRIDE ...]

Runs the papers' ready sweeps (:data:`RETRIEVAL` first: minutes, and the judge's checks they cache
are the ones the generator side reuses; then :data:`GENERATION`), each as ``ragsweep -m
+experiment=NAME`` does (a child process: the same Hydra sweep, parent run, shared model server and
resume), all with one cache and one MLflow store; then reads each with ``ragsweep-report`` (in this
process, the same directions and verdicts) and writes one page, ``reproduce.md``: every direction,
its verdict, n, the deciding step's interval, and the command that reproduces it.

Resumable: ``state.json`` in ``--out`` records each sweep (by name and overrides) as it starts and
ends. A run killed and started again with the same command skips the sweeps that finished (and
were reported), and a sweep it had started resumes as ``ragsweep -m`` does (finished systems
skipped, the rest from the cache).

One line per sweep on the terminal (its output goes to ``logs/NAME.log``), each with the time left
for the whole set (:mod:`ragsweep.pipeline.reproduce_estimate`): a retrieval-only sweep by the
seconds per system and question measured on those that finished, here or in an earlier run; a
generating one system by system by the context each reads (``retriever.top_k * chunker.size``
tokens, none for ``prompt=no_context``), rescaled by measured / predicted once generating sweeps
finished; the answers already in the shared cache are counted first and not estimated as generated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ragsweep.pipeline import reproduce_page as page
from ragsweep.pipeline.reproduce_estimate import (cached_answers, contexts_of, describe_rates, estimate_s, gen_scale,
                                                  rates, time_left)
from ragsweep.pipeline.reproduce_page import duration

PROG = "ragsweep-reproduce"
#: the retriever side of RAGChecker App. F Figs. 6, 7, 10, retrieval only over every question
RETRIEVAL = ("ragchecker_topk_retrieval", "ragchecker_chunk_size_retrieval", "ragchecker_overlap_retrieval")
#: the generator side: RAGChecker App. F Figs. 6, 7, 10, 8 and RAGBench's case study (Sec. 3.5)
GENERATION = ("ragchecker_topk", "ragchecker_chunk_size", "ragchecker_overlap", "ragchecker_prompt", "ragbench_case_study")
@dataclass
class Sweep:
    """One planned sweep: an experiment config and the overrides every sweep of the run gets."""

    name: str
    retrieval_only: bool
    systems: int
    questions: int | None
    overrides: list[str] = field(default_factory=list)  # shown in the commands (--limit, the user's)
    hidden: list[str] = field(default_factory=list)  # the shared stores: passed, not shown
    contexts: list[int] | None = None  # each system's context tokens per question (None: not known, the flat rate)
    cached: list[int] | None = None  # each system's answers already in the cache when it started (None: not known)

    @property
    def side(self) -> str:
        return "retrieval" if self.retrieval_only else "generation"

    @property
    def key(self) -> str:
        return " ".join([self.name, *self.overrides])

    def command(self) -> str:
        return " ".join(["ragsweep -m", f"+experiment={self.name}", *self.overrides])

    def report_command(self) -> str:
        return f"ragsweep-report --experiment {self.name}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "ragsweep.pipeline.cli", "-m", f"+experiment={self.name}",
                *self.overrides, *self.hidden]


# -- planning ----------------------------------------------------------------------------------
def experiment_node(name: str) -> Any:
    from omegaconf import OmegaConf

    from ragsweep.conf import CONF_DIR

    path = CONF_DIR / "experiment" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
        raise SystemExit(f"{PROG}: error: --only: no experiment config {name!r}; known: {', '.join(known)}")
    return OmegaConf.load(path)


def split_values(value: Any) -> list[str]:
    """A sweeper value's choices: ``"5,10,20"`` -> 3; commas inside brackets or quotes do not split."""
    text, out, depth, quote, cur = str(value), [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    return [v.strip() for v in [*out, cur] if v.strip()]


def choices_of(node: Any) -> dict[str, list[str]]:
    """Each of the sweep's ``hydra.sweeper.params`` with its choices."""
    from omegaconf import OmegaConf

    params = OmegaConf.select(node, "hydra.sweeper.params")
    params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
    return {str(k): split_values(v) for k, v in params.items()}


def systems_of(node: Any) -> int:
    """Jobs of the sweep: the product of the choices of its ``hydra.sweeper.params``."""
    return math.prod(len(v) for v in choices_of(node).values())


def is_retrieval_only(node: Any) -> bool:
    """Its defaults say ``override /generator: none``: nothing is generated, no model server runs."""
    from omegaconf import OmegaConf

    defaults = OmegaConf.to_container(node.get("defaults") or [], resolve=False)
    return any(isinstance(d, dict) and d.get("override /generator") == "none" for d in defaults)


def questions_of(name: str, node: Any, limit: int | None) -> int | None:
    """Questions each system answers: ``--limit``, else the config's ``dataset.limit``, else the data
    set's size (loaded: the built-in ones take a second), None where it cannot be told."""
    from omegaconf import OmegaConf

    own = limit or OmegaConf.select(node, "dataset.limit")
    return int(own) if own else _dataset_size(name)


_SIZES: dict[str, int | None] = {}


def _dataset_size(name: str) -> int | None:
    try:
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        from ragsweep.conf import compose

        node = compose([f"+experiment={name}"]).dataset
        key = OmegaConf.to_yaml(node)
        if key not in _SIZES:  # the sweeps share their data sets: each loaded once
            _SIZES[key] = len(instantiate(node).load().queries)
        return _SIZES[key]
    except Exception:  # noqa: BLE001 - the estimate only: unknown, never an error
        return None


def plan(only: Sequence[str] | None = None, retrieval_only: bool = False, limit: int | None = None,
         overrides: Sequence[str] = (), hidden: Sequence[str] = (), generation_limit: int | None = None) -> list[Sweep]:
    """The sweeps to run, in order: retrieval side first, then the generator side. ``generation_limit``
    replaces ``limit`` for the sweeps that generate (the retriever-only ones take minutes at full size)."""
    names = list(only) if only else [*RETRIEVAL, *GENERATION]
    out = []
    for name in dict.fromkeys(names):
        node = experiment_node(name)
        retro = is_retrieval_only(node)
        if retrieval_only and not retro:
            continue
        own = limit if retro else (generation_limit or limit)
        ovs = ([f"dataset.limit={int(own)}"] if own else []) + list(overrides)
        contexts = None if retro else contexts_of(name, choices_of(node), ovs)
        out.append(Sweep(name, retro, systems_of(node), questions_of(name, node, own), ovs, list(hidden), contexts))
    if not out:
        raise SystemExit(f"{PROG}: error: nothing to run: {'--retrieval-only leaves none of ' if retrieval_only else ''}"
                         f"{', '.join(names)}")
    return out


def count_cached(sweeps: Sequence[Sweep], state: "State") -> None:
    """Each generating sweep still to run: its systems' answers already in the cache (``Sweep.cached``),
    so that the estimate counts only the rest."""
    todo = [s for s in sweeps if not (s.retrieval_only or state.done(s))]
    if todo:
        print(f"{PROG}: looking up the answers already in the cache (chunking and retrieval only, no model call) ...",
              flush=True)
    for s in todo:
        s.cached = cached_answers(s.name, choices_of(experiment_node(s.name)), [*s.overrides, *s.hidden])


# -- state: what ran, for resuming and for the page ------------------------------------------------
class State:
    """``state.json``: each sweep's entry by its key (name + overrides), written after every change."""

    def __init__(self, path: Path):
        self.path = path
        self.sweeps: dict[str, dict[str, Any]] = {}
        if path.is_file():
            try:
                self.sweeps = dict(json.loads(path.read_text(encoding="utf-8")).get("sweeps") or {})
            except (OSError, json.JSONDecodeError, AttributeError) as exc:
                raise SystemExit(f"{PROG}: error: {path} is not a state file this command wrote ({exc}); "
                                 "move it away to start over") from None

    def get(self, sweep: Sweep) -> dict[str, Any]:
        return self.sweeps.get(sweep.key) or {}

    def update(self, sweep: Sweep, **fields: Any) -> None:
        entry = {"name": sweep.name, "side": sweep.side, "systems": sweep.systems, "questions": sweep.questions,
                 "contexts": sweep.contexts, "cached": sweep.cached, "command": sweep.command(),
                 **self.get(sweep), **fields}  # "cached" as when it first started: what its wall time paid for
        self.sweeps[sweep.key] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"sweeps": self.sweeps}, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, self.path)

    def done(self, sweep: Sweep) -> bool:
        entry = self.get(sweep)
        return entry.get("status") == "finished" and "directions" in entry


# -- running ---------------------------------------------------------------------------------------
def _die_with_parent() -> None:  # pragma: no cover - in the child, before exec
    """The sweep ends when this command is killed (SIGKILL included): no sweep runs on unwatched."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_sweep(sweep: Sweep, log_path: Path, result_path: Path) -> tuple[int, dict[str, Any]]:
    """``ragsweep -m +experiment=NAME ...`` in a child process, its output to ``log_path``;
    (exit status, what the sweep says it logged: parent run id, tracking URI)."""
    from ragsweep.pipeline.sweep import RESULT_ENV

    log_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.unlink(missing_ok=True)
    src = str(Path(__file__).resolve().parents[2])  # the ragsweep this process runs
    env = {**os.environ, RESULT_ENV: str(result_path), "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    with open(log_path, "ab") as log:
        log.write(f"\n# {' '.join(sweep.argv())}\n".encode())
        log.flush()
        proc = subprocess.Popen(sweep.argv(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        try:
            rc = proc.wait()
        except BaseException:  # Ctrl-C (the sweep got it too) or SIGTERM: let the sweep stop its servers
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    info = json.loads(result_path.read_text(encoding="utf-8")) if result_path.is_file() else {}
    return rc, info


def report(sweep: Sweep, info: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """The sweep's ``ragsweep-report`` (its files under ``out/reports/NAME``), as the page's rows."""
    from ragsweep.analysis.report import build_report

    rep = build_report(info.get("tracking_uri"), sweep.name, info.get("parent_run_id"), str(out / "reports" / sweep.name))
    return page.direction_rows(rep.verdicts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # the reports read artifacts: no bars
    out = Path(args.out)
    hidden = [f"cache_dir={Path(args.cache_dir).resolve()}"] if args.cache_dir else []
    if args.store:
        store = Path(args.store).resolve()
        hidden += [f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}", f"mlflow.artifact_location={store / 'artifacts'}"]
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    sweeps = plan(only, args.retrieval_only, args.limit, args.overrides, hidden, args.generation_limit)
    state = State(out / "state.json")
    count_cached(sweeps, state)
    rate, scale = rates(state), gen_scale(state, sweeps)
    total = sum(estimate_s(s, rate, scale) for s in sweeps if not state.done(s))
    cached = sum(sum(s.cached or ()) for s in sweeps)  # None for the finished ones (count_cached)
    from_cache = f" ({cached:,} answers already in the cache)" if cached else ""
    print(f"{PROG}: {len(sweeps)} sweep(s), {sum(s.systems for s in sweeps)} systems; about {duration(total)}{from_cache} "
          f"(s per system and question: {describe_rates(rate, scale, sweeps)}); state: {state.path}", flush=True)
    if args.dry_run:
        for i, s in enumerate(sweeps, 1):
            status = "finished before: skipped" if state.done(s) else f"about {duration(estimate_s(s, rate, scale))}"
            if s.contexts:
                status += f" (context {min(s.contexts):,}-{max(s.contexts):,} tokens per question)"
            if s.cached:
                status += f"; {sum(s.cached):,} of {s.systems * (s.questions or 0):,} answers already in the cache"
            print(f"[{i}/{len(sweeps)}] {s.name} ({s.side}): {s.systems} systems x {s.questions or '?'} questions, "
                  f"{status}\n    {s.command()}\n    {s.report_command()}")
        return 0
    failed = 0
    t_all = time.monotonic()
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for i, s in enumerate(sweeps, 1):
            head = f"[{i}/{len(sweeps)}] {s.name}: {s.systems} systems x {s.questions or '?'} questions"
            if state.done(s):
                print(f"{head}: finished before (parent run {state.get(s).get('parent_run_id')}), skipped; "
                      f"about {duration(time_left(sweeps, state))} left", flush=True)
                continue
            print(f"{head} ... ", end="", flush=True)
            failed += not one_sweep(s, sweeps, state, out)
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; run the same command again to resume (finished sweeps are skipped)", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    path = page.write(out, sweeps, state, " ".join([PROG, *(argv if argv is not None else sys.argv[1:])]),
                      time.monotonic() - t_all)
    print(f"{PROG}: {len(sweeps) - failed} of {len(sweeps)} sweeps reported; every direction on one page: {path}")
    return 1 if failed else 0


def one_sweep(s: Sweep, sweeps: Sequence[Sweep], state: State, out: Path) -> bool:
    """Run (or resume) one sweep and report it; its line ends with the outcome and the time left."""
    entry = state.get(s)
    info = {k: entry[k] for k in ("parent_run_id", "tracking_uri") if entry.get(k)}
    if entry.get("status") != "finished":  # a finished sweep whose report failed: only the report again
        before = float(entry.get("spent_s") or 0.0)  # earlier attempts that were interrupted
        state.update(s, status="running", started=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
        t0 = time.monotonic()
        try:
            rc, info = run_sweep(s, out / "logs" / f"{s.name}.log", out / "logs" / f"{s.name}.result.json")
        except BaseException:  # Ctrl-C, SIGTERM: its time so far counts when it is resumed (SIGKILL: lost)
            state.update(s, status="interrupted", spent_s=round(before + time.monotonic() - t0, 1))
            raise
        wall = before + time.monotonic() - t0
        if rc != 0 or not info.get("parent_run_id"):
            state.update(s, status="failed", exit=rc, wall_s=round(wall, 1))
            print(f"FAILED (exit {rc}); its output: {out / 'logs' / f'{s.name}.log'}", flush=True)
            return False
        state.update(s, status="finished", exit=0, wall_s=round(wall, 1), ended=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     **info)
    try:
        rows = report(s, info, out)
    except Exception as exc:  # noqa: BLE001 - one sweep's report never stops the others
        state.update(s, report_error=f"{type(exc).__name__}: {exc}")
        print(f"finished, but its report failed: {exc}", flush=True)
        return False
    state.update(s, directions=rows, report_error=None)
    wall = state.get(s).get("wall_s")
    per = f"{float(wall) / s.systems:.0f} s/system" if wall else "-"
    print(f"done in {duration(wall)} ({per}); about {duration(time_left(sweeps, state))} left", flush=True)
    return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description="Run every diagnosis of RAGChecker (App. F) and RAGBench "
                                 "(Sec. 3.5), retriever and generator side, and write every direction's verdict on one page.")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every sweep (e.g. generator.server.replicas=2)")
    ap.add_argument("--only", help=f"comma-separated experiment configs (default: {', '.join([*RETRIEVAL, *GENERATION])})")
    ap.add_argument("--retrieval-only", action="store_true", help="only the sweeps that generate nothing (minutes, no model server)")
    ap.add_argument("--limit", type=int, help="dataset.limit for every sweep (questions per system)")
    ap.add_argument("--generation-limit", type=int, help="dataset.limit for the sweeps that generate only, in place of "
                    "--limit (e.g. the retriever side at its full 300 questions, the generator side at 20)")
    ap.add_argument("--dry-run", action="store_true", help="list the sweeps, their systems and commands, and the estimate; run nothing")
    ap.add_argument("--out", default="reports/reproduce", help="the page, state.json, logs/ and reports/ (default: reports/reproduce)")
    ap.add_argument("--cache-dir", help="the cache every sweep shares (default: the config's cache_dir)")
    ap.add_argument("--store", help="the MLflow store folder every sweep logs to: DIR/mlflow.db + DIR/artifacts (default: mlruns/)")
    args = ap.parse_args(argv)
    for flag, value in (("--limit", args.limit), ("--generation-limit", args.generation_limit)):
        if value is not None and value < 1:
            ap.error(f"{flag} must be a positive number of questions, got {value}")
    return args


if __name__ == "__main__":
    sys.exit(main())
