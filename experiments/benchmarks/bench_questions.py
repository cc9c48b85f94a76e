"""How fast ``ragsweep-questions`` makes questions, and how many survive each check (issue 37, speed).

Two runs over the same folder of real files (default: the 53 files of experiments/benchmarks/own_docs/build.sh),
each with a fresh generation cache (the parses warmed first, so parsing is not what is timed):

* the embedded model (SmolLM2-135M on llama.cpp, the default ``generator=llamacpp``) on this machine's cores;
* a fake OpenAI-compatible endpoint that answers at once (tests/fake_openai_server.py, drafts copied
  from the passages it is shown): what is left is the tool's own time (sampling, grounding, MiniLM,
  the checker, writing, MLflow).

    python experiments/benchmarks/bench_questions.py [--folder DIR] [--embedded 12] [--fake 200]

Prints and writes experiments/results/bench_questions.md: wall time, time per step, candidates and
kept questions per minute, the share left after each check, with the CPU model and load average.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # tests/fake_openai_server.py

from common import QUESTIONS_CORPORA, QUESTIONS_OUT, machine, question_responder  # noqa: E402

def run(folder: Path, n: int, model: list[str], work: Path, label: str) -> dict:
    out = work / f"{label}.jsonl"
    db = work / "mlflow.db"
    cmd = [sys.executable, "-m", "ragsweep.pipeline.questions.cli", "-q", "dataset=files", f"dataset.path={folder}", f"n={n}",
           "oversample=1", f"out={out}", f"cache_dir={work / 'cache'}", f"mlflow.tracking_uri=sqlite:///{db}",
           f"mlflow.artifact_location={work / 'art'}", f"run_name={label}", *model]
    before = machine()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "RAGSWEEP_FAKE_KEY": "sk-x"})
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{label}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    from mlflow.tracking import MlflowClient

    cl = MlflowClient(tracking_uri=f"sqlite:///{db}")
    (r,) = cl.search_runs([cl.get_experiment_by_name("questions").experiment_id], f"attributes.run_name = '{label}'")
    return {"label": label, "n": n, "wall_s": wall, "machine_before": before, "machine_after": machine(),
            "metrics": dict(r.data.metrics), "summary": proc.stdout}


def from_ranking_runs() -> list[dict]:
    """The embedded model's figures from the generations of experiments/benchmarks/questions_ranking.py (its MLflow
    runs and summaries), where the machine had no time for a second embedded run."""
    from mlflow.tracking import MlflowClient

    db = ROOT / "experiments" / "results" / "tmp" / "questions_mlflow.db"
    cl = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = cl.get_experiment_by_name("questions")
    rows = []
    for name in QUESTIONS_CORPORA:
        summary = QUESTIONS_OUT / f"{name}.summary.txt"
        run_id = re.search(r"MLflow run (\w+)", summary.read_text(encoding="utf-8")) if summary.exists() else None
        if exp is None or run_id is None:
            continue
        text = summary.read_text(encoding="utf-8").splitlines()
        field = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in text[:4] if ":" in ln}
        m = dict(cl.get_run(run_id.group(1)).data.metrics)
        rows.append({"label": f"embedded-smollm2 on {name} (questions_ranking.py generate)", "n": int(m["questions/candidates"]),
                     "wall_s": float(next(ln.split()[1][:-1] for ln in text if ln.startswith("wall "))),
                     "machine_before": field.get("machine at start", "?"), "machine_after": field.get("machine at end", "?"),
                     "metrics": m, "summary": ""})
    return rows


def markdown(rows: list[dict], folder: Path) -> str:
    from ragsweep.pipeline.questions.generate import REASONS

    lines = ["# ragsweep-questions: speed and survival", "",
             f"`python experiments/benchmarks/bench_questions.py` over `{folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}` "
             "(parses warmed, a fresh generation cache per run, `oversample=1`: every candidate is generated); with "
             "`--ranking-runs`, also the embedded model's generations of `experiments/benchmarks/questions_ranking.py` (their "
             "built-in corpora, `oversample=1`).", ""]
    for r in rows:
        m = r["metrics"]
        steps = ", ".join(f"{k[5:-2]} {v:.1f}s" for k, v in sorted(m.items()) if k.startswith("time/") and k != "time/total_s")
        lines += [f"## {r['label']}", "", f"Machine: {r['machine_before']} (at start); {r['machine_after']} (at end).", "",
                  f"- {int(m['questions/candidates'])} candidates, {int(m['questions/kept'])} kept, wall {r['wall_s']:.1f}s "
                  f"(the command, Python start included; in the command {m['time/total_s']:.1f}s)",
                  f"- candidates per minute {m['questions/candidates_per_minute']:.2f}, kept per minute "
                  f"{m['questions/kept_per_minute']:.2f}",
                  f"- time per step: {steps}",
                  f"- model calls: {int(m.get('generator/calls', 0))} ({int(m.get('generator/completion_tokens', 0))} completion tokens), "
                  f"{int(m.get('generator/cache_hits', 0))} requests answered from the cache (an earlier interrupted attempt's)"
                  if m.get("generator/cache_hits") else
                  f"- model calls: {int(m.get('generator/calls', 0))} ({int(m.get('generator/completion_tokens', 0))} completion tokens)",
                  "", "| check | dropped | left after it (share of candidates) |", "|---|---|---|"]
        for reason in REASONS:
            lines.append(f"| {reason} | {int(m[f'questions/dropped_{reason}'])} | {m[f'questions/survive_{reason}']:.1%} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", default=str(ROOT / "experiments" / "data" / "own_docs"))
    ap.add_argument("--embedded", type=int, default=12, help="candidates through the embedded model (0: skip)")
    ap.add_argument("--fake", type=int, default=200, help="candidates through the instant fake endpoint (0: skip)")
    ap.add_argument("--ranking-runs", action="store_true",
                    help="add the embedded model's figures from questions_ranking.py's generations (its corpora, not the folder)")
    args = ap.parse_args(argv)
    folder = Path(args.folder).resolve()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_questions_") as tmp:
        work = Path(tmp)
        from ragsweep.corpus.dataset.files import FilesDataset

        FilesDataset(path=str(folder), cache_dir=str(work / "cache"), progress=False).load_corpus()  # parses warmed
        if args.fake:
            from fake_openai_server import FakeOpenAIServer

            with FakeOpenAIServer(responder=question_responder, max_seconds=7200, max_requests=100_000) as fake:
                rows.append(run(folder, args.fake, ["generator=external", f"generator.server.base_url={fake.base_url}",
                                                    "generator.server.model=fake", "generator.server.api_key_env=RAGSWEEP_FAKE_KEY",
                                                    "generator.concurrency=8"], work, "fake-endpoint"))
        if args.embedded:
            rows.append(run(folder, args.embedded, [], work, "embedded-smollm2"))
    if args.ranking_runs:
        rows += from_ranking_runs()
    md = markdown(rows, folder)
    (ROOT / "experiments" / "results" / "bench_questions.md").write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
