"""Dataclasses or pydantic for ragsweep's records: time to read and write the shipped RAGChecker
fixture (10 records with claims and matrices) with :mod:`ragsweep.records` (dataclasses) and with
equivalent pydantic v2 models (the same fields and the same unknown-key handling).

    python experiments/benchmarks/bench_records.py [--reps 1000]

Prints the median of 5 timings of ``reps`` read+write round trips for each, and the import time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Union

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "ragchecker" / "examples_checking_outputs.json"


def pydantic_models():
    from pydantic import BaseModel, ConfigDict

    class PChunk(BaseModel):
        model_config = ConfigDict(extra="allow")
        doc_id: str
        text: str
        chunk_id: Optional[str] = None
        score: Optional[float] = None
        start: Optional[int] = None
        end: Optional[int] = None

    class PFailure(BaseModel):
        stage: str
        reason: str

    class PRecord(BaseModel):
        model_config = ConfigDict(extra="allow")
        query_id: str
        query: str
        gt_answer: Optional[str] = None
        response: str = ""
        retrieved_context: list[PChunk] = []
        response_claims: Optional[list[Union[str, list[str]]]] = None
        gt_answer_claims: Optional[list[Union[str, list[str]]]] = None
        answer2response: Optional[list[Optional[str]]] = None
        response2answer: Optional[list[Optional[str]]] = None
        retrieved2response: Optional[list[list[Optional[str]]]] = None
        retrieved2answer: Optional[list[list[Optional[str]]]] = None
        metrics: dict[str, Optional[float]] = {}
        failure: Optional[PFailure] = None
        error: Optional[str] = None

    return PRecord


def timed(fn, reps: int) -> float:
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def import_seconds(stmt: str) -> float:
    out = subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.records import QuestionRecord

    results: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["results"]
    PRecord = pydantic_models()

    def dc() -> None:
        for r in results:
            QuestionRecord.from_json(r).to_json()

    def pd() -> None:
        for r in results:
            PRecord.model_validate(r).model_dump(exclude_none=True)

    assert [QuestionRecord.from_json(r).to_json() for r in results] == results
    t_dc, t_pd = timed(dc, args.reps), timed(pd, args.reps)
    n = args.reps * len(results)
    print(f"{len(results)} records x {args.reps} round trips (read + write), median of 5:")
    print(f"  dataclasses (ragsweep.records): {t_dc:.3f} s  ({1e6 * t_dc / n:.1f} us per record)")
    print(f"  pydantic v2 models:             {t_pd:.3f} s  ({1e6 * t_pd / n:.1f} us per record)")
    print(f"  import: ragsweep.records {import_seconds('import ragsweep.records'):.3f} s, "
          f"pydantic {import_seconds('import pydantic; pydantic.BaseModel'):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
