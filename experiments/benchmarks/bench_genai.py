"""What issue 38's MLflow GenAI pieces cost a run, on the built-in ClapNQ questions:

    python experiments/benchmarks/bench_genai.py [--questions 300] [--scored 20]

- the question set as an evaluation dataset: the first run of a set creates it (``create_dataset``
  + ``merge_records`` of every question) and logs it as the run's input; every later run finds it
  by name and logs it (``log_question_set``), seconds each;
- the expectations on the traces: sending the run's traces (``send_traces``) with and without them;
- ragsweep's scorers in ``mlflow.genai.evaluate`` (offline judge): seconds for ``--scored`` traces,
  cold (a fresh cache) and warm (the same traces again: every claim and check from the cache).

Prints the CPU model (lscpu) and the load average with the figures; a fresh sqlite store in a
temporary folder each time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                  if line.startswith("Model name")), "?")
    return f"{model}, {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--scored", type=int, default=20)
    args = ap.parse_args()
    import mlflow

    import ragsweep
    from ragsweep.corpus.dataset import ClapNQ
    from ragsweep.tracking import Tracker, genai
    from ragsweep.tracking.traces import send_traces

    print(f"machine: {machine()}; MLflow {mlflow.__version__}")
    ds = ClapNQ(limit=args.questions).load()
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        tracker = Tracker(uri, f"{tmp}/art", "bench")
        times = []
        for i in range(3):
            tracker.start(f"system{i}")
            t0 = time.perf_counter()
            out = genai.log_question_set(tracker, ds)
            times.append(time.perf_counter() - t0)
            tracker.end()
        print(f"question set of {len(ds.queries)} questions: created and logged in {times[0]:.2f}s; found and logged "
              f"in {times[1]:.2f}s, {times[2]:.2f}s ({out['name']})")

        docs = ds.doc_index
        recs = [{"query_id": q.query_id, "query": q.query, "gt_answer": q.gt_answer, "response": "",
                 "gt_answer_claims": [q.gt_answer], "metrics": {"retrieval/recall_at_k": 1.0},
                 "relevant_spans": [{"doc_id": s.doc_id, "start": s.start, "end": s.end} for s in q.relevant],
                 "retrieved_context": [{"doc_id": s.doc_id, "chunk_id": f"{s.doc_id}#{s.start}", "start": s.start, "end": s.end,
                                        "text": docs[s.doc_id].text[s.start:s.end]} for s in q.relevant]} for q in ds.queries]
        bare = [{k: v for k, v in r.items() if k not in ("gt_answer", "gt_answer_claims", "relevant_spans")} for r in recs]
        for label, batch in (("without expectations", bare), ("with expectations", recs)):
            rid = tracker.start(label)
            t0 = time.perf_counter()
            res = send_traces(tracker, batch, judge="offline", run_id=rid, spool=False)
            print(f"send_traces, {len(batch)} traces {label}: {time.perf_counter() - t0:.2f}s "
                  f"({res['assessments']} assessments)")
            tracker.end()

        data = ragsweep.mlflow_traces("bench", run=rid, tracking_uri=uri).head(args.scored)
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment("bench")
        scorers = ragsweep.mlflow_scorers(["ragchecker/retriever/claim_recall", "ragchecker/overall/recall",
                                           "trace/relevance"], cache_dir=f"{tmp}/cache")
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            mlflow.genai.evaluate(data=data, scorers=scorers)
            print(f"mlflow.genai.evaluate, {len(data)} traces x {len(scorers)} ragsweep scorers ({label} cache): "
                  f"{time.perf_counter() - t0:.1f}s")
            scorers = ragsweep.mlflow_scorers([s.name for s in scorers], cache_dir=f"{tmp}/cache")  # a new judge, same cache


if __name__ == "__main__":
    main()
