"""The default run's wall time, cold and warm, with where the seconds go.

    python experiments/benchmarks/bench_default_run.py                 # ragsweep dataset.limit=20, cold then warm
    python experiments/benchmarks/bench_default_run.py --limit 5 -- generator.server.n_threads=1

Each run is a fresh ``ragsweep`` process in a scratch directory: cold = empty cache and MLflow
store (every model call made), warm = the same command again (every stage from the cache). The
stage breakdown is the run's own ``time/*`` metrics; "outside stages" is the rest of the process
(Python imports, Hydra, MLflow's store and logging). Prints a Markdown table and appends it to
``experiments/results/bench_default_run.md`` (``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from common import cpu_line, run_once

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_default_run.md"


def served_params(cwd: Path) -> str:
    """What answered the cold run (its ``served/*`` params: format, CPU variant, engine)."""
    import sqlite3

    try:
        rows = sqlite3.connect(cwd / "mlruns" / "mlflow.db").execute(
            "select key, value from params where key like 'served/%' order by key").fetchall()
    except sqlite3.Error:
        return "?"
    return ", ".join(f"{k.split('/', 1)[1]}={v}" for k, v in dict(rows).items()) or "?"


def table(results: dict[str, tuple[float, dict[str, float]]]) -> str:
    names = [s for s in ("load", "chunk", "index", "retrieve", "server_start", "prompt", "generate", "evaluate")
             if any(s in st for _, st in results.values())]
    head = "| run | wall s | " + " | ".join(names) + " | outside stages |"
    rows = [head, "|" + "---|" * (len(names) + 3)]
    for label, (wall, st) in results.items():
        rest = wall - sum(st.values())
        rows.append(f"| {label} | {wall:.1f} | " + " | ".join(f"{st.get(n, 0.0):.1f}" for n in names) + f" | {rest:.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=20, help="questions (dataset.limit)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra ragsweep overrides (after --)")
    args = ap.parse_args(argv)
    overrides = [f"dataset.limit={args.limit}", *args.overrides]

    loads = []
    with tempfile.TemporaryDirectory(prefix="ragsweep-bench-") as tmp:
        cwd = Path(tmp)
        loads.append(os.getloadavg())
        cold = run_once(cwd, overrides)
        loads.append(os.getloadavg())
        warm = run_once(cwd, overrides)
        served = served_params(cwd)
    results = {"cold": cold[:2], "warm": warm[:2]}
    text = (f"### `ragsweep {' '.join(overrides)}` on {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
            f"{time.strftime('%Y-%m-%d %H:%M')}\n\n{cpu_line()}\n\nserved: {served}; load average (1/5/15 min) before "
            f"cold: {' '.join(f'{x:.2f}' for x in loads[0])}, before warm: {' '.join(f'{x:.2f}' for x in loads[1])}"
            f"\n\n{table(results)}\n")
    print(text)
    print(cold[2])
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
