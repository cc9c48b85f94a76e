"""Paper directions: each direction a paper reports (``sweep.directions`` of the experiment config)
marked REPRODUCED, CONTRADICTED, SAME DIRECTION, NOT SIGNIFICANT, OPPOSITE DIRECTION, NOT
SIGNIFICANT, NO DIFFERENCE, NOT SIGNIFICANT (an observed difference of 0: neither way), NOT TESTABLE
or NO DATA, with the numbers. The rules are in :data:`RULES` (and
docs/statistics.md, section 4); a metric's range (for the default tolerance of ``flat`` and the
range of its "barely moves" interval) comes from the metric registry: a "barely moves" direction
on a metric without a known range (or with a tol at or above it, or values outside it) is NOT
TESTABLE, whatever the number of questions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from typing import Mapping

from ragsweep.analysis import stats
from ragsweep.analysis.report.frame import ReportError, _same, fmt, metric_range, values_of, value_label
from ragsweep.analysis.report.paired import RULES, UNTESTABLE, Undefined, compare, level_values, p_text
from ragsweep.analysis.report.markdown import md_cell
from ragsweep.tracking import SweepRuns

REPRODUCED = "REPRODUCED"
SAME_NS = "SAME DIRECTION, NOT SIGNIFICANT"
OPPOSITE_NS = "OPPOSITE DIRECTION, NOT SIGNIFICANT"
#: increasing / decreasing / higher for / lower for whose deciding change (net over the steps; for
#: higher / lower for, the smallest step) is 0: neither the paper's direction nor the opposite
NO_DIFF_NS = "NO DIFFERENCE, NOT SIGNIFICANT"
CONTRADICTED = "CONTRADICTED"
NO_DATA = "NO DATA"
#: no valid test of the expectation exists on this metric (no known range, a tol covering the whole
#: range, or values outside it): more questions would not help
NOT_TESTABLE = "NOT TESTABLE"
VERDICTS = (REPRODUCED, SAME_NS, OPPOSITE_NS, NO_DIFF_NS, CONTRADICTED, NOT_TESTABLE, NO_DATA)
#: the NOT SIGNIFICANT verdicts: the data cannot tell, so p, n and the questions for power are shown
NOT_SIGNIFICANT = (SAME_NS, OPPOSITE_NS, NO_DIFF_NS)
# the name of CONTRADICTED before the verdicts carried statistics (kept for code that imports it)
NOT_REPRODUCED = CONTRADICTED
ALPHA = 0.05


@dataclass
class Verdict:
    metric: str
    param: str
    expected: str
    verdict: str
    observed: str = ""
    detail: str = ""
    left_out: str = ""  # levels left out of a "higher for" / "lower for": the metric exists for none of their systems
    paper: str = ""
    note: str = ""
    values: list[list[Any]] = field(default_factory=list)  # [[param value, mean, ci_low, ci_high, n], ...]
    p: float | None = None  # the deciding step's Holm-adjusted p (the weakest; for CONTRADICTED the strongest contradiction)
    n: int | None = None  # the fewest questions any step was paired over
    n_needed: int | None = None  # questions to detect the deciding step's observed effect at 80% power
    steps: list[dict[str, Any]] = field(default_factory=list)
    kind: str = ""
    tol: float = 0.0
    no_finite_n: bool = False  # the limiting step's difference is zero: no number of questions would show it
    comparisons: list[Any] = field(default_factory=list, repr=False)  # paired.Comparison, not serialised

    def line(self) -> str:
        obs = f"{self.observed}: " if self.observed else ""
        power = power_text(self)
        goal = f"its interval to lie {'inside' if abs(self._deciding_diff()) < self.tol else 'outside'} ±{self.tol:g}" \
            if self.kind == "flat" else "80% power"
        power = "" if power == "-" else (f", no finite n for {goal}" if power == "no finite n"
                                         else f", ~{power} questions for {goal}")
        stat = f" (p={p_text(self.p)}, n={self.n}{power})" if self.p is not None else ""
        why = f" ({self.detail})" if self.detail and self.verdict in (NO_DATA, NOT_TESTABLE, NO_DIFF_NS) else ""
        paper = f" [paper: {self.paper}]" if self.paper else ""
        return f"{self.metric}: {obs}{self.expected} — {self.verdict}{stat}{why}{paper}"

    def _deciding_diff(self) -> float:
        """The deciding step's difference (the one whose p and questions the line shows)."""
        step = next((c for c in self.comparisons if c.n_needed == self.n_needed and c.p_adj == self.p), None)
        return step.result.diff if step is not None else 0.0

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        d.pop("comparisons", None)
        return d


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


def check_direction(df, d: dict[str, Any], records: Mapping[str, Any] | None = None) -> Verdict:
    """Plan a direction's paired comparisons (no verdict on the data yet: call :func:`decide`
    after the report's p-values were Holm-adjusted together). ``records``: run id -> records."""
    metric = str(d.get("metric", ""))
    param = str(d.get("param", ""))
    kind, target, than = parse_expect(d.get("expect"))
    scale = metric_range(metric)
    # no known range: no default tol (2% of nothing); the step is not testable (paired._bounded_step)
    tol_default = (0.02 * scale if scale else math.nan) if kind == "flat" else 0.0
    tol = float(d.get("tol", tol_default))
    expected = {
        "increasing": "increasing",
        "decreasing": "decreasing",
        "flat": f"barely moves (|step| <= {tol:g})" if math.isfinite(tol) else "barely moves (no tol: no known range)",
        "higher_for": f"higher for {target}" + (f" than {', '.join(map(str, than))}" if than else ""),
        "lower_for": f"lower for {target}" + (f" than {', '.join(map(str, than))}" if than else ""),
    }[kind]
    v = Verdict(metric, param, expected, NO_DATA, paper=str(d.get("paper", "") or ""), note=str(d.get("note", "") or ""),
                kind=kind, tol=tol)
    if param not in df.columns:
        v.detail = f"param '{param}' not logged"
        return v
    values = values_of(df, param)
    if len(values) < 2:
        v.detail = f"'{param}' has {len(values)} value(s) in this sweep"
        return v
    if metric not in df.columns and records is None:
        v.detail = "metric not logged"
        return v
    levels = level_values(df, param, metric, records or {})
    ivs = {val: stats.interval(pq.values()) if pq is not None else None for val, pq in levels.items()}
    v.values = [[val, iv.mean, iv.low, iv.high, iv.n] if iv else [val, float("nan"), float("nan"), float("nan"), 0]
                for val, iv in ivs.items()]
    numeric = all(isinstance(x, (int, float)) for x in values)
    sep = " -> " if numeric else ", "
    v.observed = sep.join(f"{value_label(param, val)} {fmt(iv.mean) if iv else 'n/a'}" for val, iv in ivs.items())
    missing = [value_label(param, val) for val, iv in ivs.items() if iv is None or iv.n == 0]
    # "higher for V" against a level where the metric does not exist (TRACe utilization of the
    # closed-book prompt): compared with the levels where it does, saying which were left out
    skipped = [val for val in ivs if isinstance(levels[val], Undefined) and not _same(val, target)]
    if (missing and kind in ("higher_for", "lower_for") and len(skipped) == len(missing)
            and len(values) - len(skipped) >= 2 and not (than and all(any(_same(t, s) for s in skipped) for t in than))):
        values = [val for val in values if not any(_same(val, s) for s in skipped)]
        missing = []
        v.left_out = (f"left out: {', '.join(value_label(param, val) for val in skipped)}, where the metric is "
                      "undefined for every question and none failed")
        v.observed += f" ({v.left_out})"
    if missing:
        v.detail = (f"no per-question values for {', '.join(missing)}" if any(ivs[val] is None for val in ivs)
                    else f"metric is undefined for {', '.join(missing)}")
        return v

    def comp(a: Any, b: Any):
        return compare(metric, value_label(param, a), levels[a], value_label(param, b), levels[b],
                       tol=tol if kind == "flat" else None)

    if kind in ("increasing", "decreasing", "flat"):
        v.comparisons = [comp(a, b) for a, b in zip(values, values[1:])]
    else:
        idx = next((i for i, val in enumerate(values) if _same(val, target)), None)
        if idx is None:
            v.detail = f"'{target}' is not a value of {param} in this sweep ({', '.join(map(str, values))})"
            return v
        others = [i for i in range(len(values)) if i != idx]
        if than:
            absent = [t for t in than if not any(_same(values[i], t) for i in others)]
            if absent:
                v.detail = f"{', '.join(map(str, absent))} not a value of {param} in this sweep"
                return v
            others = [i for i in others if any(_same(values[i], t) for t in than)]
        v.comparisons = [comp(values[i], values[idx]) for i in others]  # diff = target - other
    if any(c.result.n == 0 for c in v.comparisons):
        v.detail = "no question scored at both levels of some step"
        v.comparisons = []
    v.verdict = ""  # decided after the report's Holm adjustment
    return v


def decide(v: Verdict, alpha: float = ALPHA) -> Verdict:
    """The verdict from the (Holm-adjusted) paired comparisons planned by :func:`check_direction`."""
    if not v.comparisons:
        v.verdict = NO_DATA
        return v
    sign = -1.0 if v.kind in ("decreasing", "lower_for") else 1.0
    comps = v.comparisons
    v.steps = [{"comparison": f"{c.a} -> {c.b}", "diff": c.result.diff, "ci_low": c.result.low, "ci_high": c.result.high,
                "n": c.result.n, "p": c.result.p, "p_holm": c.p_adj, "n_for_80pct_power": c.n_needed,
                "test": _test_text(c, v.tol)}
               for c in comps]
    v.n = min(c.result.n for c in comps)
    sig = [math.isfinite(c.p_adj) and c.p_adj < alpha for c in comps]
    untestable = [c for c in comps if c.hypothesis == UNTESTABLE]
    if untestable:  # no valid test: not "not significant", which would suggest more questions help
        v.verdict = NOT_TESTABLE
        v.detail = f"not testable: {untestable[0].why_untestable}"
        v.p, v.n_needed, v.no_finite_n = None, None, False
        return v
    if v.kind == "flat":
        # each step's p tests the hypothesis on the side of tol it lies on (paired.compare): "within" =
        # its 95% interval inside ±tol, "beyond" = outside; both Holm-adjusted with the report
        within = [s and c.hypothesis == "within" for c, s in zip(comps, sig)]
        beyond = [s and c.hypothesis == "beyond" for c, s in zip(comps, sig)]
        if all(within):
            v.verdict = REPRODUCED
            v.detail = f"every step's interval within ±{v.tol:g} (Holm p < {alpha:g})"
        elif any(beyond):
            v.verdict = CONTRADICTED
            v.detail = f"a step beyond ±{v.tol:g}, significantly (Holm p < {alpha:g})"
        elif all(abs(c.result.diff) <= v.tol for c in comps):
            v.verdict = SAME_NS
            v.detail = f"steps within ±{v.tol:g} but their intervals reach beyond it"
        else:
            v.verdict = OPPOSITE_NS
        decisive = within if v.verdict == REPRODUCED else beyond if v.verdict == CONTRADICTED else None
    else:
        right = [sign * c.result.diff > 0 for c in comps]
        if all(r and s for r, s in zip(right, sig)):
            v.verdict = REPRODUCED
        elif any((not r) and s and c.result.diff != 0 for r, s, c in zip(right, sig, comps)):
            v.verdict = CONTRADICTED
        else:
            signed = [sign * c.result.diff for c in comps]
            net = sum(signed) if v.kind in ("increasing", "decreasing") else min(signed)
            if _is_zero(net, comps):  # neither way: not "opposite" because it is not "same"
                v.verdict = NO_DIFF_NS
                v.detail = _no_difference_text(v, comps)
            else:
                v.verdict = SAME_NS if net > 0 else OPPOSITE_NS
        decisive = ([(not r) and s and c.result.diff != 0 for r, s, c in zip(right, sig, comps)]
                    if v.verdict == CONTRADICTED else None)
    if decisive is not None and v.verdict == CONTRADICTED:
        # the p shown is the strongest contradicting step's: the evidence the verdict rests on
        step = min((c for c, d in zip(comps, decisive) if d), key=lambda c: c.p_adj)
    else:
        step = weakest(comps)
    v.p = step.p_adj
    v.n_needed = step.n_needed
    v.no_finite_n = step.n_needed is None and step.result.n > 0 and v.verdict in NOT_SIGNIFICANT
    return v


def _is_zero(x: float, comps: Sequence[Any]) -> bool:
    """``x`` (a step's difference, or their net) is 0 up to rounding: within ``stats.REL_TOL`` of the
    levels' values (a level's per-question value is a mean over systems, whose rounding can leave
    1e-16 where every question ties)."""
    size = sum(max(abs(c.result.mean_a), abs(c.result.mean_b)) for c in comps)
    return abs(x) <= stats.REL_TOL * size if math.isfinite(size) else x == 0


def _no_difference_text(v: Verdict, comps: Sequence[Any]) -> str:
    """Why a NO DIFFERENCE verdict: every step 0, the steps cancel, or the named level ties another."""
    zero = [c for c in comps if _is_zero(c.result.diff, comps)]
    if len(zero) == len(comps):
        return "no difference observed: every step's difference is 0"
    if v.kind in ("increasing", "decreasing") or not zero:
        return "no difference observed net over the steps: they cancel"
    return f"no difference observed between {zero[0].b} and {', '.join(c.a for c in zero)}"


def zero_n(tol_share: float = 0.02) -> int | None:
    """Questions a "barely moves" step needs when every difference is 0, at tol = ``tol_share`` of the scale."""
    from ragsweep.analysis import bounded

    return bounded.n_for([0.0], tol_share, 1.0)


def _test_text(c: Any, tol: float) -> str:
    """What a step's p tests, for the steps table."""
    how = "PPI++ normal" if c.method else "betting"
    return {"within": f"95% {how} CI within ±{tol:g}", "beyond": f"95% {how} CI beyond ±{tol:g}",
            UNTESTABLE: f"not testable: {c.why_untestable}"}.get(c.hypothesis or "", "mean = 0")


def weakest(comps: Sequence[Any]) -> Any:
    """The limiting step: the largest Holm p; among equal p, the one that would need the most
    questions (an undefined power n - a zero difference, which no finite n detects - counts as
    the most)."""
    def key(c: Any) -> tuple[float, float]:
        p = c.p_adj if math.isfinite(c.p_adj) else math.inf
        return (p, math.inf if c.n_needed is None else float(c.n_needed))

    return max(comps, key=key)


def power_text(v: Verdict) -> str:
    if v.verdict not in NOT_SIGNIFICANT:
        return "-"
    if v.n_needed:
        return str(v.n_needed)
    return "no finite n" if v.no_finite_n else "-"


def directions_markdown(verdicts: Sequence[Verdict], runs: SweepRuns, spec_source: str, judge: str = "",
                        extra: Sequence[str] = ()) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}
    out = [
        f"# Paper directions: {runs.experiment}",
        "",
        f"Parent run `{runs.parent_id}` ({runs.parent_name}), {len(runs.children)} finished systems. "
        f"Directions from {spec_source}.",
        "",
    ]
    if judge:
        out += [f"Judge: {judge}", ""]
    out += list(extra)
    if verdicts:
        out += ["| metric | vs | expected | observed: mean [95% CI] (n) per level | verdict | p (Holm, deciding step) | n | questions for 80% power | paper | note |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for v in verdicts:
            obs = "; ".join(
                f"{value_label(v.param, val)} {fmt(m)} [{fmt(lo)}, {fmt(hi)}] ({n})" for val, m, lo, hi, n in v.values
            ) or v.observed
            if v.verdict in (NO_DATA, NOT_TESTABLE, NO_DIFF_NS) and v.detail:
                obs = f"{obs} — {v.detail}" if obs else v.detail
            if v.left_out:
                obs = f"{obs} — {v.left_out}"
            power = power_text(v)
            out.append("| " + " | ".join(md_cell(x) for x in (
                v.metric, v.param, v.expected, obs, f"**{v.verdict}**", p_text(v.p) if v.p is not None else "-",
                v.n if v.n is not None else "-", power, v.paper, v.note)) + " |")
        out += ["", "Summary: " + ", ".join(f"{counts[k]} {k.lower()}" for k in VERDICTS) + "."]
        stepped = [v for v in verdicts if v.steps]
        if stepped:
            out += ["", "### Steps", "", "| metric | step | B - A | 95% CI | n | test | p | p (Holm) |", "|---|---|---|---|---|---|---|---|"]
            for v in stepped:
                for st in v.steps:
                    out.append("| " + " | ".join(md_cell(x) for x in (
                        v.metric, st["comparison"], f"{st['diff']:+.3g}",
                        f"[{st['ci_low']:+.3g}, {st['ci_high']:+.3g}]" if math.isfinite(st["ci_low"]) else "n/a",
                        st["n"], st.get("test", "mean = 0"), p_text(st["p"]), p_text(st["p_holm"]))) + " |")
    else:
        out.append("No paper directions in the sweep spec.")
    out += [
        "",
        "## Rules",
        "",
        "- A level's value for a question (e.g. k=10) is the mean over the finished systems with that value "
        "(so over the other swept parameters) of their values for that question; a question counts for a level "
        "only when every system of the level scored it. A system for which the metric is undefined on every question, "
        "none of them failed (TRACe relevance of a closed-book prompt), is in no level's mean; a 'higher for' / 'lower for' "
        "level made only of such systems is left out of the comparisons, and the row says so. "
        "Values are sorted numerically; categorical ones in the sweep's order.",
        "- Each step (consecutive levels for increasing / decreasing / barely moves; the named level against each "
        "other one for higher for / lower for) is a paired comparison over the questions both levels scored.",
        f"- REPRODUCED: every step goes the expected way and is significant (Holm-adjusted p < {ALPHA}); for "
        "'barely moves', every step's 95% betting interval of the mean difference (valid on the metric's range "
        "[-scale, +scale] whatever the distribution of differences) lies inside ±tol (default 2% of the scale), "
        "Holm-adjusted with the rest. No verdict but NO DATA, NOT TESTABLE or NOT SIGNIFICANT is possible below "
        f"{stats.min_n(ALPHA)} questions: the test cannot reach alpha there; 'barely moves' needs far more (at the "
        f"default tol, {zero_n()} questions whose differences are all 0; fewer only at a tol near the scale, "
        f"{zero_n(0.9)} at 90% of it).",
        "- CONTRADICTED: some step goes the other way, significantly; for 'barely moves', some step's interval "
        "lies outside ±tol (Holm-adjusted), not merely away from 0.",
        "- SAME DIRECTION, NOT SIGNIFICANT: the observed change goes the expected way (net over the steps) but not "
        "every step is significant: the data cannot tell. p, n and the questions column are the deciding step's: for "
        "CONTRADICTED the most significant contradicting step, otherwise the weakest (the "
        "largest Holm p; among equal p, the one needing the most questions): how many questions a paired test "
        "would need to detect its observed difference at 80% power, 'no finite n' when that difference is zero; "
        "for 'barely moves', how many questions like these its interval would need to lie inside (or outside) ±tol.",
        "- OPPOSITE DIRECTION, NOT SIGNIFICANT: the observed change goes the other way, not significantly; for "
        "'barely moves': some step changed by more than ±tol, not significantly (it may move; the data cannot tell).",
        "- NO DIFFERENCE, NOT SIGNIFICANT: the observed change is 0 (net over the steps; for higher / lower for, the "
        "smallest step), e.g. every question ties: neither the expected way nor the other. The questions column "
        "says 'no finite n' when the deciding step's difference is 0. ('Barely moves' has no such case: a step of 0 "
        "lies within ±tol.)",
        "- NOT TESTABLE: no valid test of the expectation exists, whatever the number of questions: for 'barely "
        "moves', the metric has no known range (the metric registry states no finite scale: a count, or a metric it "
        "does not know; no range is guessed), tol is at or above the range (every step lies within it), or a value "
        "lies outside the range.",
        "- NO DATA: the parameter has fewer than two values, a named value is not swept, the metric is missing or "
        "undefined at some level, or the runs have no per-question values.",
        "- " + RULES,
    ]
    return "\n".join(out) + "\n"
