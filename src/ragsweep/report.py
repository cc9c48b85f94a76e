"""``ragsweep-report``: the paper-style table, figures and direction checks of one sweep, from MLflow.

    ragsweep-report --experiment ragchecker_topk [--run PARENT_RUN_ID] [--out DIR] [--tracking-uri URI]

Reads the latest parent run of the experiment (tag ``ragsweep.role=parent``; or the one given with
``--run``) and its FINISHED child runs (tag ``mlflow.parentRunId``), then writes to ``--out``
(default ``reports/NAME/``) and logs to the parent run under ``report/``:

- ``table.md`` / ``table.csv``: one row per system, in the layout of the paper the sweep
  reproduces: RAGChecker Table 3 (``layout: ragchecker``) or RAGBench Table 6 (``layout: ragbench``);
- ``fig_<param>.png``: one figure per swept parameter, each relevant metric against it (means over
  the other swept parameters, one bar series per value of the next swept parameter), like
  RAGChecker Fig. 6/7/8/10 and RAGBench Fig. 4;
- ``directions.md`` / ``directions.json``: each direction the paper reports (the ``sweep.directions``
  of the experiment config) marked REPRODUCED, NOT REPRODUCED or NOT TESTABLE, with the numbers.

What the sweep was comes from the parent run's ``sweep.json`` artifact (the resolved ``sweep`` node
of ``conf/experiment/NAME.yaml``); without it, from the packaged ``conf/experiment/NAME.yaml``;
without that, inferred from the runs (layout from the metrics, params = short params that vary).

Child runs: only FINISHED ones count. Two runs of the same system (same logged params, volatile
ones such as ``run_name``, ``mlflow.*``, ``cache_dir`` aside), e.g. after a resumed sweep: the one
that started last is kept.

Direction rules (``expect`` in ``sweep.directions``). A metric's value at a parameter value is the
mean over the kept runs with that value (so over the other swept parameters); parameter values are
sorted numerically, categorical ones in the order of ``CATEGORY_ORDER`` then alphabetically.

- ``increasing``: every step between consecutive values rises by >= -tol and the last value
  exceeds the first by more than tol (tol default 0: monotone non-decreasing, net rise > 0);
- ``decreasing``: the mirror image;
- ``flat`` ("barely moves"): max - min <= tol; tol default 2% of the metric's scale (2.0 points
  for ``ragchecker/*`` metrics on 0-100, 0.02 for 0-1 metrics);
- ``{higher_for: V}`` / ``{lower_for: V}``: the mean at V exceeds (is below) the mean at every
  other value by more than tol (default 0); ``than: [U, ...]`` restricts the comparison to those.
- NOT TESTABLE: the parameter has fewer than two values, a named value is not in the sweep, or the
  metric is missing/NaN for some value.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

PROG = "ragsweep-report"
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
ARTIFACT_DIR = "report"

#: the short params every child run logs (see ragsweep.pipeline.short_params)
SHORT_PARAMS = ("dataset", "limit", "retriever", "top_k", "chunk_size", "chunk_overlap", "prompt", "generator", "evaluator")
#: logged params that may differ between two runs of the same system
VOLATILE_PARAM_PREFIXES = ("run_name", "mlflow.", "cache_dir", "hydra.", "sweep.")
#: how parameter values are shown: top_k=5 -> "k=5"
PARAM_LABEL = {"top_k": "k", "chunk_size": "size", "chunk_overlap": "overlap"}
#: table headers of swept params
TABLE_LABEL = {"top_k": "k", "chunk_size": "chunk size", "chunk_overlap": "overlap"}
#: order of categorical values in tables, figures and directions (others follow, alphabetically)
CATEGORY_ORDER = {
    "retriever": ["tfidf", "bm25", "dense"],
    "prompt": ["no_context", "short", "long", "long_cot", "ragbench_generation", "ragchecker_default", "ragchecker_optimized"],
}

LAYOUTS = ("ragchecker", "ragbench")
PC_HALLUCINATED = "pc_hallucinated"  # derived column: 100 * (1 - trace/adherence_rate)


@dataclass(frozen=True)
class Column:
    header: str  # as in the paper
    metric: str  # MLflow metric name (or a derived column)
    arrow: str = ""  # paper's better-direction marker
    decimals: int = 1
    label: str = ""  # long name, for legends and figure titles


RAGCHECKER_COLUMNS = (
    Column("Prec.", "ragchecker/overall/precision", "↑", 1, "overall precision"),
    Column("Rec.", "ragchecker/overall/recall", "↑", 1, "overall recall"),
    Column("F1", "ragchecker/overall/f1", "↑", 1, "overall F1"),
    Column("CR", "ragchecker/retriever/claim_recall", "↑", 1, "claim recall"),
    Column("CP", "ragchecker/retriever/context_precision", "↑", 1, "context precision"),
    Column("CU", "ragchecker/generator/context_utilization", "↑", 1, "context utilization"),
    Column("NS(I)", "ragchecker/generator/noise_sensitivity_in_relevant", "↓", 1, "noise sensitivity in relevant"),
    Column("NS(II)", "ragchecker/generator/noise_sensitivity_in_irrelevant", "↓", 1, "noise sensitivity in irrelevant"),
    Column("Hallu.", "ragchecker/generator/hallucination", "↓", 1, "hallucination"),
    Column("SK", "ragchecker/generator/self_knowledge", "↓", 1, "self-knowledge"),
    Column("Faith.", "ragchecker/generator/faithfulness", "↑", 1, "faithfulness"),
    Column("#Claim", "ragchecker/overall/n_response_claims", "", 1, "response claims per answer"),
)
RAGBENCH_COLUMNS = (
    Column("ave relevance", "trace/relevance", "", 2, "TRACe relevance"),
    Column("ave utilization", "trace/utilization", "", 2, "TRACe utilization"),
    Column("ave completeness", "trace/completeness", "", 2, "TRACe completeness"),
    Column("pc hallucinated", PC_HALLUCINATED, "", 1, "% hallucinated = 100 (1 - adherence rate)"),
)
#: label columns of RAGBench Table 6: (header, short param)
RAGBENCH_LABELS = (("retriever", "retriever"), ("k", "top_k"), ("prompt version", "prompt"), ("generation model", "generator"))
RAGCHECKER_LEGEND = (
    "Overall: Prec. = precision, Rec. = recall, F1. Retriever: CR = claim recall, CP = context precision. "
    "Generator: CU = context utilization, NS(I) = noise sensitivity in relevant, NS(II) = noise sensitivity "
    "in irrelevant, Hallu. = hallucination, SK = self-knowledge, Faith. = faithfulness. #Claim = response claims "
    "per answer. All on 0-100 except #Claim; ↑/↓: higher/lower is better (RAGChecker Table 3)."
)
RAGBENCH_LEGEND = (
    "TRACe metrics (RAGBench Table 6): ave relevance/utilization/completeness on 0-1 (means over questions); "
    "pc hallucinated = 100 * (1 - adherence rate), in % (the paper prints the fraction)."
)

log = logging.getLogger(__name__)


class ReportError(Exception):
    """A problem the user can fix; printed on one line, exit status 1."""


# ---------------------------------------------------------------------------------------------
# reading MLflow
# ---------------------------------------------------------------------------------------------
@dataclass
class SweepRuns:
    experiment: str
    experiment_id: str
    parent_id: str
    parent_name: str
    children: list[Any]  # mlflow Run objects: FINISHED, deduplicated
    n_not_finished: int = 0
    n_duplicates: int = 0


def resolve_tracking_uri(uri: str | None) -> str:
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
        if not path.exists():
            raise ReportError(f"no MLflow store at {path} ({uri}); run a sweep first or pass --tracking-uri")
    return uri


def _client(tracking_uri: str):
    for name in ("mlflow", "alembic", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _search_all(client, experiment_id: str, filter_string: str, order_by: list[str] | None = None) -> list[Any]:
    from mlflow.entities import ViewType

    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000, order_by=order_by, page_token=token,
        )
        runs.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return runs


def system_key(run) -> tuple:
    """What makes two child runs the same system: their logged params, volatile ones aside."""
    params = run.data.params
    items = tuple(sorted((k, v) for k, v in params.items() if not k.startswith(VOLATILE_PARAM_PREFIXES)))
    return items or (("run_name", run.info.run_name),)


def load_sweep_runs(client, experiment: str | None, run_id: str | None) -> SweepRuns:
    from mlflow.exceptions import MlflowException

    exp = None
    if experiment:
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage == "deleted":
            names = sorted(e.name for e in client.search_experiments())
            known = ", ".join(names) if names else "none"
            raise ReportError(f"experiment '{experiment}' not found (experiments in this store: {known})")
    if run_id:
        try:
            parent = client.get_run(run_id)
        except MlflowException:
            raise ReportError(f"run '{run_id}' not found") from None
        if exp is not None and parent.info.experiment_id != exp.experiment_id:
            other = client.get_experiment(parent.info.experiment_id).name
            raise ReportError(f"run '{run_id}' belongs to experiment '{other}', not '{experiment}'")
        if parent.data.tags.get("ragsweep.role") == "child":
            pid = parent.data.tags.get("mlflow.parentRunId", "?")
            raise ReportError(f"run '{run_id}' is a child run; pass its parent run ({pid})")
        if exp is None:
            exp = client.get_experiment(parent.info.experiment_id)
    else:
        parents = client.search_runs(
            [exp.experiment_id], filter_string="tags.`ragsweep.role` = 'parent'",
            order_by=["attributes.start_time DESC"], max_results=1,
        )
        if not parents:
            raise ReportError(f"experiment '{exp.name}' has no parent run (tag ragsweep.role=parent); run `ragsweep -m +experiment={exp.name}` first")
        parent = parents[0]
    pid = parent.info.run_id
    found = _search_all(client, exp.experiment_id, f"tags.`mlflow.parentRunId` = '{pid}'")
    found = [r for r in found if r.data.tags.get("ragsweep.role") != "parent"]
    finished = [r for r in found if r.info.status == "FINISHED"]
    if not finished:
        raise ReportError(
            f"parent run {pid} of experiment '{exp.name}' has no FINISHED child runs "
            f"({len(found)} child run(s) in other states)"
        )
    latest: dict[tuple, Any] = {}
    for r in finished:
        key = system_key(r)
        cur = latest.get(key)
        if cur is None or (r.info.start_time or 0, r.info.end_time or 0) > (cur.info.start_time or 0, cur.info.end_time or 0):
            latest[key] = r
    kept = sorted(latest.values(), key=lambda r: r.info.start_time or 0)
    return SweepRuns(
        experiment=exp.name, experiment_id=exp.experiment_id, parent_id=pid,
        parent_name=parent.info.run_name or pid, children=kept,
        n_not_finished=len(found) - len(finished), n_duplicates=len(finished) - len(kept),
    )


def load_sweep_spec(client, runs: SweepRuns) -> tuple[dict[str, Any], str]:
    """The ``sweep`` node: the parent's sweep.json, else conf/experiment/NAME.yaml, else empty."""
    try:
        names = {a.path for a in client.list_artifacts(runs.parent_id)}
    except Exception as exc:  # noqa: BLE001 - an unreachable artifact store is not fatal here
        log.warning("cannot list the artifacts of run %s: %s", runs.parent_id, exc)
        names = set()
    if "sweep.json" in names:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(runs.parent_id, "sweep.json", tmp)
            try:
                spec = json.loads(Path(path).read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ReportError(f"sweep.json of run {runs.parent_id} is not valid JSON ({exc})") from None
        if not isinstance(spec, dict):
            raise ReportError(f"sweep.json of run {runs.parent_id} must hold a mapping, got {type(spec).__name__}")
        return spec, f"sweep.json of parent run {runs.parent_id}"
    conf = Path(__file__).resolve().parent / "conf" / "experiment" / f"{runs.experiment}.yaml"
    if conf.exists():
        from omegaconf import OmegaConf

        node = OmegaConf.load(conf).get("sweep")
        if node is not None:
            return OmegaConf.to_container(node, resolve=False), f"{conf.name} (the parent run has no sweep.json)"
    return {}, "inferred from the runs (no sweep.json, no experiment config)"


# ---------------------------------------------------------------------------------------------
# the frame: one row per system
# ---------------------------------------------------------------------------------------------
def _parse_scalar(s: Any) -> Any:
    if s is None or str(s) in ("None", "null", ""):
        return None
    try:
        f = float(s)
    except (TypeError, ValueError):
        return str(s)
    return int(f) if f.is_integer() and "." not in str(s) and "e" not in str(s).lower() else f


def runs_frame(children: Sequence[Any]):
    """DataFrame: run_id, run_name, the short params (typed), every metric."""
    import pandas as pd

    rows = []
    for r in children:
        row: dict[str, Any] = {"run_id": r.info.run_id, "run_name": r.info.run_name}
        for p in SHORT_PARAMS:
            row[p] = r.data.params.get(p)
        row.update(r.data.metrics)
        rows.append(row)
    df = pd.DataFrame(rows)
    for p in SHORT_PARAMS:
        raw = df[p].tolist()
        parsed = [_parse_scalar(v) for v in raw]
        if all(v is None or isinstance(v, (int, float)) for v in parsed) and any(v is not None for v in parsed):
            df[p] = pd.Series(parsed, index=df.index, dtype=object)
        else:
            df[p] = pd.Series([None if v is None else str(v) for v in parsed], index=df.index, dtype=object)
    if "trace/adherence_rate" in df.columns:
        df[PC_HALLUCINATED] = 100.0 * (1.0 - df["trace/adherence_rate"].astype(float))
    return df


def sort_values(param: str, values) -> list[Any]:
    vals = [v for v in dict.fromkeys(values) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if all(isinstance(v, (int, float)) for v in vals):
        return sorted(vals)
    order = CATEGORY_ORDER.get(param, [])
    return sorted(vals, key=lambda v: (order.index(str(v)) if str(v) in order else len(order), str(v)))


def _same(a: Any, b: Any) -> bool:
    if str(a) == str(b):
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def value_label(param: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{PARAM_LABEL.get(param, param)}={value:g}"
    return str(value)


def fmt(x: Any, decimals: int | None = None) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(x):
        return "n/a"
    if decimals is None:
        decimals = 1 if abs(x) >= 10 else 3
    return f"{x:.{decimals}f}"


def varying_params(df) -> list[str]:
    return [p for p in SHORT_PARAMS if df[p].map(str).nunique() > 1]


# ---------------------------------------------------------------------------------------------
# table
# ---------------------------------------------------------------------------------------------
def infer_layout(df) -> str:
    if any(c.startswith("ragchecker/") for c in df.columns):
        return "ragchecker"
    if any(c.startswith("trace/") for c in df.columns):
        return "ragbench"
    return "ragchecker"


def build_table(df, layout: str, params: Sequence[str]):
    """(display DataFrame with strings, CSV DataFrame with numbers, metric columns used)."""
    import pandas as pd

    extra = [p for p in list(params) + varying_params(df) if p in df.columns]
    extra = list(dict.fromkeys(extra))
    if layout == "ragchecker":
        labels: list[tuple[str, Any]] = [("RAG system", lambda r: f"{r['retriever']}_{r['generator']}")]
        shown = {"retriever", "generator"}
        columns = RAGCHECKER_COLUMNS
    else:
        labels = [(h, (lambda p: lambda r: r[p])(p)) for h, p in RAGBENCH_LABELS]
        shown = {p for _, p in RAGBENCH_LABELS}
        columns = RAGBENCH_COLUMNS
    label_params = [p for _, p in RAGBENCH_LABELS] if layout == "ragbench" else []
    for p in extra:
        if p not in shown:
            labels.append((TABLE_LABEL.get(p, p), (lambda p: lambda r: r[p])(p)))
            label_params.append(p)
    sort_params = label_params + [p for p in ("retriever", "generator") if p not in label_params]

    def key(row):
        out = []
        for p in sort_params:
            order = sort_values(p, df[p].tolist())
            v = row[p]
            out.append(next((i for i, o in enumerate(order) if _same(o, v)), len(order)))
        return tuple(out)

    ordered = sorted((row for _, row in df.iterrows()), key=key)
    disp_rows, csv_rows = [], []
    for row in ordered:
        d: dict[str, str] = {}
        c: dict[str, Any] = {}
        for header, getter in labels:
            v = getter(row)
            d[header] = "n/a" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))
            c[header] = v
        for col in columns:
            v = row.get(col.metric, float("nan"))
            d[f"{col.header}{col.arrow}"] = fmt(v, col.decimals)
            c[col.header] = None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 4)
        c["run_id"] = row["run_id"]
        disp_rows.append(d)
        csv_rows.append(c)
    return pd.DataFrame(disp_rows), pd.DataFrame(csv_rows), columns


def _md_cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown_table(df) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(_md_cell(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_md_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# directions
# ---------------------------------------------------------------------------------------------
REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE = "REPRODUCED", "NOT REPRODUCED", "NOT TESTABLE"


@dataclass
class Verdict:
    metric: str
    param: str
    expected: str
    verdict: str
    observed: str = ""
    detail: str = ""
    paper: str = ""
    note: str = ""
    values: list[list[Any]] = field(default_factory=list)  # [[param value, mean], ...]

    def line(self) -> str:
        obs = f"{self.observed}: " if self.observed else ""
        why = f" ({self.detail})" if self.detail and self.verdict != REPRODUCED else ""
        paper = f" [paper: {self.paper}]" if self.paper else ""
        return f"{self.metric}: {obs}{self.expected} — {self.verdict}{why}{paper}"


def metric_scale(metric: str) -> float:
    return 100.0 if metric.startswith("ragchecker/") and not metric.endswith("n_response_claims") else 1.0


def parse_expect(expect: Any) -> tuple[str, Any, list[Any] | None]:
    """(kind, value, than) from ``increasing`` / ``{higher_for: V, than: [...]}`` / ``"higher_for: V"``."""
    if isinstance(expect, str):
        text = expect.strip()
        if ":" in text:
            k, v = text.split(":", 1)
            return parse_expect({k.strip(): v.strip()})
        kind = text.lower().replace(" ", "_")
        if kind in ("barely_moves", "flat", "unchanged"):
            kind = "flat"
        if kind not in ("increasing", "decreasing", "flat"):
            raise ReportError(f"sweep.directions: unknown expect '{expect}' (increasing, decreasing, flat, higher_for: V, lower_for: V)")
        return kind, None, None
    if isinstance(expect, dict):
        for kind in ("higher_for", "lower_for"):
            if kind in expect:
                than = expect.get("than")
                if than is not None and not isinstance(than, (list, tuple)):
                    than = [than]
                return kind, expect[kind], list(than) if than is not None else None
    raise ReportError(f"sweep.directions: unknown expect {expect!r} (increasing, decreasing, flat, higher_for: V, lower_for: V)")


def check_direction(df, d: dict[str, Any]) -> Verdict:
    metric = str(d.get("metric", ""))
    param = str(d.get("param", ""))
    kind, target, than = parse_expect(d.get("expect"))
    tol_default = 0.02 * metric_scale(metric) if kind == "flat" else 0.0
    tol = float(d.get("tol", tol_default))
    expected = {
        "increasing": "increasing",
        "decreasing": "decreasing",
        "flat": f"barely moves (max-min <= {tol:g})",
        "higher_for": f"higher for {target}" + (f" than {', '.join(map(str, than))}" if than else ""),
        "lower_for": f"lower for {target}" + (f" than {', '.join(map(str, than))}" if than else ""),
    }[kind]
    v = Verdict(metric, param, expected, NOT_TESTABLE, paper=str(d.get("paper", "") or ""), note=str(d.get("note", "") or ""))
    if param not in df.columns:
        v.detail = f"param '{param}' not logged"
        return v
    values = sort_values(param, df[param].tolist())
    if len(values) < 2:
        v.detail = f"'{param}' has {len(values)} value(s) in this sweep"
        return v
    if metric not in df.columns:
        v.detail = "metric not logged"
        return v
    col = df[metric].astype(float)
    means = []
    for val in values:
        mask = df[param].map(lambda x, val=val: x is not None and _same(x, val))
        means.append(float(col[mask].mean()))
    v.values = [[val, m] for val, m in zip(values, means)]
    numeric = all(isinstance(x, (int, float)) for x in values)
    sep = " -> " if numeric else ", "
    v.observed = sep.join(f"{value_label(param, val)} {fmt(m)}" for val, m in zip(values, means))
    nan = [value_label(param, val) for val, m in zip(values, means) if math.isnan(m)]
    if nan:
        v.detail = f"metric is NaN for {', '.join(nan)}"
        return v

    ok = False
    if kind in ("increasing", "decreasing"):
        sign = 1.0 if kind == "increasing" else -1.0
        steps = [sign * (b - a) for a, b in zip(means, means[1:])]
        bad = [i for i, s in enumerate(steps) if s < -tol]
        net = sign * (means[-1] - means[0])
        ok = not bad and net > tol
        if bad:
            i = bad[0]
            v.detail = f"{value_label(param, values[i])} -> {value_label(param, values[i + 1])} goes the other way"
        elif not ok:
            v.detail = f"net change {means[-1] - means[0]:+.3g} is not beyond tol {tol:g}"
    elif kind == "flat":
        spread = max(means) - min(means)
        ok = spread <= tol
        v.detail = f"max-min = {spread:.3g}"
    else:
        idx = next((i for i, val in enumerate(values) if _same(val, target)), None)
        if idx is None:
            v.detail = f"'{target}' is not a value of {param} in this sweep ({', '.join(map(str, values))})"
            return v
        others = [i for i in range(len(values)) if i != idx]
        if than:
            missing = [t for t in than if not any(_same(values[i], t) for i in others)]
            if missing:
                v.detail = f"{', '.join(map(str, missing))} not a value of {param} in this sweep"
                return v
            others = [i for i in others if any(_same(values[i], t) for t in than)]
        sign = 1.0 if kind == "higher_for" else -1.0
        beaten = [i for i in others if not sign * (means[idx] - means[i]) > tol]
        ok = not beaten
        if beaten:
            v.detail = f"{', '.join(value_label(param, values[i]) for i in beaten)} not {'below' if sign > 0 else 'above'} {value_label(param, values[idx])}"
    v.verdict = REPRODUCED if ok else NOT_REPRODUCED
    return v


def directions_markdown(verdicts: Sequence[Verdict], runs: SweepRuns, spec_source: str) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in (REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE)}
    out = [
        f"# Paper directions: {runs.experiment}",
        "",
        f"Parent run `{runs.parent_id}` ({runs.parent_name}), {len(runs.children)} finished systems. "
        f"Directions from {spec_source}.",
        "",
    ]
    if verdicts:
        out += ["| metric | vs | expected | observed (mean over the other params) | verdict | why | paper | note |", "|---|---|---|---|---|---|---|---|"]
        for v in verdicts:
            why = v.detail if v.verdict != REPRODUCED else ""
            out.append("| " + " | ".join(_md_cell(x) for x in (v.metric, v.param, v.expected, v.observed, f"**{v.verdict}**", why, v.paper, v.note)) + " |")
        out += ["", f"Summary: {counts[REPRODUCED]} reproduced, {counts[NOT_REPRODUCED]} not reproduced, {counts[NOT_TESTABLE]} not testable."]
    else:
        out.append("No paper directions in the sweep spec.")
    out += [
        "",
        "## Rules",
        "",
        "- A metric's value at a parameter value is the mean over the finished systems with that value "
        "(so over the other swept parameters). Values are sorted numerically; categorical ones in a fixed order.",
        "- increasing: every step between consecutive values rises by at least -tol, and last - first > tol "
        "(tol default 0). decreasing: the mirror image.",
        "- barely moves (flat): max - min <= tol (default 2% of the scale: 2.0 points on 0-100, 0.02 on 0-1).",
        "- higher for V / lower for V: the mean at V is above / below the mean at every other value "
        "(or at the values named by `than`) by more than tol (default 0).",
        "- NOT TESTABLE: the parameter has fewer than two values, a named value is not swept, or the metric "
        "is missing or NaN at some value.",
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------
def figure_metrics(layout: str, df, directions: Sequence[dict[str, Any]], param: str) -> list[tuple[str, str]]:
    """(metric, title) pairs to plot against ``param``: the layout's metrics plus any direction's."""
    cols = RAGCHECKER_COLUMNS[:-1] if layout == "ragchecker" else RAGBENCH_COLUMNS
    pairs = [(c.metric, f"{c.header}{c.arrow} {c.label}" if c.label and layout == "ragchecker" else (c.label or c.header)) for c in cols]
    have = {m for m, _ in pairs}
    for d in directions:
        m = str(d.get("metric", ""))
        if d.get("param") == param and m and m not in have:
            pairs.append((m, m))
            have.add(m)
    return [(m, t) for m, t in pairs if m in df.columns and df[m].astype(float).notna().any()]


def make_figure(df, param: str, hue: str | None, metrics: Sequence[tuple[str, str]], title: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    xs = sort_values(param, df[param].tolist())
    hues = sort_values(hue, df[hue].tolist()) if hue else [None]
    n = len(metrics)
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.8 * nrows + 0.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    width = 0.8 / len(hues)
    for ax, (metric, mtitle) in zip(axes.flat, metrics):
        col = df[metric].astype(float)
        for j, h in enumerate(hues):
            ys = []
            for x in xs:
                mask = df[param].map(lambda v, x=x: v is not None and _same(v, x))
                if h is not None:
                    mask &= df[hue].map(lambda v, h=h: v is not None and _same(v, h))
                ys.append(float(col[mask].mean()) if mask.any() else float("nan"))
            pos = [i - 0.4 + width * (j + 0.5) for i in range(len(xs))]
            ax.bar(pos, ys, width=width * 0.95, label=value_label(hue, h) if h is not None else None)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([value_label(param, x) for x in xs], rotation=20 if not all(isinstance(x, (int, float)) for x in xs) else 0, fontsize=8)
        ax.set_title(mtitle, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if hue:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", fontsize=8, title=hue, title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.92 if hue else 1, 0.95))
    fig.savefig(path, dpi=110)


def make_figures(df, layout: str, params: Sequence[str], directions: Sequence[dict[str, Any]], experiment: str, out: Path) -> list[Path]:
    paths = []
    present = [p for p in params if p in df.columns]
    for i, p in enumerate(present):
        metrics = figure_metrics(layout, df, directions, p)
        if not metrics:
            log.warning("no metric to plot against %s", p)
            continue
        hue = None
        for q in present[i + 1 :] + present[:i]:
            if len(sort_values(q, df[q].tolist())) > 1:
                hue = q
                break
        others = [q for q in present if q not in (p, hue)]
        avg = f"; mean over {', '.join(others)}" if others else ""
        title = f"{experiment}: metrics vs {p}" + (f" by {hue}" if hue else "") + avg
        path = out / f"fig_{p}.png"
        make_figure(df, p, hue, metrics, title, path)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
@dataclass
class Report:
    runs: SweepRuns
    layout: str
    params: list[str]
    table_md: str
    verdicts: list[Verdict]
    files: list[Path]
    out: Path
    spec_source: str


def build_report(tracking_uri: str | None, experiment: str | None, run_id: str | None, out: str | None, log_to_parent: bool = True) -> Report:
    uri = resolve_tracking_uri(tracking_uri)
    client = _client(uri)
    runs = load_sweep_runs(client, experiment, run_id)
    spec, source = load_sweep_spec(client, runs)
    df = runs_frame(runs.children)

    layout = str(spec.get("layout") or infer_layout(df))
    if layout not in LAYOUTS:
        raise ReportError(f"sweep.layout '{layout}' unknown; valid: {', '.join(LAYOUTS)}")
    params = [str(p) for p in (spec.get("params") or [])] or varying_params(df)
    unknown = [p for p in params if p not in SHORT_PARAMS]
    if unknown:
        raise ReportError(f"sweep.params: unknown param(s) {unknown}; valid: {', '.join(SHORT_PARAMS)}")
    directions = list(spec.get("directions") or [])
    for i, d in enumerate(directions):
        if not isinstance(d, dict) or not d.get("metric") or not d.get("param") or "expect" not in d:
            raise ReportError(f"sweep.directions[{i}]: needs metric, param and expect (from {source})")
        parse_expect(d["expect"])

    out_dir = Path(out) if out else Path("reports") / runs.experiment
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("fig_*.png"):
        stale.unlink()

    disp, csv, _ = build_table(df, layout, params)
    legend = RAGCHECKER_LEGEND if layout == "ragchecker" else RAGBENCH_LEGEND
    table_md = markdown_table(disp)
    ignored = []
    if runs.n_not_finished:
        ignored.append(f"{runs.n_not_finished} unfinished")
    if runs.n_duplicates:
        ignored.append(f"{runs.n_duplicates} superseded duplicate")
    skipped = f" ({' and '.join(ignored)} child run(s) ignored)" if ignored else ""
    header = (
        f"# {runs.experiment}: {'RAGChecker Table 3' if layout == 'ragchecker' else 'RAGBench Table 6'} layout\n\n"
        f"Parent run `{runs.parent_id}` ({runs.parent_name}), {len(runs.children)} finished systems{skipped}.\n\n"
    )
    files = []
    p = out_dir / "table.md"
    p.write_text(header + legend + "\n\n" + table_md + "\n", encoding="utf-8")
    files.append(p)
    p = out_dir / "table.csv"
    csv.to_csv(p, index=False)
    files.append(p)

    verdicts = [check_direction(df, d) for d in directions]
    p = out_dir / "directions.md"
    p.write_text(directions_markdown(verdicts, runs, source), encoding="utf-8")
    files.append(p)
    p = out_dir / "directions.json"
    p.write_text(json.dumps([asdict(v) for v in verdicts], indent=1, default=str), encoding="utf-8")
    files.append(p)

    files += make_figures(df, layout, params, directions, runs.experiment, out_dir)

    if log_to_parent:
        for f in files:
            client.log_artifact(runs.parent_id, str(f), ARTIFACT_DIR)
    return Report(runs, layout, params, table_md, verdicts, files, out_dir, source)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description="Paper-style table, figures and direction checks of a ragsweep sweep, from MLflow.")
    ap.add_argument("--experiment", "-e", help="MLflow experiment (= the experiment config's name)")
    ap.add_argument("--run", help="parent run id (default: the experiment's latest parent run)")
    ap.add_argument("--out", help="output folder (default: reports/NAME/)")
    ap.add_argument("--tracking-uri", help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI})")
    ap.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    args = ap.parse_args(argv)
    if not args.experiment and not args.run:
        ap.error("give --experiment NAME (or --run PARENT_RUN_ID)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        rep = build_report(args.tracking_uri, args.experiment, args.run, args.out, log_to_parent=not args.no_log)
    except ReportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    r = rep.runs
    print(f"{r.experiment}: parent run {r.parent_id}, {len(r.children)} systems ({rep.layout} layout; swept: {', '.join(rep.params) or '-'})")
    print(rep.table_md)
    print()
    if rep.verdicts:
        print("Paper directions:")
        for v in rep.verdicts:
            print(f"  {v.line()}")
    else:
        print(f"No paper directions ({rep.spec_source}).")
    where = f"; logged to run {r.parent_id} under {ARTIFACT_DIR}/" if not args.no_log else ""
    print(f"\nWrote {rep.out}/ ({', '.join(f.name for f in rep.files)}){where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
