"""The page ``ragsweep-reproduce`` ends with: every direction of every sweep it ran, its verdict, n,
the interval of the step that decided it, and the command that reproduces it; then each sweep's
systems, questions and wall time. Rows come from ``ragsweep-report``'s verdicts
(:mod:`ragsweep.analysis.report.directions`), kept in ``state.json`` so a resumed run writes the
whole page without reading finished sweeps again."""

from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Sequence

from ragsweep.analysis.report.markdown import md_cell

PAGE = "reproduce.md"


def direction_rows(verdicts: Sequence[Any]) -> list[dict[str, Any]]:
    """One plain row per verdict: what the page shows. The step is the deciding one (its p is the
    verdict's: the weakest step, or for CONTRADICTED the strongest contradiction)."""
    rows = []
    for v in verdicts:
        step = next((s for s in v.steps if v.p is not None and s.get("p_holm") == v.p), None)
        rows.append({
            "metric": v.metric, "param": v.param, "expected": v.expected, "verdict": v.verdict, "n": v.n,
            "p": v.p, "n_for_80pct_power": v.n_needed, "paper": v.paper, "detail": v.detail if not v.steps else "",
            "step": step["comparison"] if step else None, "diff": _num(step["diff"]) if step else None,
            "ci": [_num(step["ci_low"]), _num(step["ci_high"])] if step else None,
        })
    return rows


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _g(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3g}"


def interval_text(row: dict[str, Any]) -> str:
    if not row.get("step"):
        return row.get("detail") or "-"
    lo, hi = row["ci"] or (None, None)
    return f"{row['step']}: {_g(row['diff'])} [{_g(lo)}, {_g(hi)}]"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def markdown(sweeps: Sequence[Any], entries: Sequence[dict[str, Any]], command: str, wall_s: float) -> str:
    """The page from the planned ``sweeps`` and their ``state.json`` ``entries`` (same order)."""
    rows = [(s, e, r) for s, e in zip(sweeps, entries) for r in (e.get("directions") or [])]
    counts: dict[str, int] = {}
    for _, _, r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    out = [
        "# Every direction of both papers",
        "",
        f"`{command}` on {machine()}, {time.strftime('%Y-%m-%d %H:%M %Z')}; this run {duration(wall_s)}, the sweeps "
        f"{duration(sum(float(e.get('wall_s') or 0) for e in entries))} in all (their wall times below).",
        "",
        "Verdicts: " + (", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items())) or "none yet") + ". "
        "Each comes from `ragsweep-report` (paired tests over the questions both levels scored, Holm over each "
        "report; docs/statistics.md); n is the fewest questions any step was paired over; the interval is the "
        "deciding step's difference B - A with its 95% interval.",
        "",
        "| sweep | metric | vs | expected | verdict | n | deciding step: B - A [95% CI] | p (Holm) | questions for 80% power | paper | reproduce with |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s, e, r in rows:
        p = "-" if r.get("p") is None else (f"{r['p']:.3g}" if r["p"] >= 0.001 else "<0.001")
        out.append("| " + " | ".join(md_cell(x) for x in (
            s.name, r["metric"], r["param"], r["expected"], f"**{r['verdict']}**", r.get("n") if r.get("n") is not None else "-",
            interval_text(r), p, r.get("n_for_80pct_power") or "-", r.get("paper") or "",
            f"`{s.command()}`, then `{s.report_command()}`")) + " |")
    if not rows:
        out.append("| (no sweep reported yet) | | | | | | | | | | |")
    out += ["", "## Sweeps", "",
            "| sweep | side | systems | questions | wall time | per system | status | parent run | report |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s, e in zip(sweeps, entries):
        wall = e.get("wall_s")
        status = e.get("status") or "not run"
        if e.get("report_error"):
            status += f" (report failed: {e['report_error']})"
        out.append("| " + " | ".join(md_cell(x) for x in (
            s.name, s.side, s.systems, s.questions or "?", duration(wall) if wall else "-",
            f"{float(wall) / s.systems:.0f} s" if wall else "-", status, e.get("parent_run_id") or "-",
            f"[reports/{s.name}/](reports/{s.name}/directions.md)" if e.get("directions") is not None else "-")) + " |")
    return "\n".join(out) + "\n"


def write(out: Path, sweeps: Sequence[Any], state: Any, command: str, wall_s: float) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / PAGE
    path.write_text(markdown(sweeps, [state.get(s) for s in sweeps], command, wall_s), encoding="utf-8")
    return path
