"""``ragsweep-score``: RAGChecker metrics of a RAGChecker input or output file.

    ragsweep-score INPUT.json [-o OUTPUT.json] [--checker offline|llm|nli]
                   [--extractor offline|llm] [--base-url URL] [--model NAME]

When every record of INPUT already holds its claims and entailment matrices (a RAGChecker or
ragsweep output file), the metrics are recomputed from them with no model call. Otherwise the
records go through the evaluator (``ragsweep.judge.core.Evaluator``: claim extraction and
checking) first. ``--checker NAME`` / ``--extractor NAME`` name a YAML file of the config groups
``conf/evaluator/checker`` / ``conf/evaluator/extractor`` (the choices are those files).
``--base-url`` gives the judge for a component that needs one; ``--model`` names the judge's
model there, and sets the ``model`` option of a checker that has one and needs no judge (the NLI
model, or the offline checker's embedding model). The overall metrics are printed to stdout as JSON; ``-o`` writes the output file
(RAGChecker output schema: each result with its ``metrics``, plus the top-level ``metrics``).

Exit status: 0 done, 2 bad command line or malformed input (one line on stderr naming the file
and the field), 1 any other error that ragsweep can explain (e.g. the pipeline is unavailable).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragsweep.analysis.scoring import ragchecker_layout, score_run  # the one aggregation path
from ragsweep.errors import RagsweepError
from ragsweep.judge.ragchecker_metrics import N_CLAIMS
from ragsweep.judge.schema import (
    SchemaError,
    example_metrics,
    is_output_file,
    jsonable,
    read_records,
    write_output,
)

PROG = "ragsweep-score"


def build_output(records: Sequence[Mapping[str, Any]], path: str | Path = "<records>") -> dict[str, Any]:
    """The RAGChecker output document for records that hold claims and matrices.

    Each result gets ``metrics`` (fractions, NaN -> null; ``n_response_claims`` a count) and the
    document a top-level ``metrics`` (percentages rounded to one decimal, NaN -> null), aggregated
    by :func:`ragsweep.analysis.scoring.score_run` like a run's, with ``intervals`` beside it (the same
    layout of ``{"ci_low", "ci_high", "n"}``: 95% bootstrap over questions). A matrix
    of the wrong shape or with an unknown label raises :class:`SchemaError` naming ``path``.
    """
    per_example = [example_metrics(r, i, path) for i, r in enumerate(records)]
    results = []
    for rec, m in zip(records, per_example):
        out = dict(rec)  # jsonable() below copies it
        out["metrics"] = {k: (v if k == N_CLAIMS else v / 100.0) for k, v in m.items()}
        results.append(out)
    metrics, intervals = ragchecker_layout(score_run(results, ["ragchecker"]))
    return jsonable({"results": results, "metrics": metrics, "intervals": intervals})


def _parser() -> argparse.ArgumentParser:
    from ragsweep.judge.components import names

    ap = argparse.ArgumentParser(
        prog=PROG,
        description="RAGChecker metrics of a RAGChecker input or output JSON file.",
    )
    ap.add_argument("input", metavar="INPUT.json", help='{"results": [...]} in RAGChecker schema')
    ap.add_argument("-o", "--output", metavar="OUTPUT.json", help="write the scored records here")
    ap.add_argument("--checker", choices=names("checker"), default="offline",
                    help="entailment checker (conf/evaluator/checker/NAME.yaml) for records without matrices")
    ap.add_argument("--extractor", choices=names("extractor"), default="offline",
                    help="claim extractor (conf/evaluator/extractor/NAME.yaml) for records without claims")
    ap.add_argument("--base-url", help="OpenAI-compatible server for a checker/extractor that needs a judge")
    ap.add_argument("--model", help="the judge's model name, or the checker's model (nli, offline)")
    return ap


def evaluator_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The evaluator's options for these arguments (the groups' YAML files, loaded)."""
    from ragsweep.judge.components import group_spec, needs_judge

    checker = group_spec("checker", args.checker)
    extractor = group_spec("extractor", args.extractor)
    if args.model is not None and "model" in checker and not needs_judge("checker", checker):
        checker["model"] = args.model
    judge = None
    if args.base_url is not None:
        judge = {"base_url": args.base_url, "model": args.model}
    return {"name": "score", "extractor": extractor, "checker": checker, "judge": judge}


def _run_pipeline(records: list[dict], args: argparse.Namespace) -> list[dict]:
    """Extract claims and check them with the evaluator (imported only when needed)."""
    module_name = "ragsweep.judge.core"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise  # the evaluator exists but one of its own imports is missing: show that
        raise RagsweepError(
            f"{args.input}: the records have no claims/entailment matrices, and the claim "
            f"extraction and checking evaluator ({module_name}.Evaluator) is not "
            "available; give a file that already holds claims and matrices"
        ) from None
    try:
        evaluator = module.Evaluator(**evaluator_spec(args))
    except ValueError as e:
        raise RagsweepError(str(e)) from None
    scored, _counters = evaluator.evaluate(records)  # (records with per-question values, counters)
    return list(scored)


def score(args: argparse.Namespace) -> dict[str, Any]:
    """Read, (extract and check if needed), compute; return the output document."""
    records = read_records(args.input)
    path = args.input
    if not is_output_file(records):
        records = _run_pipeline(records, args)
        path = f"{args.input} (after {args.extractor} extraction, {args.checker} checking)"
    document = build_output(records, path)
    if args.output:
        try:
            write_output(args.output, document)
        except OSError as e:
            raise RagsweepError(f"{args.output}: cannot write: {e.strerror or e}") from None
    return document


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        document = score(args)
    except RagsweepError as e:
        message = " ".join(str(e).split())  # one line
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2 if isinstance(e, SchemaError) else 1
    print(json.dumps({**document["metrics"], "intervals": document["intervals"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
