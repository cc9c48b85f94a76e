"""``ragsweep-questions``: no questions yet? A question set from a dataset's documents.

    ragsweep-questions dataset=files dataset.path=~/docs n=100          # the embedded model, offline
    ragsweep-questions dataset=clapnq_longdoc n=50 generator=vllm     # any dataset, any model server

A Hydra app over the same conf/ tree as ``ragsweep`` (conf/questions.yaml adds its own keys to
conf/config.yaml). It writes the questions file (``out``), the dropped candidates beside it, and an
MLflow run of its own (experiment ``questions``) with the counts; docs/questions.md.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from ragsweep.errors import DataError, RagsweepError

log = logging.getLogger("ragsweep")
PROG = "ragsweep-questions"


@dataclass
class Made:
    out: Path
    counts: dict[str, int]
    report: str
    run_id: str | None


def _corpus(cfg: DictConfig) -> Any:
    """The dataset's documents (its questions, if any, are not used)."""
    from hydra.utils import instantiate

    from ragsweep.pipeline.summary import quiet

    loader = instantiate(cfg.dataset)
    if quiet() and hasattr(loader.config, "progress"):
        loader.config.progress = False
    return loader.load_corpus() if hasattr(loader, "load_corpus") else loader.load()


def _checker(cfg: DictConfig) -> tuple[Any, Any, Any]:
    """The evaluator's extractor and checker (and its judge, to close); Nones with evaluator=none."""
    ev = cfg.get("evaluator")
    if ev is None or ev.get("name") == "none" or not ev.get("_target_"):
        return None, None, None
    from ragsweep.judge import components
    from ragsweep.judge.llm_judge import Judge

    judge = Judge.from_spec(ev.get("judge"))
    return components.build("extractor", ev.extractor, judge), components.build("checker", ev.checker, judge), judge


def next_command(cfg: DictConfig, out: Path) -> str:
    """The ``ragsweep`` command that runs a retrieval-only system over the set just written."""
    try:
        from hydra.core.hydra_config import HydraConfig

        given = [o for o in HydraConfig.get().overrides.task if o.split("=")[0].lstrip("+~").startswith("dataset")]
    except ValueError:  # not under Hydra (a test calling make_set): the dataset's name
        given = [f"dataset={cfg.dataset.get('name')}"]
    if "queries" not in cfg.dataset:
        return (f"dataset={cfg.dataset.get('name')} takes no questions file: export its documents as JSONL and use "
                f"dataset=jsonl dataset.corpus=CORPUS.jsonl dataset.queries={out}")
    given = [o for o in given if not o.startswith("dataset.queries=")]
    return "ragsweep " + " ".join([*given, f"dataset.queries={out}", "generator=none"])


def make_set(cfg: DictConfig) -> Made:
    """The whole command (see the module docstring); a RagsweepError for anything a user fixes."""
    from ragsweep.corpus.sampling import draw
    from ragsweep.pipeline.config import flatten
    from ragsweep.pipeline.questions.config import check
    from ragsweep.tracking import Tracker

    t0 = time.perf_counter()
    q, shared = check(cfg)
    top = shared["top"]
    corpus = _corpus(cfg)
    documents = list(corpus.documents)
    samples, sstats = draw(documents, q.sampling(int(top.seed)))
    if not samples:
        raise DataError(f"dataset {corpus.name}: no passage of at least {q.min_chars} characters in its "
                        f"{len(documents)} document(s) to ask about; lower min_chars or add documents")
    out = Path(q.out or Path("questions") / f"{corpus.name}-n{q.n}-seed{top.seed}.jsonl").expanduser()
    tracker = Tracker(top.mlflow.tracking_uri, top.mlflow.artifact_location, top.experiment_name,
                      enabled=top.mlflow.enabled)
    tracker.start(top.run_name or f"questions-{corpus.name}-n{q.n}-seed{top.seed}",
                  tags={"ragsweep.role": "questions", "ragsweep.questions": "synthetic", "ragsweep.questions.file": str(out)})
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("hydra", None)
    status, parts = "FAILED", {}
    try:
        from ragsweep import signals

        with signals.Interrupts():
            tracker.log_params(flatten(resolved))
            made = _generate(cfg, q, top, corpus, documents, samples, sstats, out, tracker, parts, t0)
        status = "FINISHED"
        return made
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Exception as exc:
        tracker.set_tags({"ragsweep.error": f"{type(exc).__name__}: {exc}"[:4000]})
        raise
    finally:
        for name in ("client", "judge", "server"):
            part = parts.get(name)
            if part is not None:
                (part.stop if name == "server" else part.close)()
        tracker.end(status)


def _generate(cfg: DictConfig, q: Any, top: Any, corpus: Any, documents: list, samples: list, sstats: dict, out: Path,
              tracker: Any, parts: dict, t0: float) -> Made:
    """Start the model server, make the set, write and log it (``parts``: what the caller closes)."""
    from ragsweep.corpus.dataset.fingerprint import corpus_fingerprint
    from ragsweep.corpus.dataset.locate import DocumentIndex
    from ragsweep.pipeline.questions import generate as G
    from ragsweep.pipeline.questions import output as O
    from ragsweep.pipeline.questions.prompts import prompt_id
    from ragsweep.pipeline.summary import quiet
    from ragsweep.rag.generator import GeneratorConfig, build_client, build_server
    from ragsweep.store.cache import Cache

    used = {w.doc_id for s in samples for w in s.windows}
    by_id = {d.doc_id: d for d in documents if d.doc_id in used}
    server = parts["server"] = build_server(cfg.generator)
    if hasattr(server, "check"):
        server.check()
    extractor, checker, parts["judge"] = _checker(cfg)
    server.start()
    cache = Cache(top.cache_dir)
    client = parts["client"] = build_client(cfg.generator, server, cache, cache_namespace="generation", progress=not quiet())
    ctx = G.Context(q, GeneratorConfig.from_config(cfg.generator), client, cache,
                    {d: DocumentIndex(doc.text) for d, doc in by_id.items()},
                    {d: doc.title or d for d, doc in by_id.items()}, extractor, checker)
    if checker is None:
        ctx.notes.append("evaluator=none: the answers' entailment by their evidence and the closed-book check were not made")
    cands = G.run(ctx, samples)
    kept, surplus = G.keep(cands, q.n)
    counts = G.counts(cands, kept, surplus)
    wall = time.perf_counter() - t0
    tracker.log_metrics({**O.metrics(counts, ctx.seconds, wall, dict(client.stats)),
                         **{f"sampling/{k}": float(v) for k, v in sstats.items()}})
    O.write_jsonl(O.dropped_path(out), [O.dropped_row(c) for c in cands if c.drop])
    if not kept:
        tracker.log_file(O.dropped_path(out), "questions")
        raise DataError(f"no question survived the checks ({counts['candidates']} candidates: "
                        + ", ".join(f"{counts[f'dropped_{r}']} {r}" for r in G.REASONS if counts[f"dropped_{r}"])
                        + f"); nothing written to {out}. See {O.dropped_path(out)} for each one's reason; a stronger "
                        "model (generator=vllm or generator=external) or a larger oversample gives more")
    provenance = {"tool": "ragsweep-questions", "model": getattr(server, "model_name", None) or cfg.generator.name,
                  "prompt": prompt_id(q.questions), "seed": int(top.seed), "generator_seed": ctx.gen.seed,
                  "corpus_fingerprint": corpus_fingerprint(corpus.documents), "dataset": corpus.name, "run_id": tracker.run_id}
    rows = [O.row(c, f"gen{top.seed}-{c.index:04d}", provenance) for c in kept]
    O.write_jsonl(out, rows)
    for path in (out, O.dropped_path(out)):
        tracker.log_file(path, "questions")
    if notes := ctx.notes:
        tracker.set_tags({"ragsweep.questions.notes": "; ".join(notes)[:4000]})
    run_line = f"MLflow run {tracker.run_id} in experiment {top.experiment_name!r}" if tracker.run_id else ""
    text = O.report(corpus.name, counts, q.n, int(top.seed), wall, out, sum(len(c.evidence) for c in kept), provenance,
                    ctx.notes, run_line, next_command(cfg, out))
    tracker.log_text(text, "questions_summary.txt")
    return Made(out, counts, text, tracker.run_id)


@hydra.main(version_base="1.3", config_path="../../conf", config_name="questions")
def app(cfg: DictConfig) -> None:
    try:
        made = make_set(cfg)
    except RagsweepError as exc:
        log.error("%s", exc)
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        why = str(exc) or "Ctrl-C"
        print(f"{PROG}: interrupted ({why})", file=sys.stderr)
        signum = why.removeprefix("signal ")
        sys.exit(128 + int(signum) if signum.isdigit() else 128 + int(signal.SIGINT))
    print(made.report, flush=True)


def main() -> None:
    """``ragsweep-questions [-q] [hydra overrides...]``; one set per call (no ``-m``)."""
    from ragsweep.pipeline.cli import QUIET_FLAGS, _quiet_libraries
    from ragsweep.pipeline.summary import QUIET_ENV

    if any(a in ("-m", "--multirun") for a in sys.argv[1:]):
        print(f"{PROG}: error: one question set per call; run it once per setting (no -m)", file=sys.stderr)
        sys.exit(2)
    _quiet_libraries()
    if any(a in QUIET_FLAGS for a in sys.argv[1:]):
        sys.argv = [a for a in sys.argv if a not in QUIET_FLAGS]
        os.environ[QUIET_ENV] = "1"
        os.environ["TQDM_DISABLE"] = "1"
        sys.argv.append("hydra.job_logging.handlers.console.level=ERROR")
    app()


if __name__ == "__main__":
    main()
