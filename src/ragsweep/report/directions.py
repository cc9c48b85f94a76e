"""Paper directions: each direction a paper reports (``sweep.directions`` of the experiment config)
marked REPRODUCED, NOT REPRODUCED or NOT TESTABLE, with the numbers. The rules are in the package
docstring (:mod:`ragsweep.report`); a metric's scale (for the default tolerance of ``flat``) comes
from the metric registry."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragsweep.report.frame import ReportError, _same, fmt, metric_scale, values_of, value_label
from ragsweep.report.table import _md_cell
from ragsweep.tracking import SweepRuns

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
    values = values_of(df, param)
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

