"""Which verdicts of the papers' diagnoses does another judge change? The same sweeps, two judges, one table.

    python -m experiments.meta_eval.verdicts_by_judge \\
        --pair reports/reproduce_topk20 reports/reproduce_topk20_trained [--pair A B ...] \\
        --names "offline judge" "trained checker (step 4,000, not shipped)" \\
        --out experiments/results/reproduce/verdicts_by_judge.md

Each ``--pair`` is two ``ragsweep-reproduce --out`` folders of the same sweeps over the same
questions, the second with another judge (e.g. ``evaluator/checker=trained
evaluator.checker.weights=FILE``): the answers come from the shared cache, so only the judging
differs. Read from each folder's ``state.json`` (every direction's verdict, deciding step, interval and
the questions 80% power needs, as ``ragsweep-reproduce`` recorded them); a direction is matched by
sweep, metric and swept parameter, and a pair whose question counts differ is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence


def sweeps(folder: Path) -> dict[str, dict[str, Any]]:
    """experiment name -> its recorded sweep (``state.json`` of ``ragsweep-reproduce --out``)."""
    state = folder / "state.json"
    if not state.is_file():
        raise SystemExit(f"{state}: not found (a --pair folder is a ragsweep-reproduce --out folder)")
    out: dict[str, dict[str, Any]] = {}
    for key, rec in json.loads(state.read_text(encoding="utf-8"))["sweeps"].items():
        if rec.get("status") != "finished" or not rec.get("directions"):
            continue
        out[key.split()[0]] = rec
    return out


def cell(d: dict[str, Any] | None) -> str:
    if d is None:
        return "-"
    verdict = d["verdict"].lower()
    bold = verdict in ("reproduced", "contradicted")
    v = f"**{d['verdict']}**" if bold else verdict
    step = ""
    if d.get("diff") is not None and d.get("ci"):
        lo, hi = d["ci"]
        step = f"; {d['step']}: {d['diff']:+.3g} [{lo:+.3g}, {hi:+.3g}]"
    power = d.get("n_for_80pct_power")
    return f"{v}{step}" + (f"; 80% power at {power:,}" if power else "")


def rows(a: Path, b: Path) -> list[tuple[str, str, int, str, str, bool]]:
    sa, sb = sweeps(a), sweeps(b)
    out = []
    for name in [x for x in sa if x in sb]:
        ra, rb = sa[name], sb[name]
        na = {(d["metric"], d["param"]): d for d in ra["directions"]}
        nb = {(d["metric"], d["param"]): d for d in rb["directions"]}
        for key in [*na, *(k for k in nb if k not in na)]:  # the sweep's order of directions
            da, db = na.get(key), nb.get(key)
            if da and db and da["n"] != db["n"]:
                raise SystemExit(f"{name} {key[0]}: n = {da['n']} in {a}, {db['n']} in {b}: not the same questions")
            n = (da or db)["n"]
            changed = (da or {}).get("verdict") != (db or {}).get("verdict")
            metric = f"{key[0].split('/')[-1].replace('_', ' ')} ({(da or db)['expected']})"
            out.append((name, metric, n, cell(da), cell(db), changed))
    return out


def render(pairs: Sequence[tuple[Path, Path]], names: Sequence[str], command: str) -> str:
    table = [r for a, b in pairs for r in rows(a, b)]
    changed = sum(r[5] for r in table)
    lines = [f"# The diagnoses' verdicts under two judges: {names[0]} against {names[1]}", "",
             f"`{command}`", "",
             f"{len(table)} directions, {changed} verdict(s) changed by the judge (marked). The answers are the same "
             "(the shared cache); only the checking of claims differs. The retriever's claim recall and context "
             "precision are a judge's numbers too (the ground truth's claims checked against the retrieved "
             "chunks).", "",
             f"| sweep | direction (expected) | n | {names[0]} | {names[1]} | changed |", "|---|---|---|---|---|---|"]
    from ragsweep.analysis.report.markdown import md_cell as esc  # a '|' in a cell ("|step| <= 2") splits the row

    lines += [f"| {s} | {esc(m)} | {n} | {esc(x)} | {esc(y)} | {'**yes**' if c else ''} |" for s, m, n, x, y, c in table]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.meta_eval.verdicts_by_judge", description=__doc__.split("\n")[0])
    p.add_argument("--pair", nargs=2, action="append", required=True, metavar=("A", "B"),
                   help="two ragsweep-reproduce --out folders: the same sweeps, judge A and judge B")
    p.add_argument("--names", nargs=2, default=("judge A", "judge B"), help="the two judges' names in the table")
    p.add_argument("--out", default=None, help="Markdown page (default: print it)")
    args = p.parse_args(argv)
    pairs = [(Path(a), Path(b)) for a, b in args.pair]
    command = "python -m experiments.meta_eval.verdicts_by_judge " + " ".join(
        f"--pair {a} {b}" for a, b in args.pair) + " --names " + " ".join(f'"{n}"' for n in args.names)
    page = render(pairs, args.names, command)
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
