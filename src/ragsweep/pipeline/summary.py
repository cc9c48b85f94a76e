"""What a person sees of a run on the terminal: one progress bar per stage, and a summary at the end.

``ragsweep -q`` keeps only the summary. The metrics shown are ``summary.metrics`` in the config
(``conf/config.yaml``); each with the number of questions it is defined for.
"""

from __future__ import annotations

import math
import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

QUIET_ENV = "RAGSWEEP_QUIET"


def quiet() -> bool:
    return os.environ.get(QUIET_ENV) == "1"


@contextmanager
def silenced() -> Iterator[None]:
    """No progress bars and no summaries inside (``RAGSWEEP_QUIET`` and ``TQDM_DISABLE`` set, then restored)."""
    old = {k: os.environ.get(k) for k in (QUIET_ENV, "TQDM_DISABLE")}
    os.environ.update({QUIET_ENV: "1", "TQDM_DISABLE": "1"})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class RunResult(dict):
    """A run's metrics (a plain dict, as before) plus what the summary shows about the run."""

    def __init__(self, metrics: dict[str, Any], **info: Any):
        super().__init__(metrics)
        self.name: str = info.get("name", "")
        self.status: str = info.get("status", "FINISHED")
        self.run_id: str | None = info.get("run_id")
        self.experiment_id: str | None = info.get("experiment_id")
        self.experiment_name: str | None = info.get("experiment_name")
        self.tracking_uri: str | None = info.get("tracking_uri")
        self.records_uri: str | None = info.get("records_uri")
        self.records: list[dict[str, Any]] = info.get("records", [])
        self.skipped: bool = info.get("skipped", False)
        self.judge: dict[str, Any] | None = info.get("judge")  # the judge card (ragsweep.judge.card)
        self.judge_card_uri: str | None = info.get("judge_card_uri")
        self.budget: str | None = info.get("budget")  # why the budget stopped the run (status BUDGET REACHED)
        self.estimate: list[str] = info.get("estimate") or []  # a dry run's estimate, as printed
        self.synthetic: dict[str, Any] = info.get("synthetic") or {}  # a generated question set's provenance


class Stages:
    """Stage timer with one progress bar per stage on stderr (none with ``-q``).

    ``with stages("chunk", total=600, unit="doc") as bar: ...; bar.update(600)``; the seconds of
    every stage are in ``seconds``.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str, total: int | None = None, unit: str = "it") -> Iterator[Any]:
        from tqdm.auto import tqdm

        t0 = time.perf_counter()
        show = total is not None and not quiet()
        bar = tqdm(total=total, desc=f"{stage:<9}", unit=f" {unit}", disable=not show, leave=True,
                   file=sys.stderr, dynamic_ncols=True, bar_format="{desc} {n_fmt}/{total_fmt}{unit} [{elapsed}<{remaining}]{postfix}")
        try:
            yield bar
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0
            bar.close()


def _fmt(value: float, scale: float) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.1f}" if scale > 1 else f"{value:.3f}"


def interval_of(result: dict[str, Any], records: Sequence[dict[str, Any]], name: str):
    """``name``'s interval as logged (``<name>/ci_low|ci_high|n``, :mod:`ragsweep.analysis.scoring`), else
    computed from the records' per-question values; None when neither is there."""
    from ragsweep.analysis import stats

    if f"{name}/n" in result:
        return stats.Interval(float(result[name]), float(result.get(f"{name}/ci_low", math.nan)),
                              float(result.get(f"{name}/ci_high", math.nan)), int(result[f"{name}/n"]))
    from ragsweep.judge.metrics.registry import find, values

    metric = find(name)
    if metric is None or metric.per_question is None or not records:
        return None
    try:
        return stats.interval(values(metric, records))
    except (KeyError, TypeError, ValueError):  # records that do not hold what it reads: no interval
        return None


def ui_url(host: str, experiment_id: str | None, run_id: str | None) -> str:
    if experiment_id and run_id:
        return f"{host}/#/experiments/{experiment_id}/runs/{run_id}"
    return host


def format_summary(result: RunResult, metrics_shown: Sequence[str], total_s: float | None = None) -> str:
    m = result
    records = result.records
    attempted = int(m.get("ledger/attempted", m.get("generator/requests", len(records))))
    failed = int(m.get("ledger/failed_generation", m.get("generator/failures", sum(1 for r in records if r.get("error")))))
    judge_fail = int(m.get("ledger/failed_judge", 0))
    head = f"ragsweep: {result.name}  {result.status}" + (f" in {total_s:.1f}s" if total_s is not None else "")
    if result.skipped:
        head += " (already finished in this sweep: not run again)"
    lines = [head]
    if result.status == "DRY RUN":
        return "\n".join(lines + result.estimate + ["nothing was called and nothing logged (--dry-run)"])
    skipped = int(m.get("ledger/not_attempted", 0))
    lines.append(f"questions: {attempted} attempted, {attempted - failed} answered, {failed} failed generation, "
                 f"{judge_fail} failed in the judge" + (f", {skipped} not attempted (budget)" if skipped else "")
                 + (" (failed questions are counted, never scored; see ledger.json)" if failed or judge_fail else ""))
    if "data/files" in m:  # dataset=files: how many files gave a document, and why the others did not
        lines.append(files_line(m))
    if result.synthetic or m.get("data/queries_synthetic"):
        lines.append(synthetic_line(m, result.synthetic))
    rows = [(name, m[name]) for name in metrics_shown if name in m]
    if rows:
        from ragsweep.judge.metrics.registry import find

        width = max(len(n) for n, _ in rows)
        lines.append(f"  {'metric':<{width}}  {'mean':>7}  {'95% interval':>17}  {'n':>4}   (percentile bootstrap over questions)")
        for name, value in rows:
            metric = find(name)
            scale = metric.scale if metric is not None else (100 if name.startswith("ragchecker/") else 1)
            iv = interval_of(m, records, name)
            ci, n = "", ""
            if iv is not None:
                n = str(iv.n)
                if math.isfinite(iv.low):
                    ci = f"[{_fmt(iv.low, scale)}, {_fmt(iv.high, scale)}]"
            lines.append(f"  {name:<{width}}  {_fmt(float(value), scale):>7}  {ci:>17}  {n:>4}")
    if result.judge and result.judge.get("statement"):
        from ragsweep.judge.card import sentence

        lines.append(sentence(result.judge, result.judge_card_uri))
    times = [(k[len("time/"):-2], v) for k, v in m.items() if k.startswith("time/") and k.endswith("_s")]
    if times:
        lines.append("time: " + ", ".join(f"{k} {v:.1f}s" for k, v in times))
    lines += calls_lines(m)
    if result.budget:
        lines.append(f"budget: {result.budget}; run again with a higher budget to finish (the cache keeps what "
                     "was paid for: only the rest is called)")
    if result.run_id:
        uri = result.tracking_uri or ""
        lines.append(f"MLflow run {result.run_id} in experiment {result.experiment_name!r}")
        if uri.startswith("sqlite:") or "://" not in uri:
            lines.append(f"  mlflow ui --backend-store-uri {uri}")
            lines.append(f"  {ui_url('http://127.0.0.1:5000', result.experiment_id, result.run_id)}")
        else:
            lines.append(f"  {ui_url(uri.rstrip('/'), result.experiment_id, result.run_id)}")
    if result.records_uri:
        lines.append(f"records: {result.records_uri}")
    return "\n".join(lines)


def calls_lines(m: dict[str, Any]) -> list[str]:
    """Model calls (retries and rate limits among them) and, for a priced model, the money: what was
    spent beside what was estimated before the work."""
    out = []
    calls = m.get("generator/calls")
    if calls is not None:
        line = (f"model calls: {int(calls)} generation ({int(m.get('generator/cache_hits', 0))} from cache), "
                f"{int(m.get('generator/prompt_tokens', 0))} prompt + {int(m.get('generator/completion_tokens', 0))} "
                "completion tokens")
        if m.get("judge/calls"):
            line += f"; {int(m['judge/calls'])} judge"
        retries = int(m.get("generator/retries", 0) + m.get("judge/retries", 0))
        if retries:
            limited = int(m.get("generator/rate_limited", 0) + m.get("judge/rate_limited", 0))
            line += f"; {retries} retried" + (f" ({limited} rate-limited, HTTP 429)" if limited else "")
        out.append(line)
    if "cost/usd" in m:
        parts = [f"{k} ${m[f'cost/usd_{k}']:.4f}" for k in ("generation", "judge") if f"cost/usd_{k}" in m]
        line = f"cost: ${m['cost/usd']:.4f} spent ({', '.join(parts)})"
        if "estimate/usd" in m:
            line += (f"; estimated ${m['estimate/usd']:.4f}, range ${m.get('estimate/usd_low', 0):.4f} .. "
                     f"${m.get('estimate/usd_high', 0):.4f}")
        out.append(line)
    return out


def files_line(m: dict[str, Any]) -> str:
    """``files: 57 parsed (3 parsed now), 3 in the parse ledger: 1 encrypted, 1 no_text_layer, ...``"""
    reasons = {k[len("data/files_"):]: int(v) for k, v in m.items() if k.startswith("data/files_")
               and k not in ("data/files_parsed", "data/files_parsed_now", "data/files_in_ledger") and v}
    line = f"files: {int(m.get('data/files_parsed', 0))} parsed ({int(m.get('data/files_parsed_now', 0))} parsed now)"
    ledger = int(m.get("data/files_in_ledger", 0))
    if ledger:
        line += f", {ledger} in the parse ledger: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        line += " (parse_ledger.json: each file's reason and fix)"
    return line


def headline_first(metrics: dict[str, Any], shown: Sequence[str]) -> dict[str, Any]:
    """``metrics`` with the headline ones (``summary.metrics``, those with a finite value) first, each
    followed by its interval and n (``/ci_low``, ``/ci_high``, ``/n``): MLflow's Evaluation runs page
    shows a run's metrics as columns in the order they were logged, so these lead, not ``data/*``."""
    lead: list[str] = []
    for name in shown:
        v = metrics.get(name)
        try:
            ok = v is not None and math.isfinite(float(v))
        except (TypeError, ValueError):
            ok = False
        if ok:
            lead += [k for k in (name, f"{name}/ci_low", f"{name}/ci_high", f"{name}/n") if k in metrics]
    return {**{k: metrics[k] for k in lead}, **{k: v for k, v in metrics.items() if k not in lead}}


def synthetic_line(m: dict[str, Any], syn: dict[str, Any]) -> str:
    """``questions are synthetic: 84 generated by smollm2 (seed 0) ...``: what the numbers above rest on."""
    n = int(m.get("data/queries_synthetic", syn.get("questions", 0)))
    by = f" by {syn['model']}" if syn.get("model") else ""
    seed = f" (seed {syn['seed']})" if syn.get("seed") is not None else ""
    return (f"questions are synthetic: {n} generated{by}{seed} from {syn.get('file', 'a generated set')}; they measure "
            "retrieval and answers on what a model asked of these documents, not on what your users ask "
            "(docs/questions.md; ragsweep-label sample asks people to check a sample)")


def format_line(result: RunResult, metrics_shown: Sequence[str]) -> str:
    """One line per job of a sweep."""
    bits = [f"{n.rsplit('/', 1)[-1]}={float(result[n]):.3g}" for n in metrics_shown[:3] if n in result]
    failed = int(result.get("generator/failures", 0))
    syn = "  synthetic questions" if result.get("data/queries_synthetic") else ""
    return f"ragsweep: {result.name}  {result.status}  " + " ".join(bits) + (f"  failed={failed}" if failed else "") + syn + (
        f"  run {result.run_id}" if result.run_id else "")


def format_table(rows: Sequence[tuple[str, str, dict[str, float]]], metrics_shown: Sequence[str]) -> str:
    """The table a sweep prints at its end: one row per system (name, status, headline metrics)."""
    if not rows:
        return ""
    cols = [n for n in metrics_shown if any(n in r[2] for r in rows)][:5]
    width = max(len(r[0]) for r in rows)
    short = [c.rsplit("/", 1)[-1][:16] for c in cols]
    out = [f"{'system':<{width}}  {'status':<8}  " + "  ".join(f"{s:>16}" for s in short)]
    for name, status, m in rows:
        cells = []
        for c in cols:
            v = m.get(c)
            if v is None or not math.isfinite(float(v)):
                cells.append(f"{'n/a':>16}")
                continue
            lo, hi = m.get(f"{c}/ci_low"), m.get(f"{c}/ci_high")
            hw = f"±{(hi - lo) / 2:.2g}" if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi) else ""
            cells.append(f"{f'{v:.3g}{hw}':>16}")
        out.append(f"{name:<{width}}  {status:<8}  " + "  ".join(cells))
    n = next((int(m[f"{c}/n"]) for _, _, m in rows for c in cols if f"{c}/n" in m), None)
    if n is not None:
        out.append(f"(mean ± half-width of the 95% interval over questions; n = {n} for {cols[0].rsplit('/', 1)[-1] if cols else ''}; "
                   "ragsweep-report for paired comparisons)")
    return "\n".join(out)
