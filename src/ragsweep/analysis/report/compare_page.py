"""Two runs question by question: one self-contained HTML page (inline CSS, no script, no external
asset), readable in the MLflow UI's artifact viewer.

    ragsweep-report --compare RUN_A RUN_B [--metric ragchecker/overall/f1]

The page: the paired difference B - A of the metric over the questions both runs scored, with its
interval and sign-flip p (:func:`ragsweep.analysis.stats.paired`); then every question sorted by its change
(largest drop first), each with the ground truth, the two responses with their claims coloured by
label (against the retrieved context and against the ground truth), the chunks each system
retrieved (ground-truth-relevant spans marked), and the claims that became or stopped being
hallucinations (RAGChecker: a response claim entailed neither by the ground truth nor by any
retrieved chunk). Logged under ``compare/`` to both runs' parent when they share one, else to
RUN_B. :func:`compare_pages_for_sweep` writes one page per child of a sweep against its baseline.
"""

from __future__ import annotations

import html
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ragsweep.tracking.traces import claims_view, failure_of
from ragsweep.records import response_of

log = logging.getLogger(__name__)

DEFAULT_METRIC = "ragchecker/overall/f1"
ARTIFACT_DIR = "compare"
PARENT_TAG = "mlflow.parentRunId"
LABEL_CLASS = {"Entailment": "ent", "Neutral": "neu", "Contradiction": "con"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:18px 0 6px} h3{font-size:14px;margin:10px 0 4px}
.summary{background:#f3f5f9;border:1px solid #d5dbe5;border-radius:6px;padding:10px 14px;margin:10px 0}
.summary b{font-size:16px} .muted{color:#667085} .num{font-variant-numeric:tabular-nums}
table.q{border-collapse:collapse;margin:6px 0} table.q td,table.q th{border:1px solid #d5dbe5;padding:3px 8px;text-align:left}
details.question{border:1px solid #d5dbe5;border-radius:6px;margin:8px 0;padding:4px 10px}
details.question>summary{cursor:pointer;font-weight:600}
.delta.up{color:#067647} .delta.down{color:#b42318} .delta.same{color:#667085}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:14px} .col{min-width:0}
.response{background:#fafbfc;border-left:3px solid #98a2b3;padding:4px 8px;white-space:pre-wrap}
ul.claims{list-style:none;padding:0;margin:4px 0} ul.claims li{margin:3px 0;padding:2px 6px;border-radius:4px}
.claim.ent{background:#dcfae6} .claim.neu{background:#fef0c7} .claim.con{background:#fee4e2} .claim.none{background:#f2f4f7}
.claim.halluc{outline:2px solid #d92d20}
.lab{display:inline-block;font-size:11px;border-radius:3px;padding:0 4px;margin-right:3px;color:#fff}
.lab.ent{background:#079455} .lab.neu{background:#b54708} .lab.con{background:#d92d20} .lab.none{background:#98a2b3}
.badge{display:inline-block;font-size:11px;border-radius:3px;padding:0 4px;background:#d92d20;color:#fff;margin-left:4px}
.chunk{border:1px solid #e4e7ec;border-radius:4px;margin:4px 0;padding:3px 6px;font-size:12.5px}
.chunk .meta{color:#667085;font-size:11.5px} .chunk.shared{border-color:#7f9cf5}
mark.rel{background:#b2ddff;padding:0 1px}
.changes li.new{color:#b42318} .changes li.gone{color:#067647}
.legend span{margin-right:10px}
"""


class CompareError(Exception):
    """A run without records or a metric no question has; one line for the user."""


@dataclass
class Side:
    run_id: str
    name: str
    records: dict[str, dict[str, Any]]  # query_id -> record
    parent_id: str | None = None
    order: list[str] = field(default_factory=list)


# -- per-question values ---------------------------------------------------------------------------
def metric_value(rec: dict[str, Any], metric: str) -> float:
    """The record's value of ``metric`` (:func:`ragsweep.analysis.report.paired.record_value`)."""
    from ragsweep.analysis.report.paired import record_value

    return record_value(rec, metric)


def by_qid(side: Side, metric: str) -> dict[str, float]:
    out = {}
    for q, r in side.records.items():
        v = metric_value(r, metric)
        if not math.isnan(v):
            out[q] = v
    return out


# -- rendering -----------------------------------------------------------------------------------
def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _lab(label: Any, prefix: str) -> str:
    cls = LABEL_CLASS.get(label, "none")
    return f'<span class="lab {cls}" title="{_e(prefix)}: {_e(label or "not checked")}">{_e(prefix)} {_e(label or "–")}</span>'


def context_label(vs_chunks: Sequence[Any]) -> Any:
    """A claim's label against the retrieved context: entailed by any chunk, else contradicted by
    any, else neutral (None when it was checked against no chunk)."""
    labels = [v for v in vs_chunks if v is not None]
    if not labels:
        return None
    if "Entailment" in labels:
        return "Entailment"
    if "Contradiction" in labels:
        return "Contradiction"
    return "Neutral"


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def hallucinated(rec: dict[str, Any] | None) -> dict[str, str]:
    """Normalized text -> claim text of the response's hallucinated claims."""
    if not rec:
        return {}
    return {_norm(c["claim"]): c["claim"] for c in claims_view(rec)["response_claims"] if c["hallucination"]}


def _claims_html(rec: dict[str, Any]) -> str:
    view = claims_view(rec)
    if not view["response_claims"]:
        return '<p class="muted">no claims extracted</p>'
    items = []
    for c in view["response_claims"]:
        ctx = context_label(c["vs_chunks"])
        cls = LABEL_CLASS.get(c["vs_gt"] if c["vs_gt"] is not None else ctx, "none")
        per_chunk = ", ".join(f"#{i + 1}: {v or '-'}" for i, v in enumerate(c["vs_chunks"]))
        halluc = ' halluc' if c["hallucination"] else ''
        badge = '<span class="badge">hallucination</span>' if c["hallucination"] else ''
        items.append(f'<li class="claim {cls}{halluc}" title="per chunk: {_e(per_chunk)}">{_lab(ctx, "context")}'
                     f'{_lab(c["vs_gt"], "gt")} {_e(c["claim"])}{badge}</li>')
    return '<ul class="claims">' + "".join(items) + "</ul>"


def _gt_claims_html(rec: dict[str, Any]) -> str:
    view = claims_view(rec)
    if not view["gt_answer_claims"]:
        return ""
    items = [f'<li class="claim {LABEL_CLASS.get(c["vs_response"], "none")}">{_lab(c["vs_response"], "in response")}'
             f'{_lab(context_label(c["vs_chunks"]), "context")} {_e(c["claim"])}</li>' for c in view["gt_answer_claims"]]
    return '<details><summary class="muted">ground-truth claims: recalled by this response?</summary><ul class="claims">' + "".join(items) + "</ul></details>"


def marked_text(chunk: dict[str, Any], spans: Sequence[dict[str, Any]]) -> str:
    """The chunk's text, escaped, with the parts inside a relevant span of its document marked."""
    text = str(chunk.get("text") or "")
    try:
        cs, ce = int(chunk.get("start")), int(chunk.get("end"))
    except (TypeError, ValueError):
        return _e(text)
    cuts = []
    for s in spans or []:
        if str(s.get("doc_id")) != str(chunk.get("doc_id")):
            continue
        try:
            a, b = max(int(s["start"]), cs) - cs, min(int(s["end"]), ce) - cs
        except (KeyError, TypeError, ValueError):
            continue
        if a < b:
            cuts.append((max(0, a), min(len(text), b)))
    if not cuts:
        return _e(text)
    cuts.sort()
    out, pos = [], 0
    for a, b in cuts:
        a = max(a, pos)
        if a >= b:
            continue
        out.append(_e(text[pos:a]) + '<mark class="rel">' + _e(text[a:b]) + "</mark>")
        pos = b
    out.append(_e(text[pos:]))
    return "".join(out)


def _chunks_html(rec: dict[str, Any], other: dict[str, Any] | None) -> str:
    ctx = [c for c in rec.get("retrieved_context") or [] if isinstance(c, dict)]
    if not ctx:
        return '<p class="muted">no chunks retrieved</p>'
    theirs = {str(c.get("chunk_id")) for c in (other or {}).get("retrieved_context") or [] if isinstance(c, dict)}
    spans = rec.get("relevant_spans") or []
    out = []
    for rank, c in enumerate(ctx, start=1):
        shared = str(c.get("chunk_id")) in theirs
        score = c.get("score")
        score_s = f"{float(score):.3f}" if isinstance(score, (int, float)) else _e(score)
        rel = any(str(s.get("doc_id")) == str(c.get("doc_id")) for s in spans)
        out.append(
            f'<div class="chunk{" shared" if shared else ""}"><div class="meta">#{rank} · {_e(c.get("where") or "doc " + str(c.get("doc_id")))} · '
            f'chunk {_e(c.get("chunk_id"))} · score {score_s}{" · also retrieved by the other system" if shared else ""}'
            f'{" · relevant document" if rel else ""}</div>{marked_text(c, spans)}</div>'
        )
    return "".join(out)


def _fmt(v: float) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"


def render(a: Side, b: Side, metric: str) -> str:
    """The page comparing run ``b`` with run ``a`` on ``metric``."""
    from ragsweep.analysis.stats import paired

    va, vb = by_qid(a, metric), by_qid(b, metric)
    both = sorted(set(va) & set(vb))
    if not both:
        raise CompareError(f"no question has {metric} in both runs ({len(va)} in {a.name}, {len(vb)} in {b.name})")
    p = paired(va, vb)
    qids = list(dict.fromkeys([*a.order, *b.order]))

    def delta(q: str) -> float:
        return vb[q] - va[q] if q in va and q in vb else math.nan

    qids.sort(key=lambda q: (math.isnan(delta(q)), delta(q) if not math.isnan(delta(q)) else 0.0))
    up = sum(1 for q in both if delta(q) > 0)
    down = sum(1 for q in both if delta(q) < 0)
    new_total = gone_total = 0
    blocks = []
    for q in qids:
        ra, rb = a.records.get(q), b.records.get(q)
        d = delta(q)
        ha, hb = hallucinated(ra), hallucinated(rb)
        new = [hb[k] for k in hb if k not in ha]
        gone = [ha[k] for k in ha if k not in hb]
        new_total += len(new)
        gone_total += len(gone)
        rec = ra or rb or {}
        cls = "same" if math.isnan(d) or d == 0 else ("up" if d > 0 else "down")
        dtxt = "not in both" if math.isnan(d) else f"{d:+.3g}"
        changes = "".join(f'<li class="new">became a hallucination in B: {_e(c)}</li>' for c in new)
        changes += "".join(f'<li class="gone">no longer a hallucination in B (was in A): {_e(c)}</li>' for c in gone)

        def col(side: Side, r: dict[str, Any] | None, other: dict[str, Any] | None, tag: str) -> str:
            if r is None:
                return f'<div class="col"><h3>{tag}: {_e(side.name)}</h3><p class="muted">question not in this run</p></div>'
            f = failure_of(r)
            fail = f'<p class="badge">failed ({_e(f["stage"])}): {_e(f["reason"])}</p>' if f else ""
            return (f'<div class="col"><h3>{tag}: {_e(side.name)} — {_e(metric.rsplit("/", 1)[-1])} '
                    f'{_fmt(metric_value(r, metric))}</h3>{fail}<div class="response">{_e(response_of(r))}</div>'
                    f'{_claims_html(r)}{_gt_claims_html(r)}<h3>retrieved chunks</h3>{_chunks_html(r, other)}</div>')

        blocks.append(
            f'<details class="question" id="q-{_e(q)}"{" open" if len(blocks) < 3 else ""}><summary>'
            f'<span class="delta {cls} num">{dtxt}</span> · {_e(rec.get("query"))} <span class="muted">({_e(q)})</span>'
            f'{f" · {len(new)} new / {len(gone)} gone hallucination(s)" if new or gone else ""}</summary>'
            f'<p><b>Ground truth:</b> {_e(rec.get("gt_answer"))}</p>'
            + (f'<ul class="changes">{changes}</ul>' if changes else "")
            + f'<div class="cols">{col(a, ra, rb, "A")}{col(b, rb, ra, "B")}</div></details>'
        )
    exact = "exact" if p.exact else "Monte Carlo"
    summary = (
        f'<div class="summary"><div><b class="num">{_e(metric)}: B − A = {p.diff:+.4g} '
        f'[{p.low:+.4g}, {p.high:+.4g}]</b> (paired interval, sign-flip p = {p.p:.3g}, {exact}), '
        f'n = {p.n} questions both runs scored</div>'
        f'<div class="num">mean A = {p.mean_a:.4g} · mean B = {p.mean_b:.4g} · B higher on {up}, lower on {down}, '
        f'equal on {len(both) - up - down} · hallucinations: {new_total} new in B, {gone_total} gone</div></div>'
    )
    legend = ('<p class="legend muted">Claims: <span class="lab ent">Entailment</span><span class="lab neu">Neutral</span>'
              '<span class="lab con">Contradiction</span><span class="lab none">not checked</span> — '
              '"context": against the retrieved chunks (entailed by any chunk), "gt": against the ground-truth answer; '
              'a red outline marks a hallucination (entailed neither by the ground truth nor by any chunk). '
              '<mark class="rel">Marked text</mark>: a ground-truth-relevant span. Questions: largest drop first.</p>')
    title = f"{a.name} vs {b.name}: {metric}"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title><style>{CSS}</style></head><body>'
        f'<h1>Question by question: A = {_e(a.name)} vs B = {_e(b.name)}</h1>'
        f'<p class="muted">runs {_e(a.run_id)} (A) and {_e(b.run_id)} (B); sorted by the change in {_e(metric)}</p>'
        f'{summary}{legend}<h2>{len(qids)} questions</h2>{"".join(blocks)}</body></html>'
    )


# -- reading runs, writing and logging pages ---------------------------------------------------------
def load_side(client: Any, run_id: str) -> Side:
    from ragsweep.tracking import TrackingError, read_json_artifact

    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - MlflowException: not found
        raise TrackingError(f"run '{run_id}' not found") from None
    found, data = read_json_artifact(client, run_id, "records.json")
    if not found:
        raise CompareError(f"run {run_id} ({run.info.run_name}) has no records.json artifact")
    recs = data.get("results", data) if isinstance(data, dict) else data
    if not isinstance(recs, list):
        raise CompareError(f"records.json of run {run_id} holds no list of records")
    by = {}
    for r in recs:
        if isinstance(r, dict):
            by[str(r.get("query_id"))] = r
    return Side(run_id, run.info.run_name or run_id, by, run.data.tags.get(PARENT_TAG), list(by))


def page_name(a: Side, b: Side) -> str:
    def slug(s: Side) -> str:
        return re.sub(r"[^0-9A-Za-z_.=-]+", "_", s.name)[:60] + "-" + s.run_id[:6]

    return f"{slug(a)}__vs__{slug(b)}.html"


def write_page(client: Any, a: Side, b: Side, metric: str, out_dir: Path, log_to: str | None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / page_name(a, b)
    path.write_text(render(a, b, metric), encoding="utf-8")
    if log_to:
        client.log_artifact(log_to, str(path), ARTIFACT_DIR)
    return path


def compare_runs(tracking_uri: str | None, run_a: str, run_b: str, metric: str = DEFAULT_METRIC,
                 out: str | None = None, log: bool = True) -> tuple[Path, str | None]:
    """Write (and log) the page comparing ``run_b`` with ``run_a``; returns (path, the run it was
    logged to: the runs' common parent, else ``run_b``; None with ``log=False``)."""
    from ragsweep import tracking

    client = tracking.client(tracking.resolve_tracking_uri(tracking_uri))
    a, b = load_side(client, run_a), load_side(client, run_b)
    target = (a.parent_id if a.parent_id and a.parent_id == b.parent_id else b.run_id) if log else None
    path = write_page(client, a, b, metric, Path(out) if out else Path("reports") / "compare", target)
    return path, target


def compare_pages_for_sweep(client: Any, runs: Any, out_dir: str | Path, *, metric: str = DEFAULT_METRIC,
                            baseline: str | None = None, log: bool = True) -> list[tuple[str, Path]]:
    """One page per child of the sweep ``runs`` (a :class:`ragsweep.tracking.SweepRuns`) against
    the baseline child (``baseline`` run id, default the first child), logged to the parent under
    ``compare/``. Returns (child run id, page path) pairs; a child whose page cannot be made (no
    records, no common scored question) is skipped with a warning."""
    kids = list(runs.children)
    if len(kids) < 2:
        return []
    base_run = next((r for r in kids if r.info.run_id == baseline), kids[0]) if baseline else kids[0]
    try:
        base = load_side(client, base_run.info.run_id)
    except Exception as exc:  # noqa: BLE001
        log_warning(f"no compare pages: baseline {base_run.info.run_id}: {exc}")
        return []
    pages = []
    for r in kids:
        if r.info.run_id == base.run_id:
            continue
        try:
            other = load_side(client, r.info.run_id)
            pages.append((r.info.run_id, write_page(client, base, other, metric, Path(out_dir), runs.parent_id if log else None)))
        except Exception as exc:  # noqa: BLE001 - one bad child does not cost the others their page
            log_warning(f"no compare page for {r.info.run_id}: {exc}")
    return pages


def log_warning(msg: str) -> None:
    log.warning("%s", msg)


def main_compare(args: Any) -> int:
    """``ragsweep-report --compare A B [--metric M] [--out DIR] [--no-log]``."""
    import sys

    from ragsweep.tracking import TrackingError

    try:
        path, target = compare_runs(args.tracking_uri, args.compare[0], args.compare[1], args.metric or DEFAULT_METRIC,
                                    args.out, log=not args.no_log)
    except (CompareError, TrackingError) as exc:
        print(f"ragsweep-report: error: {exc}", file=sys.stderr)
        return 1
    print(f"Wrote {path}" + (f"; logged to run {target} under {ARTIFACT_DIR}/" if target else ""))
    print(paired_table(args.tracking_uri, args.compare[0], args.compare[1], args.metric or DEFAULT_METRIC))
    return 0


def paired_table(tracking_uri: str | None, run_a: str, run_b: str, metric: str) -> str:
    """B - A for the headline metrics over the questions both runs scored, Holm-adjusted."""
    from ragsweep import tracking
    from ragsweep.analysis.report import paired

    client = tracking.client(tracking.resolve_tracking_uri(tracking_uri))
    a, b = load_side(client, run_a), load_side(client, run_b)
    metrics = list(dict.fromkeys([metric, *paired.DEFAULT_METRICS]))
    comps = []
    for m in metrics:
        va, vb = paired.run_values(list(a.records.values()), m), paired.run_values(list(b.records.values()), m)
        if va is not None and vb is not None and paired.stats.common(va, vb):
            comps.append(paired.compare(m, a.name, va, b.name, vb))
    paired.adjust(comps)
    return paired.comparisons_markdown(comps, f"B = {b.name} ({b.run_id}) vs A = {a.name} ({a.run_id})") + "\n" + paired.RULES
